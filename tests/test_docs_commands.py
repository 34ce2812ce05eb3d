"""Every ``ragmeter …`` command shown in README.md and docs/*.md runs, with its documented exit status.

What counts as a command: a line of a fenced block labelled ``bash``, ``sh``, ``shell``,
``console``, ``text`` or unlabelled that starts with ``ragmeter``, ``.venv/bin/ragmeter`` or
``$ ragmeter``; ``\\`` continuations are joined and a comment after `` #`` is cut off.

The documented exit status is 0 unless the command's comment starts with ``exit N`` or
``exits N`` (``ragmeter gate worse --baseline good          # exit 1``); docs/exit-codes.md says
what each status means. The command must end with exactly that status and print no traceback.

How a command is written in the docs and how it is run here:

- ``a|b|c`` inside a word (``--format csv|parquet|jsonl|xlsx``) is one command per alternative;
  a ``|`` between words pipes the output into a program (only ``jq`` is used: the output must be
  JSON).
- ``[...]`` marks optional words: they are run (the command with every option it shows); ``X ...``
  (a repeatable word) is run once.
- Placeholders (``RUN``, ``TASK``, ``data.jsonl``, ``suite.yaml``, ``$GITHUB_STEP_SUMMARY`` ...)
  are the runs, tasks and files of one prepared folder (:func:`write_files`, :data:`WORLD`,
  :data:`PLACEHOLDERS`, :data:`FILE_VARIANTS`): every command runs in a fresh copy of it, with its own store (``RAGMETER_DB``), the bundled data, and
  a local scripted judge (tests/judge_server.py: ``OPENAI_BASE_URL`` points at it and the key is a
  dummy, so ``--judge openai:gpt-4o-mini`` never leaves the machine).
- A command that needs a service outside this machine runs under one of the :data:`RULES`, each
  with its reason; there are few of them. ``ragmeter serve`` is started on a free port, must
  answer ``GET /``, and is stopped.

A command with a word the test does not know (a new placeholder, a file no fixture makes) fails
as such: a new documented command is run from the day it is written, or the test says why not.
"""

from __future__ import annotations

import csv
import itertools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from filelock import FileLock

ROOT = Path(__file__).resolve().parents[1]
RAGMETER = Path(sys.executable).with_name("ragmeter")
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SHELL_BLOCKS = {"", "bash", "sh", "shell", "console", "text"}
_FENCE = re.compile(r"^\s*(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
_START = re.compile(r"^(?:\$\s+)?(?:\.venv/bin/)?ragmeter(?=\s|$)")
_EXIT = re.compile(r"^exits?\s+(?P<code>\d)\b")


# ---- finding the commands -----------------------------------------------------------------------
@dataclass(frozen=True)
class DocCommand:
    """One command as the docs show it: where, the words after ``ragmeter``, its comment and the
    exit status the docs give it."""

    path: str
    line: int
    words: str
    comment: str
    expected: int

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def _split_comment(text: str) -> tuple[str, str]:
    """``(command, comment)``: the comment starts at the first `` #`` outside quotes."""
    quote = None
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i].rstrip(), text[i + 1:].strip()
    return text.rstrip(), ""


