"""End to end, from a user's seat: each ragmeter command beside the code a user would otherwise run.

Every row runs in this one invocation, each side in a fresh child process (so start-up, reading and
writing count; peak memory is the child's own high-water mark, ``VmHWM`` of ``/proc/self/status``):

* ``eval``: ``ragmeter eval PAIRS.jsonl --metrics rouge1_fmeasure,rougeL_fmeasure,bleu,token_f1,
  exact_match`` from the JSONL file to the stored run (SQLite), against a plain loop over
  rouge-score (``RougeScorer(["rouge1", "rougeL"], use_stemmer=True)``), sacrebleu's sentence
  BLEU and the SQuAD script's F1 and exact match on the same pairs; the store's bytes per stored score (file size / scores) beside it;
* ``export``: ``ragmeter export RUN -f csv|parquet|jsonl`` of that run (rows with the texts and five
  metric columns) against pandas reading the JSONL and writing the same columns with ``to_csv`` /
  ``to_parquet`` / ``to_json``;
* ``report``: ``ragmeter report RUN`` (one HTML file) on that run;
* ``api``: ``ragmeter.evaluate`` of pairs on the string metrics and on ``bleu`` against a per-pair
  rapidfuzz/textdistance loop and a reused ``sacrebleu.BLEU().sentence_score`` loop;
* ``trec``: ``ragmeter trec`` on TREC qrels/run files (``--trec-queries`` x 100 documents, six
  measures) against pytrec_eval parsing and evaluating the same files;
* ``startup``: ``ragmeter --help``.

The pairs (``--pairs``, default 30,000) are RAG-like prose by default (``--text prose-en``: answers
and references of 1-5 sentences from templates about policies, prices, dates and people, with
curly quotes, dashes, accents, currency and degree signs; ``prose-pt``: the same in Portuguese;
``tokens``: random words from a small vocabulary with capitals, commas and numbers, plain ASCII);
the JSON's ``eval.data`` says which. The ``eval`` row runs A/B/B/A (ragmeter, the loop, the loop,
ragmeter; medians); the loop computes all five metrics (rouge-score, sacrebleu and the SQuAD
script's F1 and exact match). Values are checked equal on every pair (BLEU as ``min(1, score / 100)``:
sacrebleu's score of a perfect match is 100.00000000000004, ragmeter's bleu stays in [0, 1]; the JSON
counts those pairs). The last line printed is
one JSON object with every figure and ratio.

Children load Python's bytecode as installed code does: pip compiles a package's ``.pyc`` files
at install (the loop's rouge-score, sacrebleu, numpy, pandas have theirs), so the children run
without ``PYTHONDONTWRITEBYTECODE`` (a machine that sets it would otherwise compile ragmeter's
modules from source in every ragmeter process, about 0.3 s, and no installed package's), and an
unmeasured warm-up eval of 200 pairs writes ragmeter's before the first timed run. Usage: ``python benchmarks/end_to_end.py [--pairs N]
[--text prose-en|prose-pt|tokens] [--only eval,export,...]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

METRICS = "rouge1_fmeasure,rougeL_fmeasure,bleu,token_f1,exact_match"
VOCAB = ("the a of and to in is was for on that with as by at from it an be this are or have not "
         "refund policy days customer order shipping return warranty account password invoice payment "
         "card support team request product price delivery store online within business hours contact "
         "email phone number address charge fee covered damaged replacement original receipt purchase "
         "Paris France capital Europe river population city museum tower century history government "
         "running runs ran connected connection connecting fishes fishing generously generous").split()


def sentence(rnd: random.Random) -> str:
    words = [rnd.choice(VOCAB) for _ in range(rnd.randint(8, 25))]
    if rnd.random() < 0.4:
        words.insert(rnd.randrange(len(words)), str(rnd.choice([30, 14, 2, 100, 1999, 3.5, 24])))
    if rnd.random() < 0.5:
        i = rnd.randrange(1, len(words))
        words[i - 1] += ","
    return " ".join(words).capitalize() + rnd.choice([".", ".", ".", "!", "?"])



EN_TEMPLATES = (
    "{Subj} can request a refund within {n} days of {event}, as long as the {item} is unused.",
    "According to the {doc}, {subj} must contact {team} before {time} on {day}.",
    "The {item} ships from {place} and usually arrives in {n}–{m} business days.",
    "If the {item} was damaged in transit, {subj} should keep the original packaging (and the receipt).",
    "Our {team} is available {day} to {day2}, {time} to {time2} ({tz}).",
    "Yes — the {plan} plan includes {n} GB of storage, unlimited users and priority support.",
    "No, {subj} can’t change the delivery address once the order has been dispatched.",
    "The fee is {cur}{price} per month, billed annually; VAT is added at checkout.",
    "In {year}, the {org} reported a {pct}% increase in {thing} compared with {year2}.",
    "“{Quote},” said {name}, the company’s head of {dept}.",
    "{Name}'s team in {place} handles returns, exchanges and warranty claims.",
    "Passwords must be at least {n} characters long, e.g. “{pw}”; see section {sec} for details.",
    "The museum in {place} opens at {time} and closes at {time2}; entry costs {cur}{price}.",
    "Temperatures in {place} reach {deg}°C in {month}, so the café terrace closes early.",
    "See https://example.com/help/{slug} or call +1 (555) {n}{m}-{year} for help.",
)
EN = dict(
    Subj=["Customers", "You", "Members", "Account holders", "Guests"],
    subj=["customers", "you", "members", "the account owner", "guests"],
    event=["purchase", "delivery", "the invoice date", "check-in"],
    item=["order", "device", "subscription", "ticket", "replacement part"],
    doc=["refund policy", "terms of service", "employee handbook", "warranty card"],
    team=["support", "the billing team", "customer care", "the help desk"],
    time=["9 a.m.", "5:30 p.m.", "noon", "08:00"], time2=["6 p.m.", "17:00", "midnight"],
    day=["Monday", "Friday", "March 3, 2024", "the 15th"], day2=["Friday", "Sunday"],
    place=["São Paulo", "Zürich", "Paris", "Montréal", "Dublin", "Kraków", "New York"],
    tz=["CET", "UTC−5", "local time"], plan=["Basic", "Pro", "Enterprise"],
    cur=["$", "€", "£", "R$ "], price=["25.00", "9.99", "1,200", "49"],
    year=["2019", "2021", "2023"], year2=["2018", "2020", "2022"],
    org=["agency", "WHO", "central bank", "ministry"], pct=["3.5", "12", "40"],
    thing=["exports", "hospital admissions", "online sales", "tourism"],
    Quote=["We expect demand to keep growing", "Safety comes first", "It’s a big step for us"],
    name=["Ana Souza", "José García", "Zoë Müller", "Chen Wei", "Amélie Dupont"],
    Name=["Ana", "José", "Zoë", "Chen", "Amélie"],
    dept=["operations", "research", "customer experience"], pw=["Tr0ub4dor&3", "c0rrect-h0rse"],
    sec=["4.2", "7(b)", "A.1"], deg=["35", "28", "41"], month=["July", "August", "January"],
    slug=["refunds", "returns-policy", "faq#billing"], n=["2", "3", "7", "14", "30"],
    m=["5", "10", "12"],
)
PT_TEMPLATES = (
    "Os clientes podem pedir o reembolso em até {n} dias após a compra, desde que o {item} não tenha sido usado.",
    "Segundo o {doc}, é necessário contactar o {team} antes das {time} de {day}.",
    "A encomenda sai de {place} e chega normalmente em {n} a {m} dias úteis.",
    "Sim — o plano {plan} inclui {n} GB de armazenamento e suporte prioritário.",
    "Não, não é possível alterar a morada depois de a encomenda ser expedida.",
    "A taxa é de {cur}{price} por mês; o IVA é acrescentado no pagamento.",
    "Em {year}, o {org} registou um aumento de {pct}% nas exportações em relação a {year2}.",
    "«{Quote}», disse {name}, responsável pela área de {dept}.",
    "O museu de {place} abre às {time} e fecha às {time2}; a entrada custa {cur}{price}.",
)
PT = dict(EN, item=["produto", "bilhete", "equipamento"], doc=["regulamento", "contrato", "manual"],
          team=["apoio ao cliente", "serviço de faturação"], time=["9h", "17h30"], time2=["18h", "20h"],
          day=["segunda-feira", "sexta-feira", "3 de março"], place=["São Paulo", "Lisboa", "Coimbra", "Belém"],
          plan=["Básico", "Profissional"], org=["instituto", "ministério", "banco central"],
          Quote=["Esperamos que a procura continue a crescer", "A segurança está em primeiro lugar"],
          name=["Ana Souza", "João Conceição", "Inês Gonçalves"], dept=["operações", "investigação"])


def prose_sentence(rnd, lang="en"):
    tpl, vocab = (EN_TEMPLATES, EN) if lang == "en" else (PT_TEMPLATES, PT)
    t = rnd.choice(tpl)
    return t.format(**{k: rnd.choice(v) for k, v in vocab.items() if "{" + k + "}" in t})

#: ``--text``: what the pairs are made of
TEXTS = {
    "prose-en": "RAG-like English prose: answers and references built from 15 sentence templates "
                "(policies, prices, dates, quotes, URLs) with curly quotes, dashes, accents, currency "
                "and degree signs (about 4 texts in 5 hold a non-ASCII character)",
    "prose-pt": "RAG-like Portuguese prose: 9 sentence templates, accents on nearly every text",
    "tokens": "random English words from a 90-word vocabulary, capitalised, with commas, numbers and "
              "sentence ends (plain ASCII)",
}


def write_pairs(path: Path, n: int, seed: int = 20261124, text: str = "prose-en") -> None:
    rnd = random.Random(seed)
    make = sentence if text == "tokens" else (lambda r: prose_sentence(r, text.split("-")[1]))
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            ref = " ".join(make(rnd) for _ in range(rnd.randint(1, 3)))
            # an answer shares some of its reference's sentences, and adds its own
            shared = [s if s[-1] in ".!?" else s + "." for s in ref.split(". ") if rnd.random() < 0.6]
            parts = shared + [make(rnd) for _ in range(rnd.randint(0, 2))]
            ans = " ".join(parts) or make(rnd)
            fh.write(json.dumps({"id": f"q{i}", "question": f"question {i}?", "answer": ans,
                                 "reference": ref}) + "\n")


#: the children's environment: bytecode as an installed package has it (module docstring)
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def python_child(code: str, *args: str, tree: bool = False) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter: wall seconds and its own peak RSS (``VmHWM``, printed by
    the child as its last line); with ``tree``, also the peak PSS of its process tree (a forked
    worker included, shared pages counted once), sampled every 0.1 s. Reading a tree's PSS costs
    CPU (smaps) that a two-process run on two CPUs feels, so timings come from runs without it."""
    from _procmem import run_measured

    wrapper = code + textwrap.dedent("""
        import re as _re
        with open("/proc/self/status") as _f:
            print("VMHWM", _re.search(r"VmHWM:\\s+(\\d+)", _f.read()).group(1))
    """)
    proc, out, err, wall, peak = run_measured([sys.executable, "-c", wrapper, *args],
                                              every_s=0.1 if tree else None, env=CHILD_ENV)
    if proc.returncode != 0:
        raise SystemExit(f"child failed:\n{err[-2000:]}")
    lines = out.strip().splitlines()
    hwm = int(lines[-1].split()[1]) / 1024
    return {"s": round(wall, 3), "peak_mb": round(hwm, 1), "tree_pss_mb": round(peak / 2**20, 1),
            "stdout": "\n".join(lines[:-1])}


