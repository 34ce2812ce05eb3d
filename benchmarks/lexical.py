"""Lexical metrics: ragmeter against the libraries behind seed 002, in one process.

10,000 deterministic (answer, reference) pairs of 20-80 English words. For every metric, ragmeter's
registered batch function scores the whole column; the reference library is called per pair the way
seed 002's ``plain_metrics.py`` calls it (textdistance for lcsstr/jaccard/cosine, rapidfuzz for
levenshtein/jaro_winkler/hamming/lcsseq and fuzz.token_set_ratio, a new rouge-score ``RougeScorer``
per ROUGE key and call, with stemming), without the seed's truncation to integer percentages.
textdistance's pure-Python lcsstr manages about 15 pairs/s, so the seed-002 reference loop runs on
a subsample (``--subsample``, default 300 pairs) and values are compared on that subsample.

Also: ROUGE against a reused rouge-score scorer (all three types, stemming), and BLEU / bleu2 /
chrF against sacrebleu with a reused BLEU / CHRF object.

Run: ``python benchmarks/lexical.py [--pairs 10000] [--subsample 300]``. The last line printed is one
JSON object with every figure and ratio.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import sacrebleu
import textdistance
from rapidfuzz import distance, fuzz
from rouge_score import rouge_scorer

from ragmeter.core.context import ScoringContext
from ragmeter.core.schema import Sample
from ragmeter.metrics import get_spec
from ragmeter.metrics.lexical import rouge_metrics as _lexical_rouge

WORDS = """
the of and to in is was for on that with as by at from it an be this are or have which one had not
but all were they she he we can their there been if more when will would who so no time about into
than them only some could these two may first then do any like my now over such our man even most
made after also did many before must through back years where much your way well down should because
each just those people how too little state good very make world still own see men work long get
here between both life being under never day same another know while last might great old year off
come since against go came right used take three policy employee employees vacation days manager
approval request requests leave annual remote office equipment laptop security password reset
account access training course budget expense expenses travel receipt receipts reimbursement
quarter report reports review reviews performance salary bonus benefits health insurance plan
dental vision retirement contribution contributions matching company handbook section chapter
rule rules apply applies applied applying within business working week weeks month months notice
written submit submitted approve approved deadline deadlines customer customers support ticket
tickets priority response respond responded hours escalation escalate team teams lead leads
project projects schedule scheduled meeting meetings calendar invite invites document documents
storage shared drive folder folders permission permissions data privacy protection personal
information incident incidents reported reporting immediately contact department departments
human resources finance legal compliance engineering product design marketing sales operations
""".split()


def make_pairs(n: int, seed: int = 2024) -> tuple[list[str], list[str]]:
    """Deterministic pairs: references of 20-80 words; answers are either a paraphrase-like edit of
    the reference (dropped, replaced and swapped words) or an unrelated text of 20-80 words."""
    rng = random.Random(seed)

    def text(k: int) -> list[str]:
        return [rng.choice(WORDS) for _ in range(k)]

    def render(words: list[str]) -> str:
        out, start = [], True
        for w in words:
            out.append(w.capitalize() if start else w)
            start = rng.random() < 0.08
            if start:
                out[-1] += "."
            elif rng.random() < 0.05:
                out[-1] += ","
        return " ".join(out) + "."

    answers, references = [], []
    for _ in range(n):
        ref = text(rng.randint(20, 80))
        if rng.random() < 0.5:
            ans = list(ref)
            for _ in range(rng.randint(2, 12)):
                i = rng.randrange(len(ans))
                op = rng.random()
                if op < 0.35 and len(ans) > 20:
                    del ans[i]
                elif op < 0.75:
                    ans[i] = rng.choice(WORDS)
                else:
                    j = rng.randrange(len(ans))
                    ans[i], ans[j] = ans[j], ans[i]
        else:
            ans = text(rng.randint(20, 80))
        answers.append(render(ans))
        references.append(render(ref))
    return answers, references


STRING_KEYS = ["lcsstr", "lcsseq", "cosine", "jaro_winkler", "hamming", "jaccard", "levenshtein",
               "fuzzy_score"]
ROUGE_KEYS = [f"rouge{t}_{m}" for t in ("1", "2", "L") for m in ("precision", "recall", "fmeasure")]
SEED_002_KEYS = STRING_KEYS + ROUGE_KEYS


def _seed_rouge(key: str) -> Callable[[str, str], float]:
    rouge_type, measure = key.split("_")

    def f(answer: str, reference: str) -> float:
        # plain_metrics.rouge_score: a new scorer per call, stemming on
        scorer = rouge_scorer.RougeScorer(rouge_types=[rouge_type], use_stemmer=True)
        return getattr(scorer.score(target=reference, prediction=answer)[rouge_type], measure)

    return f


#: seed 002 (rag-experiment-accelerator plain_metrics.py), called per pair
SEED_002: dict[str, Callable[[str, str], float]] = {
    "lcsstr": textdistance.lcsstr.normalized_similarity,
    "lcsseq": distance.LCSseq.normalized_similarity,
    "cosine": textdistance.cosine.normalized_similarity,
    "jaro_winkler": distance.JaroWinkler.normalized_similarity,
    "hamming": lambda a, b: distance.Hamming.normalized_similarity(a, b, pad=True),
    "jaccard": textdistance.jaccard.normalized_similarity,
    "levenshtein": distance.Levenshtein.normalized_similarity,
    "fuzzy_score": lambda a, b: fuzz.token_set_ratio(a, b) / 100,
    **{k: _seed_rouge(k) for k in ROUGE_KEYS},
}


def _ours(keys: list[str], samples: list[Sample], ctx: ScoringContext) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Seconds and values of each registered batch function over the whole column."""
    seconds, values = {}, {}
    for key in keys:
        spec = get_spec(key)
        t = time.perf_counter()
        scores = spec.fn(samples, ctx, **spec.defaults)
        seconds[key] = time.perf_counter() - t
        values[key] = np.array([s.value for s in scores], dtype=float)
    return seconds, values