def extract(path: Path) -> list[DocCommand]:
    """Every command of the shell-like fenced blocks of one Markdown file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    rel = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
    out: list[DocCommand] = []
    fence: str | None = None
    lang = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        if fence is None:
            m = _FENCE.match(line)
            if m:
                fence, lang = m.group("fence"), m.group("lang").lower()
            i += 1
            continue
        stripped = line.strip()
        if stripped.startswith(fence) and not stripped.strip(fence[0]):
            fence = None
            i += 1
            continue
        if lang in SHELL_BLOCKS and _START.match(stripped):
            start = i
            text = stripped
            while text.endswith("\\") and i + 1 < len(lines):
                i += 1
                text = text[:-1].rstrip() + " " + lines[i].strip()
            command, comment = _split_comment(text)
            words = _START.sub("", command, count=1).strip()
            m = _EXIT.match(comment)
            out.append(DocCommand(rel, start + 1, words, comment, int(m.group("code")) if m else 0))
        i += 1
    return out


def documented() -> list[DocCommand]:
    return [c for p in DOCS for c in extract(p)]


# ---- from the docs' notation to argument lists ---------------------------------------------------
_OPTIONAL = re.compile(r"\[([^\[\]]*)\]")


def variants(words: str) -> list[tuple[str, str]]:
    """``(label, words)`` for each command a documented line stands for: alternatives ``a|b`` are
    one command each, ``[optional]`` parts are kept, ``X ...`` repetition is dropped."""
    text = words
    while _OPTIONAL.search(text):
        text = _OPTIONAL.sub(lambda m: m.group(1), text)
    text = re.sub(r"(\S)\.\.\.(?=\s|$)", r"\1", text)  # "[-m MEASURE]..." -> once
    text = re.sub(r"(?<=\s)(?P<word>[^\s-]\S*) \.\.\.(?=\s|$)", r"\g<word>", text)  # "RUN ..." -> once
    text = re.sub(r"\s+", " ", text).strip()
    head, _, pipe = text.partition(" | ")
    parts = shlex.split(head, posix=False)
    choices = [p.split("|") if "|" in p and not p.startswith(("'", '"')) else [p] for p in parts]
    out = []
    for combo in itertools.product(*choices):
        label = ",".join(c for c, p in zip(combo, choices, strict=True) if len(p) > 1)
        out.append((label, " ".join(combo) + (f" | {pipe}" if pipe else "")))
    return out


# ---- where the commands run -----------------------------------------------------------------------
#: the docs' local OpenAI-compatible system under test; the scripted server plays it
DOC_TARGET = "http://127.0.0.1:8000/v1"

#: placeholder -> its values, used in order of appearance in a command (``report RUN RUN``: two
#: runs); per documentation file where a name means something else there
PLACEHOLDERS: dict[str, dict[str, list[str]]] = {
    "*": {"RUN": ["good", "worse"], "RUN_A": ["good"], "RUN_B": ["worse"], "RUN_C": ["candidate"],
          "M": ["recall@5"], "TASK": ["pilot-labels"], "FILE.csv": ["ratings.csv"], DOC_TARGET: ["{target}"]},
    # a run with human labels and the judge metrics a composite, a calibration and a task read
    "docs/agent.md": {"RUN": ["judged"]},
    "docs/human.md": {"RUN": ["judged"]},
    "docs/meta-eval.md": {"RUN": ["judged"]},
    # trec_eval's synopsis: RUN is a TREC run file there
    "docs/metrics/retrieval.md": {"QRELS": ["qrels.txt"], "RUN": ["run.txt"], "MEASURE": ["map"],
                                  "LEVEL": ["1"], "N": ["100"]},
}
#: parts of words standing for a path on the reader's machine
PATHS = {"/models/my-st-model": "{model_dir}"}
#: what a placeholder looks like: RUN, RUN_A, FILE.csv, ..., <name>, $VARIABLE
_PLACEHOLDER_WORD = re.compile(r"^(?:[A-Z](?:[A-Z_]*[A-Z])?(?:\.[a-z]+)?|\.\.\.|<[^>]*>)$|\$\{?\w+")


@dataclass(frozen=True)
class Rule:
    """How a command that needs what this machine does not have is run instead, and why: the
    options in ``drop`` are left out (each with its value)."""

    pattern: str
    drop: tuple[str, ...]
    reason: str


RULES = [
    Rule(r"--ray-address\s", ("--engine", "--ray-address"),
         "a Ray cluster is not here: run on the local engine (the same metric objects; "
         "tests/test_engine_ray_commands.py runs eval, grid and monitor evaluate on Ray and compares)"),
    Rule(r"--engine ray", ("--engine",),
         "each command would start its own Ray runtime (about 17 s and 1 GB here): run on the local "
         "engine; tests/test_engine_ray_commands.py runs these commands on Ray and compares"),
    Rule(r"--db postgresql", ("--db",),
         "a PostgreSQL server is not here: the test's SQLite store (tests/test_store_postgres.py runs "
         "the store on PostgreSQL)"),
]
#: ``ragmeter serve`` runs until stopped: it is started on a free port, must answer ``GET /`` with
#: 200, and is stopped (that is its exit status 0)
SERVE = re.compile(r"^serve\b")


def placeholders(cmd: DocCommand) -> dict[str, list[str]]:
    return {**PLACEHOLDERS["*"], **PLACEHOLDERS.get(cmd.path, {})}


def rules_for(words: str) -> list[Rule]:
    return [r for r in RULES if re.search(r.pattern, words)]


def argv_for(cmd: DocCommand, words: str, fill: dict[str, str], env: dict[str, str]) -> tuple[list[str], str, list[str]]:
    """``(argv, pipe, unknown)``: the arguments after ``ragmeter`` with the placeholders, paths and
    ``$VARIABLES`` (from ``env``) filled in and the rules applied, the program the output is piped
    into, and the words still standing for something the test does not know."""
    head, _, pipe = words.partition(" | ")
    table = placeholders(cmd)
    used: dict[str, int] = {}
    out: list[str] = []
    for a in shlex.split(head):
        if a in table:
            nth = used[a] = used.get(a, -1) + 1
            a = table[a][min(nth, len(table[a]) - 1)].format(**fill)
        for part, value in PATHS.items():
            a = a.replace(part, value.format(**fill))
        out.append(re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), m.group(0)), a))
    drop = {d for rule in rules_for(words) for d in rule.drop}
    kept: list[str] = []
    skip = False
    for a in out:
        if skip:
            skip = False
        elif a in drop:
            skip = True  # the option and its value
        else:
            kept.append(a)
    return kept, pipe.strip(), [a for a in kept if _PLACEHOLDER_WORD.search(a)]


# ---- the prepared folder ---------------------------------------------------------------------------
def _jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def _grade(sample_id: str, low: int, high: int) -> int:
    """A made-up but fixed human label (the labels only have to be valid, not true)."""
    return low + sum(map(ord, sample_id)) % (high - low + 1)


def _eval_definition(*extra: dict) -> str:
    """An exported OpenAI eval (docs/openai-evals.md) over items.jsonl."""
    criteria = [
        {"type": "string_check", "name": "mentions_reference", "operation": "ilike",
         "input": "{{ sample.output_text }}", "reference": "{{ item.reference }}"},
        {"type": "text_similarity", "name": "close_to_reference", "evaluation_metric": "fuzzy_match",
         "input": "{{ sample.output_text }}", "reference": "{{ item.reference }}", "pass_threshold": 0.5},
        *extra,
    ]
    return json.dumps({"name": "docs example", "data_source_config": {"type": "custom", "item_schema": {
        "type": "object", "properties": {"question": {"type": "string"}, "reference": {"type": "string"}},
        "required": ["question", "reference"]}}, "testing_criteria": criteria}, indent=2)


SCORE_GRADER = {"type": "score_model", "name": "grounded", "model": "gpt-4o-mini", "range": [0, 1],
                "pass_threshold": 0.5, "input": [
                    {"role": "system", "content": "Grade how well the answer matches the reference."},
                    {"role": "user", "content": "Answer: {{ sample.output_text }}\nReference: {{ item.reference }}"}]}
PYTHON_GRADER = {"type": "python", "name": "short_answer", "pass_threshold": 0.5,
                 "source": "def grade(sample, item):\n    return 1.0 if len(sample['output_text']) < 400 else 0.0\n"}

#: docs/conversations.md's scenarios file (shorter conversations)
SCENARIOS = """scenarios:
  - id: commuter
    persona: A commuter from Halden Isle who travels every weekday.
    goal: Find out the cheapest way to travel to Port Averly every day.
    expected_outcome: The assistant explains the resident card discount and the Sound Saver.
    max_turns: 3
    stop: "goodbye"
  - persona: A driver running late.
    goal: Know what happens after vehicle check-in closes.
    expected_outcome: The car moves to the next sailing.