def ragmeter_cmd(*args: str, tree: bool = False) -> dict[str, Any]:
    """``ragmeter ARGS`` in a fresh interpreter that reports its own peak memory."""
    # the console script's own entry (it ends with a quick exit after the atexit handlers, so the
    # peak memory line is printed by one)
    code = ("import atexit, re, sys\n"
            "def _hwm():\n"
            "    with open('/proc/self/status') as f:\n"
            "        print('VMHWM', re.search(r'VmHWM:\\s+(\\d+)', f.read()).group(1), flush=True)\n"
            "atexit.register(_hwm)\n"
            "from ragmeter.apps.cli import entry\nsys.argv = ['ragmeter', *sys.argv[1:]]\nentry()\n")
    return python_child(code, *args, tree=tree)


ANCHOR_EVAL = """
import collections, json, re, string, sys, time
from rouge_score import rouge_scorer
import sacrebleu

# the official SQuAD v2.0 evaluation script's exact match and token F1
def normalize_answer(s):
    def remove_articles(text):
        return re.sub(re.compile(r"\\b(a|an|the)\\b", re.UNICODE), " ", text)
    def white_space_fix(text):
        return " ".join(text.split())
    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)
    return white_space_fix(remove_articles(remove_punc(s.lower())))

def get_tokens(s):
    return normalize_answer(s).split() if s else []

def compute_exact(a_gold, a_pred):
    return int(normalize_answer(a_gold) == normalize_answer(a_pred))

def compute_f1(a_gold, a_pred):
    gold_toks, pred_toks = get_tokens(a_gold), get_tokens(a_pred)
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    num_same = sum(common.values())
    if len(gold_toks) == 0 or len(pred_toks) == 0:
        return int(gold_toks == pred_toks)
    if num_same == 0:
        return 0
    precision, recall = 1.0 * num_same / len(pred_toks), 1.0 * num_same / len(gold_toks)
    return (2 * precision * recall) / (precision + recall)

rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
scorer = rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=True)
bleu = sacrebleu.metrics.BLEU(effective_order=True)
out = []
for r in rows:
    s = scorer.score(r["reference"], r["answer"])
    out.append((s["rouge1"].fmeasure, s["rougeL"].fmeasure, bleu.sentence_score(r["answer"], [r["reference"]]).score / 100,
                compute_f1(r["reference"], r["answer"]), compute_exact(r["reference"], r["answer"])))
json.dump(out, open(sys.argv[2], "w"))
"""