def _fresh_rouge_caches() -> None:
    # ragmeter keeps a process-wide stem cache; start cold so the timing includes stemming
    _lexical_rouge._TOKENIZERS.clear()


def _row(name: str, ours_rate: float, ref_rate: float, diff: float | None, checked: int,
         reference: str) -> dict[str, Any]:
    ratio = ours_rate / ref_rate if ref_rate else float("inf")
    shown = "-" if diff is None else f"{diff:.1e}"
    print(f"{name:<22}{ours_rate:>14,.0f}{ref_rate:>14,.1f}{ratio:>10,.1f}x{shown:>11}  {reference}")
    return {"ragmeter_pairs_per_s": round(ours_rate, 1), "reference_pairs_per_s": round(ref_rate, 2),
            "ratio": round(ratio, 2), "max_abs_diff": diff, "checked_pairs": checked,
            "reference": reference}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=10_000)
    ap.add_argument("--subsample", type=int, default=300, help="pairs for the seed-002 reference loop")
    ap.add_argument("--rouge-subsample", type=int, default=2000,
                    help="pairs for the reused rouge-score scorer")
    args = ap.parse_args()
    # sacrebleu warns on every sentence_score of a BLEU without effective order (bleu2's reference)
    logging.getLogger("sacrebleu").setLevel(logging.ERROR)

    answers, references = make_pairs(args.pairs)
    samples = [Sample(id=str(i), answer=a, references=[r])
               for i, (a, r) in enumerate(zip(answers, references, strict=True))]
    n, sub = len(samples), min(args.subsample, len(samples))
    mean_chars = sum(map(len, answers + references)) / (2 * n)
    print(f"{n:,} pairs, {mean_chars:.0f} characters on average; seed-002 reference loop on {sub} pairs")
    get_spec("lcsstr")  # load the registry (and nltk through a first stem) outside the timings
    from nltk.stem import porter

    porter.PorterStemmer().stem("warming")
    out: dict[str, Any] = {"pairs": n, "mean_characters": round(mean_chars, 1), "subsample": sub}

    # --- seed 002's per-pair loop over its 17 lexical keys, timed key by key -------------------
    ref_seconds = dict.fromkeys(SEED_002_KEYS, 0.0)
    ref_values = {k: np.empty(sub) for k in SEED_002_KEYS}
    for i in range(sub):
        a, r = answers[i], references[i]
        for key in SEED_002_KEYS:
            t = time.perf_counter()
            ref_values[key][i] = SEED_002[key](a, r)
            ref_seconds[key] += time.perf_counter() - t

    _fresh_rouge_caches()
    our_seconds, our_values = _ours(SEED_002_KEYS, samples, ScoringContext())

    print(f"\n{'metric':<22}{'ragmeter/s':>14}{'reference/s':>14}{'ratio':>11}{'max|diff|':>11}  reference")
    out["metrics"] = {}
    for key in SEED_002_KEYS:
        diff = float(np.abs(our_values[key][:sub] - ref_values[key]).max())
        out["metrics"][key] = _row(key, n / our_seconds[key], sub / ref_seconds[key], diff, sub,
                                   "seed 002 per pair")
    total_ours, total_ref = sum(our_seconds.values()), sum(ref_seconds.values())
    set_diff = max(m["max_abs_diff"] for m in out["metrics"].values())
    print()
    out["seed002_string_set"] = _row("seed-002 set (17 keys)", n / total_ours, sub / total_ref, set_diff,
                                     sub, "seed 002 per-pair loop")
    out["seed002_string_set"].update(target_ratio=100, met=out["seed002_string_set"]["ratio"] >= 100
                                     and set_diff <= 1e-9)

    # --- ROUGE alone against a reused rouge-score scorer ----------------------------------------
    rsub = min(args.rouge_subsample, n)
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    t = time.perf_counter()
    ref_rouge = [scorer.score(references[i], answers[i]) for i in range(rsub)]
    ref_rate = rsub / (time.perf_counter() - t)
    _fresh_rouge_caches()
    seconds, values = _ours(ROUGE_KEYS, samples, ScoringContext())
    diff = max(float(np.abs(values[k][:rsub] - np.array(
        [getattr(s[k.split("_")[0]], k.split("_")[1]) for s in ref_rouge])).max()) for k in ROUGE_KEYS)
    out["rouge"] = _row("ROUGE (9 keys)", n / sum(seconds.values()), ref_rate, diff, rsub,
                        "rouge-score, reused scorer, stemming")
    out["rouge"].update(target_ratio=10, met=out["rouge"]["ratio"] >= 10 and diff <= 1e-9)

    # --- BLEU / bleu2 / chrF against sacrebleu with a reused object -----------------------------
    mt = [("bleu", sacrebleu.BLEU(effective_order=True), "sacrebleu BLEU, reused object"),
          ("bleu2", sacrebleu.BLEU(max_ngram_order=2, smooth_method="none"),
           "sacrebleu BLEU(order 2, no smoothing), reused"),
          ("chrf", sacrebleu.CHRF(), "sacrebleu CHRF, reused object")]
    for key, metric, label in mt:
        t = time.perf_counter()
        ref = np.array([metric.sentence_score(a, [r]).score / 100 for a, r in zip(answers, references, strict=True)])
        ref_rate = n / (time.perf_counter() - t)
        seconds, values = _ours([key], samples, ScoringContext())
        diff = float(np.abs(values[key] - np.minimum(ref, 1.0)).max())
        out[key] = _row(key, n / seconds[key], ref_rate, diff, n, label)
        out[key].update(target_ratio=1.0, met=out[key]["ratio"] >= 1.0 and diff <= 1e-9)

    t = time.perf_counter()
    for i in range(min(2000, n)):
        sacrebleu.sentence_bleu(answers[i], [references[i]])
    out["bleu"]["sentence_bleu_new_object_pairs_per_s"] = round(min(2000, n) / (time.perf_counter() - t), 1)

    print()
    for name in ("seed002_string_set", "rouge", "bleu", "bleu2", "chrf"):
        r = out[name]
        print(f"{name}: {r['ratio']:.1f}x (target {r['target_ratio']}x) -> {'met' if r['met'] else 'NOT met'}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