"""

#: (pattern on the command, {name: file of the prepared folder copied to that name}): commands that
#: read a file of the same name but another shape
FILE_VARIANTS: list[tuple[str, dict[str, str]]] = [
    (r"--openai-eval eval\.json --judge", {"eval.json": "eval-model-grader.json"}),
    (r"--allow-python-graders", {"eval.json": "eval-python-grader.json"}),
    (r"--label-range 1,5", {"labels.csv": "labels-1-5.csv"}),
]


def write_files(world: Path, samples: list[dict]) -> None:
    """The input files the docs name, made from the bundled example's samples (as ``ragmeter
    example --write`` copies them), the bundled agent example and the repository's examples/."""
    ids = [s["id"] for s in samples]
    (world / "data.jsonl").write_text(_jsonl(samples))
    (world / "logs.jsonl").write_text(_jsonl(samples))
    (world / "my-labels.jsonl").write_text(_jsonl([{**s, "human": _grade(s["id"], 1, 5)} for s in samples]))
    # docs/meta-eval.md: the model `ragmeter fit-quality my-labels.jsonl ... --out my-quality.json` writes
    shutil.copy(ROOT / "src" / "ragmeter" / "data" / "quality_offline.json", world / "my-quality.json")
    (world / "answers-without-references.jsonl").write_text(
        _jsonl([{"id": s["id"], "question": s["question"], "answer": s["answer"]} for s in samples]))
    (world / "my_expert_set.jsonl").write_text(_jsonl([
        {"id": f"expert-{i}", "question": s["question"], "references": s["references"],
         "metadata": {"type": "multi_hop", "source": "expert"}} for i, s in enumerate(samples[:5])]))
    (world / "samples.jsonl").write_text(_jsonl([  # openai/evals registry rows with a completion
        {"input": [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": s["question"]}],
         "ideal": s["references"], "completion": s["answer"]} for s in samples[:30]]))
    (world / "items.jsonl").write_text(_jsonl([
        {"item": {"question": s["question"], "reference": s["references"][0]}, "sample": {"output_text": s["answer"]}}
        for s in samples[:30]]))
    (world / "eval.json").write_text(_eval_definition())
    (world / "eval-model-grader.json").write_text(_eval_definition(SCORE_GRADER))
    (world / "eval-python-grader.json").write_text(_eval_definition(PYTHON_GRADER))
    (world / "search_config.json").write_text(json.dumps(
        {"metric_types": ["lcsstr", "fuzzy_score", "rouge1_fmeasure", "jaccard", "bert_all_MiniLM_L6_v2"]}))
    # docs/ci.md's suite, on answers the contexts support (the scripted judge finds them faithful)
    (world / "grounded.jsonl").write_text(_jsonl([
        {"id": s["id"], "question": s["question"], "answer": s["contexts"][0]["text"].split("\n\n")[-1],
         "contexts": [s["contexts"][0]["text"]], "references": s["references"]} for s in samples[:40]]))
    (world / "suite.yaml").write_text(
        "dataset: grounded.jsonl\nmetrics: [token_f1, faithfulness, hallucination]\n"
        "judge: openai:gpt-4o-mini\nthresholds: {faithfulness: 0.7, hallucination: \"<=0.2\"}\n")
    labelled = ids[:100]
    (world / "labels.csv").write_text("sample_id,label\n" + "".join(
        f"{i},{_grade(i, 0, 1)}\n" for i in labelled))
    (world / "labels-1-5.csv").write_text("sample_id,label\n" + "".join(
        f"{i},{_grade(i, 1, 5)}\n" for i in labelled))
    (world / "human100.csv").write_text("sample_id,label\n" + "".join(
        f"{i},{_grade(i, 0, 100)}\n" for i in labelled))
    with open(world / "ratings.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item", "rater", "label"])
        for i in ids[:40]:
            for r, shift in (("ana", 0), ("bruno", 1), ("carla", 0)):
                w.writerow([i, r, min(5, _grade(i, 1, 5) + shift * (_grade(i + r, 0, 2) == 0))])
    pairs = []
    for n, (a, b) in enumerate(zip(samples[0:40:2], samples[1:40:2], strict=False)):
        for rater in (1, 2):
            pairs.append({"instance_id": n, "query": a["question"], "gt_answer": a["references"][0],
                          "model1": {"model_name": "m1", "response": a["answer"]},
                          "model2": {"model_name": "m2", "response": b["answer"]},
                          "overall_label": _grade(a["id"] + str(rater), -2, 2)})
    (world / "prefs.json").write_text(json.dumps(pairs))
    (world / "human_labeled_data.json").write_text(json.dumps(pairs))
    # TREC: the example's relevant chunks as qrels, its retrieved contexts as the run
    qrels, run = [], []
    for s in samples:
        qid = s["id"]
        qrels += [f"{qid} 0 {c['id']} 1" for c in s.get("relevant", [])]
        run += [f"{qid} Q0 {c['id']} {rank} {10 - rank} docs" for rank, c in enumerate(s.get("contexts", []), 1)]
    (world / "qrels.txt").write_text("\n".join(qrels) + "\n")
    (world / "run.txt").write_text("\n".join(run) + "\n")
    (world / "scenarios.yaml").write_text(SCENARIOS)
    (world / "panel.yaml").write_text("- openai:gpt-4o-mini\n- {model: openai:gpt-4.1-mini, label: mini}\n"
                                      "- model: openai:o3-mini\n  temperature: 0\n")
    (world / "rubric.txt").write_text("Rate each answer against its contexts (1 = poor, 5 = excellent).\n")
    agent = Path(__import__("ragmeter").__file__).parent / "data" / "agent_example"
    for name in ("openai_traces.jsonl", "openai_expectations.yaml", "runs.jsonl", "rag_agent_spans.jsonl"):
        shutil.copy(agent / name, world / name)
    (world / "agent_spans.json").write_text(json.dumps(_spans_now(agent / "weather_otel_genai.json")))
    shutil.copytree(ROOT / "examples", world / "examples")
    shutil.copy(ROOT / "examples" / "grid.yaml", world / "grid.yaml")
    shutil.copytree(world / "bundled-example" / "corpus", world / "docs")  # `corpus add docs/`: your documents
    for p in agent.glob("weather_*"):  # docs/agent.md#agent-traces-from-spans: one agent, every source
        shutil.copy(p, world / p.name)