def bench_eval(work: Path, n: int, text: str = "prose-en") -> dict[str, Any]:
    """A/B/B/A: ragmeter, the reference loop, the loop again, ragmeter again (each a fresh process,
    each ragmeter run into a new store); the ratio is of the medians."""
    data = work / "pairs.jsonl"
    write_pairs(data, n, text=text)
    db = work / "eval.db"
    warm = work / "warm.jsonl"  # unmeasured: ragmeter's bytecode written, the file system cache
    write_pairs(warm, 200, text=text)
    ragmeter_cmd("eval", str(warm), "--metrics", METRICS, "--db", f"sqlite:///{work / 'warm.db'}", "--json",
                 "--no-progress")
    python_child(ANCHOR_EVAL, str(warm), str(work / "warm.json"))
    ours_runs, anchor_runs = [], []
    for k, side in enumerate(("ours", "anchor", "anchor", "ours")):
        if side == "ours":
            store = db if not ours_runs else work / f"eval{k}.db"
            ours_runs.append(ragmeter_cmd("eval", str(data), "--metrics", METRICS, "--db", f"sqlite:///{store}",
                                          "--json", "--no-progress"))
        else:
            anchor_runs.append(python_child(ANCHOR_EVAL, str(data), str(work / "anchor.json")))
        print(f"  {side}: {(ours_runs if side == 'ours' else anchor_runs)[-1]['s']} s "
              f"(load average {os.getloadavg()[0]:.2f})", flush=True)
    ours, anchor = ours_runs[0], anchor_runs[0]
    ours_s = sorted(r["s"] for r in ours_runs)
    anchor_s = sorted(r["s"] for r in anchor_runs)
    med_ours, med_anchor = sum(ours_s) / 2, sum(anchor_s) / 2  # the median of two
    # the process tree's memory (the forked worker included) in a run of its own, into another store
    pss = ragmeter_cmd("eval", str(data), "--metrics", METRICS, "--db", f"sqlite:///{work / 'pss.db'}", "--json",
                       "--no-progress", tree=True)["tree_pss_mb"]
    run_id = json.loads(ours["stdout"].strip().splitlines()[-1])["run_id"]
    # values: ragmeter's stored scores against the anchor's, pair by pair
    from ragmeter.store import open_store

    store = open_store(f"sqlite:///{db}")
    table = store.score_table(run_id)
    ref = json.loads((work / "anchor.json").read_text())
    ids = [f"q{i}" for i in range(n)]
    # ragmeter's bleu is sacrebleu's sentence score on a 0-1 scale, held in the metric's range [0, 1]:
    # sacrebleu's BLEU of a perfect match is 100.00000000000004 (exp(log(100)) in floating point), so
    # the loop's score / 100 is capped at 1 before the comparison (the pairs it concerns are counted)
    over_1 = sum(r[2] > 1.0 for r in ref)
    ref = [(r[0], r[1], min(1.0, r[2]), r[3], r[4]) for r in ref]
    by_metric = {}
    for j, key in enumerate(("rouge1_fmeasure", "rougeL_fmeasure", "bleu", "token_f1", "exact_match")):
        col = table[key]
        by_metric[key] = max(abs(col[i].value - r[j]) for i, r in zip(ids, ref, strict=True))
    worst = max(by_metric.values())
    n_scores = store.count_scores(run_id)
    store.engine.dispose()
    import sqlite3

    con = sqlite3.connect(db)
    try:  # the scores table alone (SQLite's dbstat table, where the build has it)
        score_bytes = con.execute("SELECT SUM(pgsize) FROM dbstat WHERE name = 'scores'").fetchone()[0]
    except sqlite3.OperationalError:
        score_bytes = None
    con.close()
    return {"pairs": n, "text": text, "data": TEXTS[text], "order": "A/B/B/A (ragmeter, loop, loop, ragmeter)",
            "ragmeter_s": round(med_ours, 3), "ragmeter_runs_s": [r["s"] for r in ours_runs],
            "ragmeter_peak_mb": ours["peak_mb"],
            "ragmeter_tree_pss_mb": pss, "anchor": "rouge-score (rouge1, rougeL, stemmer) + sacrebleu sentence "
            "BLEU + the SQuAD script's F1 and exact match, one loop", "anchor_s": round(med_anchor, 3),
            "anchor_runs_s": [r["s"] for r in anchor_runs], "anchor_peak_mb": anchor["peak_mb"],
            "speedup": round(med_anchor / med_ours, 2), "max_abs_diff": worst, "max_abs_diff_by_metric": by_metric,
            "bleu_compared_as": "min(1, sacrebleu score / 100): ragmeter's bleu range is [0, 1], and sacrebleu's "
            "BLEU of a perfect match is 100.00000000000004", "bleu_pairs_over_1_in_loop": over_1,
            "bytes_per_score": round(db.stat().st_size / n_scores, 1),
            "score_table_bytes_per_score": round(score_bytes / n_scores, 1) if score_bytes else None, "run_id": run_id, "db": str(db),
            "data_file": str(data)}


