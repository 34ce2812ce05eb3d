"""Build the bundled human-labelled example (``example-human``) from the SQuALITY human evaluation.

Source: SQuALITY (Wang, Pang, Chen, Phang and Bowman, "SQuALITY: Building a Long-Document
Summarization Dataset the Hard Way", EMNLP 2022), https://github.com/nyu-mll/SQuALITY, commit
dc08d4f574639d773bc64ef3ab3527043108fb4e, files ``data/human-eval/all-responses.jsonl`` (the human
evaluation: 100 questions x 3 answers, each rated 0-100 by three of four reviewers) and
``data/v1-3/txt/test.jsonl`` (the four reference answers per question). Licence: CC BY 4.0
(``data/LICENSE``); the stories themselves are not shipped.

Each question's ``human`` answer is one of its four references (matched by text); the other three
are the references of all three answers, as in the paper's metric correlations.

    python scripts/build_example_human.py SQUALITY_DIR
    # SQUALITY_DIR holds all-responses.jsonl and test.jsonl
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src" / "ragmeter" / "data" / "example_human" / "samples.jsonl.gz"
SYSTEMS = ("bart", "bart-dpr", "human")
#: SQuALITY rating name -> the column it becomes
RATINGS = {"correctness-rating": "human", "selection-rating": "human_coverage",
           "overall-rating": "human_overall"}


def build(src: Path) -> list[dict]:
    refs_by_passage = {}
    for line in (src / "test.jsonl").read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        refs_by_passage[d["metadata"]["passage_id"]] = d
    rows = []
    for line in (src / "all-responses.jsonl").read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        story = refs_by_passage[d["passage-id"]]
        for qk, answers in sorted(d["questions"].items(), key=lambda kv: int(kv[0])):
            q = story["questions"][int(qk)]
            refs = [r["response_text"].strip() for r in q["responses"]]
            held_out = [i for i, r in enumerate(refs) if r == answers["human"]["response"].strip()]
            if len(held_out) != 1:
                raise SystemExit(f"passage {d['passage-id']} question {qk}: the human answer matches "
                                 f"{len(held_out)} references")
            references = [r for i, r in enumerate(refs) if i != held_out[0]]
            for system in SYSTEMS:
                a = answers[system]
                row = {"id": f"squality-{d['passage-id']}-q{q['question_number']}-{system}",
                       "question": q["question_text"].strip(),
                       "answer": a["response"].strip(),
                       "references": references}
                for rating, column in RATINGS.items():
                    row[column] = {f"w{rv['worker_id']}": rv[rating]
                                   for rv in sorted(a["reviews"], key=lambda rv: int(rv["worker_id"]))}
                row["metadata"] = {"source": "SQuALITY human evaluation", "passage_id": d["passage-id"],
                                   "question_number": q["question_number"], "system": system}
                rows.append(row)
    return rows


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        raise SystemExit(__doc__)
    rows = build(Path(argv[0]))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
    with OUT.open("wb") as raw, gzip.GzipFile(filename="samples.jsonl", mode="wb", fileobj=raw,
                                             compresslevel=9, mtime=0) as fh:
        fh.write(text)
    print(f"wrote {OUT}: {len(rows)} rows, {len(text):,} bytes, {OUT.stat().st_size:,} compressed")


if __name__ == "__main__":
    main(sys.argv[1:])