#: what the store of the prepared folder holds, made the way the docs make it: chains of commands
#: (``{target}``: the scripted server, which answers as a system under test too); the chains are
#: independent of each other and run two at a time
JUDGE = ["--judge", "openai:gpt-4o-mini"]
WORLD: list[list[list[str]]] = [
    [  # experiments.md's pipeline runs and grid (its pipeline outputs and embeddings stay cached)
        ["pipeline", "example", "--param", "top_k=5", "--name", "main-run", "-m", "recall@5,ndcg@5,mrr"],
        ["pipeline", "example", "--param", "top_k=5", "--name", "good", "-m", "recall@5,ndcg@5,mrr"],
        ["pipeline", "example", "--param", "top_k=1", "--param", "chunk_size=120", "--param", "overlap=0",
         "--name", "worse", "-m", "recall@5,ndcg@5,mrr"],
        ["pipeline", "example", "--param", "top_k=1", "--name", "candidate", "-m", "recall@5,ndcg@5"],
        ["baseline", "save", "main-run", "-o", "baseline.json"],
        ["grid", "examples/grid.yaml"],
    ],
    [  # the embedding cache: the texts the documented semantic metrics embed, once
        ["eval", "example", "--metrics", "semantic_similarity,context_similarity,correct_semantic_guarded",
         "--name", "embedded"],
        ["meta-eval", "example-human", "--metrics", "offline", "--name", "offline"],
        # human labels and the judge metrics calibrate, composite and annotate read
        ["meta-eval", "my-labels.jsonl", "--label", "human", "--metrics",
         "faithfulness,answer_relevancy,hallucination,contextual_relevancy,bias,semantic_similarity,token_f1",
         *JUDGE, "--name", "judged"],
        ["align", "faithfulness", "--labels", "my-labels.jsonl", "--label", "human", *JUDGE, "--name", "strict"],
        ["annotate", "create", "judged", "--n", "50", "--raters", "ana,bruno,carla", "--scales",
         "faithfulness,relevance,correctness,overall", "--name", "pilot-labels"],
        *[["annotate", "export", "pilot-labels", "-o", f"sheet-{r}.csv", "--rater", r] for r in ("ana", "bruno", "carla")],
        ["fill-sheets"],
        *[["annotate", "import", "pilot-labels", f"sheet-{r}.csv", "--rater", r] for r in ("ana", "bruno", "carla")],
    ],
    [  # report.md's baseline, monitoring.md's nightly runs and production calls, conversations.md's sim
        ["eval", "data.jsonl", "--metrics", "rouge1_fmeasure,bleu", "--name", "baseline"],
        ["eval", "data.jsonl", "-m", "faithfulness", *JUDGE, "--name", "nightly"],
        ["eval", "data.jsonl", "-m", "faithfulness", *JUDGE, "--name", "nightly"],
        ["simulate", "--target", "{target}", "--target-model", "my-rag", "--scenarios", "scenarios.yaml",
         "--name", "sim", *JUDGE],
        ["log-calls"],
        ["monitor", "evaluate", "--since", "1d", "--sample", "1", "--metrics", "faithfulness,answer_relevancy", *JUDGE],
        ["monitor", "import", "agent_spans.json"],  # docs/agent.md: an agent's trace among the calls
    ],
    [  # golden.md: a corpus, the generated dataset (as documented: its calls stay cached), its review,
        # the bundled system's answers to it, and a review in progress (a draft to finalise)
        ["corpus", "add", "docs/", "--name", "handbook"],
        ["golden", "generate", "--corpus", "handbook", "--n", "100", "--name", "gold", *JUDGE, "--max-cost", "2"],
        ["dataset", "review-export", "gold", "-o", "review.csv"],
        ["review", "review.csv", "accepted"],
        ["dataset", "review-import", "gold", "review.csv"],
        ["dataset", "finalise", "gold", "--tag", "reviewed"],
        ["dataset", "export", "gold@reviewed", "-o", "gold.jsonl"],
        ["pipeline", "gold.jsonl", "--param", "corpus=docs/", "--method", "none", "-m", "span_recall@5,mrr",
         "--name", "gold-run"],
        ["export", "gold-run", "-f", "jsonl", "-o", "answers.jsonl"],
        ["dataset", "review-export", "gold", "-o", "review-2.csv"],
        ["review", "review-2.csv", "rejected"],
        ["dataset", "review-import", "gold", "review-2.csv"],
    ],
]