ANCHOR_EXPORT = """
import json, sys
import pandas as pd
df = pd.read_json(sys.argv[1], lines=True)
for m in sys.argv[3].split(","):
    df[m] = 0.5
fmt, out = sys.argv[2], sys.argv[4]
if fmt == "csv":
    df.to_csv(out, index=False)
elif fmt == "parquet":
    df.to_parquet(out, index=False)
else:
    df.to_json(out, orient="records", lines=True, force_ascii=False)
"""


def bench_export(work: Path, ev: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fmt in ("csv", "parquet", "jsonl"):
        ours = ragmeter_cmd("export", ev["run_id"], "-f", fmt, "-o", str(work / f"run.{fmt}"),
                            "--db", f"sqlite:///{ev['db']}")
        anchor = python_child(ANCHOR_EXPORT, ev["data_file"], fmt, METRICS, str(work / f"pandas.{fmt}"))
        out[fmt] = {"ragmeter_s": ours["s"], "ragmeter_peak_mb": ours["peak_mb"], "pandas_s": anchor["s"],
                    "pandas_peak_mb": anchor["peak_mb"], "ratio": round(anchor["s"] / ours["s"], 2)}
    return out


def bench_report(work: Path, ev: dict[str, Any]) -> dict[str, Any]:
    r = ragmeter_cmd("report", ev["run_id"], "-o", str(work / "report.html"), "--db", f"sqlite:///{ev['db']}")
    return {"s": r["s"], "peak_mb": r["peak_mb"], "bytes": (work / "report.html").stat().st_size}


ANCHOR_API = """
import json, sys, time
import sacrebleu
from rapidfuzz.distance import JaroWinkler, Levenshtein
rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")][: int(sys.argv[2])]
lev = [Levenshtein.normalized_similarity(r["answer"], r["reference"]) for r in rows]
jw = [JaroWinkler.similarity(r["answer"], r["reference"]) for r in rows]
bleu = sacrebleu.BLEU(effective_order=True)
b = [bleu.sentence_score(r["answer"], [r["reference"]]).score for r in rows]
"""

OURS_API = """
import json, sys
import ragmeter
rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")][: int(sys.argv[2])]
res = ragmeter.evaluate(rows, ["levenshtein", "jaro_winkler", "bleu"], db=sys.argv[3])
"""


def bench_api(work: Path, ev: dict[str, Any], n: int) -> dict[str, Any]:
    ours = python_child(OURS_API, ev["data_file"], str(n), f"sqlite:///{work / 'api.db'}")
    anchor = python_child(ANCHOR_API, ev["data_file"], str(n))
    return {"pairs": n, "ragmeter_s": ours["s"], "ragmeter_peak_mb": ours["peak_mb"], "loop_s": anchor["s"],
            "loop_peak_mb": anchor["peak_mb"], "ratio": round(anchor["s"] / ours["s"], 2)}


ANCHOR_TREC = """
import sys, pytrec_eval
with open(sys.argv[1]) as fq, open(sys.argv[2]) as fr:
    qrels, run = pytrec_eval.parse_qrel(fq), pytrec_eval.parse_run(fr)
res = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recip_rank", "P.5", "recall.100", "map",
                                             "success.10"}).evaluate(run)
"""


def bench_trec(work: Path, n_queries: int) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).parent))
    from retrieval import build_dicts, make_data, write_trec

    d = make_data(n_queries, 100, 5)
    qrels, run, _ = build_dicts(d, d["graded"])
    folder = work / "trec"
    folder.mkdir()
    qpath, rpath = write_trec(qrels, run, str(folder))
    del qrels, run, d
    ours = ragmeter_cmd("trec", qpath, rpath, "-m", "ndcg_cut.10", "-m", "recip_rank", "-m", "P.5",
                        "-m", "recall.100", "-m", "map", "-m", "success.10")
    anchor = python_child(ANCHOR_TREC, qpath, rpath)
    return {"queries": n_queries, "docs_per_query": 100, "ragmeter_s": ours["s"], "ragmeter_peak_mb": ours["peak_mb"],
            "pytrec_eval_s": anchor["s"], "pytrec_eval_peak_mb": anchor["peak_mb"],
            "ratio": round(anchor["s"] / ours["s"], 2)}


def bench_startup() -> dict[str, Any]:
    runs = [ragmeter_cmd("--help")["s"] for _ in range(3)]
    return {"help_s": min(runs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=30_000)
    ap.add_argument("--text", choices=sorted(TEXTS), default="prose-en", help="what the pairs are made of")
    ap.add_argument("--only", default="eval,export,report,api,trec,startup", help="comma-separated rows to run")
    ap.add_argument("--api-pairs", type=int, default=10_000)
    ap.add_argument("--trec-queries", type=int, default=50_000)
    args = ap.parse_args()
    only = set(args.only.split(","))
    result: dict[str, Any] = {"cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if "eval" in only:
            r = bench_eval(work, args.pairs, args.text)
            print(f"eval {r['pairs']} pairs ({args.text}) x 5 metrics: ragmeter {r['ragmeter_s']} s "
                  f"({r['ragmeter_peak_mb']} MB), rouge-score + sacrebleu + SQuAD loop {r['anchor_s']} s "
                  f"({r['anchor_peak_mb']} MB) (medians of A/B/B/A): {r['speedup']}x; "
                  f"{r['bytes_per_score']} bytes per score; max |diff| {r['max_abs_diff']:.2e}", flush=True)
            result["eval"] = {k: v for k, v in r.items() if k not in ("db", "data_file")}
            if "export" in only:
                result["export"] = bench_export(work, r)
                print("export:", json.dumps(result["export"]), flush=True)
            if "report" in only:
                result["report"] = bench_report(work, r)
                print("report:", json.dumps(result["report"]), flush=True)
            if "api" in only:
                result["api"] = bench_api(work, r, args.api_pairs)
                print("api:", json.dumps(result["api"]), flush=True)
        if "trec" in only:
            result["trec"] = bench_trec(work, args.trec_queries)
            print("trec:", json.dumps(result["trec"]), flush=True)
        if "startup" in only:
            result["startup"] = bench_startup()
            print("startup:", json.dumps(result["startup"]), flush=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