LOG_CALLS = """
import sys
import ragmeter.monitor as monitor
monitor.configure(db=sys.argv[1])
for i in range(40):
    monitor.log_call("What is the capital of France?", "Paris is the capital of France.",
                     [{"id": "geo#1", "text": "Paris is the capital of France."}], latency_ms=200 + 10 * i,
                     cost_usd=0.0004, model="gpt-4o-mini", metadata={"route": "faq" if i % 2 else "search"})
monitor.flush()
"""


def command_env(folder: Path, judge_url: str) -> dict[str, str]:
    """The environment of every command: its own store, the scripted judge (a dummy key), no hub."""
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env.update({"RAGMETER_DB": f"sqlite:///{folder / 'ragmeter.db'}", "OPENAI_BASE_URL": f"{judge_url}/v1",
                "OPENAI_API_KEY": "sk-docs-test-dummy", "GITHUB_STEP_SUMMARY": str(folder / "step-summary.md"),
                "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "COLUMNS": "120"})
    return env


def ragmeter(args: list[str], folder: Path, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([str(RAGMETER), *args], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def _rewrite_csv(path: Path, change) -> None:
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for n, row in enumerate(rows):
        change(n, row)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def _review(path: Path, word: str) -> None:
    """Every row accepted, or the first row that is not multi_hop rejected (docs/golden.md)."""
    first = next(n for n, r in enumerate(csv.DictReader(open(path, newline="", encoding="utf-8")))
                 if r.get("type") != "multi_hop")
    _rewrite_csv(path, lambda n, r: r.update(review="accepted" if word == "accepted" or n != first else word))


def _run_chain(world: Path, env: dict[str, str], target: str, chain: list[list[str]]) -> None:
    for args in chain:
        if args == ["fill-sheets"]:
            for r in ("ana", "bruno", "carla"):
                _rewrite_csv(world / f"sheet-{r}.csv",
                             lambda n, row: row.update(label=str(_grade(row["item"] + row["rater"] + row["scale"], 1, 5))))
            shutil.copy(world / "sheet-carla.csv", world / "sheet.csv")
        elif args[0] == "review":
            _review(world / args[1], args[2])
        elif args == ["log-calls"]:
            subprocess.run([sys.executable, "-c", LOG_CALLS, env["RAGMETER_DB"]], cwd=world, env=env,
                           check=True, timeout=300)
        else:
            args = [a.format(target=target) for a in args]
            r = ragmeter(args, world, env)
            assert r.returncode == 0, (f"preparing the docs' folder: ragmeter {' '.join(args)} exited "
                                       f"{r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")


def _spans_now(path: Path) -> dict:
    """An OTLP/JSON export with its spans moved to end now (docs/agent.md's monitoring commands
    read the calls of the last day)."""
    import time

    export = json.loads(path.read_text())
    spans = [sp for rs in export["resourceSpans"] for ss in rs["scopeSpans"] for sp in ss["spans"]]
    shift = time.time_ns() - 60_000_000_000 - max(int(sp["endTimeUnixNano"]) for sp in spans)
    for sp in spans:
        for key in ("startTimeUnixNano", "endTimeUnixNano"):
            sp[key] = str(int(sp[key]) + shift)
    return export


def build_world(world: Path, judge_url: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    world.mkdir(parents=True)
    env = command_env(world, judge_url)
    r = ragmeter(["example", "--write", "bundled-example"], world, env)
    assert r.returncode == 0, r.stderr
    samples = [json.loads(line) for line in (world / "bundled-example" / "samples.jsonl").read_text().splitlines()]
    write_files(world, samples)
    with ThreadPoolExecutor(2) as pool:
        for done in [pool.submit(_run_chain, world, env, f"{judge_url}/v1", chain) for chain in WORLD]:
            done.result()


@pytest.fixture(scope="module")
def judge():
    from judge_server import JudgeServer

    srv = JudgeServer().start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def world(tmp_path_factory, request, judge):
    """The prepared folder, built once per test session (xdist workers share it, under a lock)."""
    workerinput = getattr(request.config, "workerinput", None)
    base = tmp_path_factory.getbasetemp()
    if workerinput is not None:
        base = base.parent / f"docs-commands-{workerinput['testrunuid']}"
        base.mkdir(exist_ok=True)
    folder = base / "world"
    with FileLock(str(base / "world.lock")):
        if not (folder / ".ready").exists():
            if folder.exists():
                shutil.rmtree(folder)
            build_world(folder, judge.url)
            (folder / ".ready").write_text("ok")
    return folder


def model_dir() -> str:
    """A sentence-transformers model folder on this machine: the bundled all-MiniLM-L6-v2."""
    from ragmeter.embed.models import resolve_model

    return str(resolve_model(None).location)


# ---- the test ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    cmd: DocCommand
    label: str
    words: str

    @property
    def id(self) -> str:
        return self.cmd.where + (f"[{self.label}]" if self.label else "")


CASES = [Case(c, label, words) for c in documented() for label, words in variants(c.words)]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(args: list[str], folder: Path, env: dict[str, str]) -> tuple[int, str]:
    """``ragmeter serve ARGS`` on a free port until ``GET /`` answers: (0 when it answered 200, else
    the status it answered or exited with; its output)."""
    import time
    import urllib.request

    port = str(_free_port())
    args = [*args[:args.index("--port") + 1], port, *args[args.index("--port") + 2:]] if "--port" in args \
        else [*args, "--port", port]
    proc = subprocess.Popen([str(RAGMETER), *args], cwd=folder, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
    code = -1
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as resp:
                    code = 0 if resp.status == 200 else resp.status
                break
            except OSError:
                time.sleep(0.3)
        if proc.poll() is not None:
            code = proc.returncode
    finally:
        proc.terminate()
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    return code, out


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_documented_command(case: Case, world: Path, judge, tmp_path):
    """The command runs in a copy of the prepared folder and exits as documented, without a traceback."""
    folder = tmp_path / "w"
    shutil.copytree(world, folder, ignore=shutil.ignore_patterns(".ready"))
    env = command_env(folder, judge.url)
    args, pipe, unknown = argv_for(case.cmd, case.words, {"target": f"{judge.url}/v1", "model_dir": model_dir()}, env)
    assert not unknown, (f"{case.id}: `ragmeter {case.words}` has words this test cannot fill in: {unknown}; "
                         "add them to PLACEHOLDERS (or make the docs concrete)")
    for pattern, files in FILE_VARIANTS:
        if re.search(pattern, case.words):
            for name, source in files.items():
                shutil.copy(folder / source, folder / name)
    if SERVE.match(case.words):
        code, out = _serve(args, folder, env)
        assert code == case.cmd.expected and "Traceback" not in out, f"{case.id}: ragmeter {' '.join(args)}\n{out}"
        return
    r = ragmeter(args, folder, env)
    shown = (f"{case.id}: ragmeter {' '.join(args)} exited {r.returncode} (documented: {case.cmd.expected})\n"
             f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    assert r.returncode == case.cmd.expected, shown
    assert "Traceback" not in r.stdout + r.stderr, shown
    if pipe:
        assert pipe.startswith("jq "), f"{case.id}: output piped into {pipe!r}: teach the test what it checks"
        data = json.loads(r.stdout)
        m = re.match(r"jq(?: -\w+)* '\.(\w+)", pipe)
        assert m is None or m.group(1) in data, f"{case.id}: {m.group(1)!r} is not in the JSON output"



# ---- the machinery itself (fast) ----------------------------------------------------------------------
def test_the_docs_notation_is_read_as_documented(tmp_path):
    md = tmp_path / "x.md"
    md.write_text("text\n```bash\nragmeter eval a.jsonl \\\n    -m token_f1   # exit 3 when ...\n"
                  "echo ragmeter no\n.venv/bin/ragmeter export RUN -f csv|jsonl  # not an exit\n```\n"
                  "```python\nragmeter.evaluate(x)\n```\n```\n$ ragmeter trend mrr\noutput # exit 1\n```\n"
                  "```console\n$ ragmeter report RUN [RUN ...] [--title 'a # b'] | jq '.x'\n```\n")
    found = [(c.line, c.words, c.expected) for c in extract(md)]
    assert found == [(3, "eval a.jsonl -m token_f1", 3), (6, "export RUN -f csv|jsonl", 0), (12, "trend mrr", 0),
                     (16, "report RUN [RUN ...] [--title 'a # b'] | jq '.x'", 0)]
    assert variants("export RUN -f csv|jsonl") == [("csv", "export RUN -f csv"), ("jsonl", "export RUN -f jsonl")]
    assert variants("report RUN [RUN ...] [--title 'a # b'] | jq '.x'") == [
        ("", "report RUN RUN --title 'a # b' | jq '.x'")]
    assert variants("trec Q R [-m MEASURE]... [-q]") == [("", "trec Q R -m MEASURE -q")]
    cmd = DocCommand("README.md", 1, "", "", 0)
    args, pipe, unknown = argv_for(cmd, "report RUN RUN --judge ... -o $OUT $NOPE --ray-address ray://h:1 --engine ray",
                                   {"target": "T", "model_dir": "D"}, {"OUT": "o.html"})
    assert args == ["report", "good", "worse", "--judge", "...", "-o", "o.html", "$NOPE"]
    assert (pipe, unknown) == ("", ["...", "$NOPE"])


def test_every_documented_command_can_be_filled_in_and_every_rule_is_used():
    """A new documented command with a word this test cannot fill in fails here (fast), not only in
    the slow run; a rule, placeholder or file variant no command uses any more is removed."""
    assert len(CASES) >= 120, len(CASES)
    fill = {"target": "http://127.0.0.1:1/v1", "model_dir": "/models/here"}
    env = {"GITHUB_STEP_SUMMARY": "s.md"}
    unknown = {c.id: u for c in CASES if (u := argv_for(c.cmd, c.words, fill, env)[2])}
    assert not unknown, f"documented commands with words the test cannot fill in (add to PLACEHOLDERS): {unknown}"
    words = [c.words for c in CASES]
    assert [r.reason for r in RULES if not any(re.search(r.pattern, w) for w in words)] == []
    assert [p for p, _ in FILE_VARIANTS if not any(re.search(p, w) for w in words)] == []
    used = {(c.cmd.path, a) for c in CASES for a in shlex.split(c.words.partition(" | ")[0])}
    for path, table in PLACEHOLDERS.items():
        stale = [k for k in table if not any(a == k and (path == "*" or p == path) for p, a in used)]
        assert not stale, f"placeholders of {path} no documented command uses: {stale}"
    assert any(SERVE.match(w) for w in words)


def test_every_optional_module_is_declared_in_the_extra_its_message_names():
    import tomllib

    from ragmeter.core.extras import OPTIONAL_MODULES

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]

    def names(extra: str) -> set[str]:
        out = set()
        for req in extras[extra]:
            m = re.match(r"ragmeter-eval\[([\w,]+)\]", req)
            if m:
                out |= {n for e in m.group(1).split(",") for n in names(e)}
            else:
                out.add(re.split(r"[\[<>=!~; ]", req, maxsplit=1)[0].lower())
        return out

    wrong = {mod: (extra, dist) for mod, (extra, dist) in OPTIONAL_MODULES.items()
             if extra not in extras or dist not in names(extra)}
    assert not wrong, f"modules whose extra does not declare them in pyproject.toml: {wrong}"


@pytest.mark.parametrize("module, args", [
    ("httpx", ["simulate", "--target", "http://127.0.0.1:9/v1", "--target-model", "m", "--scenarios", "s.yaml",
               "--name", "x", "--judge", "openai:m"]),
    ("openpyxl", ["export", "r", "-f", "xlsx", "-o", "r.xlsx"]),
])
def test_a_missing_optional_module_exits_2_with_the_pip_command(tmp_path, module, args):
    """`ragmeter simulate` after `make demo` ([local]: no httpx with openai 3) crashed with a
    ModuleNotFoundError traceback; any optional module that is missing is one line naming its extra."""
    from ragmeter.core.extras import OPTIONAL_MODULES

    (tmp_path / "s.yaml").write_text("scenarios:\n  - {persona: p, goal: g, expected_outcome: o}\n")
    env = command_env(tmp_path, "http://127.0.0.1:9")
    r = ragmeter(["eval", "example", "-m", "token_f1", "--name", "r"], tmp_path, env)
    assert r.returncode == 0, r.stderr
    hide = f"import sys; sys.modules[{module!r}] = None; from ragmeter.apps.cli import entry; sys.argv[0] = 'ragmeter'; entry()"
    r = subprocess.run([sys.executable, "-c", hide, *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    extra = OPTIONAL_MODULES[module][0]
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and f"pip install 'ragmeter-eval[{extra}]'" in r.stderr, r.stderr
