"""BERTScore on ~500 answer/reference pairs: ragmeter (texts in padded batches sorted by length)
beside the ``bert-score`` package on the same pairs, model folder and layer, with the largest
difference of their F1 values. Each side runs in a fresh process (the model loaded before the
clock starts: a run's first batches of each shape are part of its time), A/B/B/A.
``--single`` also times the former way (each text through the model on its own, unpadded), B/A.

    python benchmarks/bertscore.py [--pairs 500] [--single]

The last line is one JSON object: ``ragmeter_s`` and ``bert_score_s`` (each the mean of its two
runs), ``ratio`` (bert-score's time / ragmeter's), ``max_abs_f1_difference``, ``load`` (1-minute
load average before and after) and, with ``--single``, ``single_s`` and ``single_ratio``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np


def pairs(n: int) -> tuple[list[str], list[str]]:
    """``n`` pairs of mixed lengths (6 to 150 words) from the bundled human-labelled answers."""
    from ragmeter.analysis.meta_eval.reader import read_labels

    samples = read_labels("example-human").samples
    cands, refs = [], []
    for i in range(n):
        s = samples[i % len(samples)]
        k = i // len(samples)
        words = (s.answer or "").split()
        cands.append(" ".join(words[k * 11: k * 11 + 6 + (i * 37) % 145]))
        refs.append(" ".join(s.references[i % len(s.references)].split()[: 8 + (i * 53) % 140]))
    return cands, refs


def ragmeter_f1(cands: list[str], refs: list[str], layer: int) -> np.ndarray:
    from ragmeter.embed.contextual import TokenEmbeddingService
    from ragmeter.metrics.bertscore import score_pairs

    svc = TokenEmbeddingService({})  # a fresh run: nothing encoded yet (the model is cached by the loader below)
    svc._encoders.update(_SVC._encoders)
    return np.array([r["f1"] for r in score_pairs(svc, cands, [[r] for r in refs], num_layers=layer)])


def single_f1(cands: list[str], refs: list[str], layer: int) -> np.ndarray:
    """The former way: each text through the model alone (``TokenEmbeddingService.tokens``)."""
    from ragmeter.embed.contextual import TokenEmbeddingService
    from ragmeter.metrics.bertscore import _weights, pair_score

    svc = TokenEmbeddingService({})
    svc._encoders.update(_SVC._encoders)
    weight = _weights(svc, None, False, refs)
    return np.array([pair_score(svc.tokens(a, None, layer), svc.tokens(r, None, layer), weight)[2]
                     for a, r in zip(cands, refs, strict=True)])


_SVC = None


def child(impl: str, n: int, layer: int) -> None:
    """One side in this process: its seconds and F1 values as the last line."""
    global _SVC
    from ragmeter.embed import bundled_model_path
    from ragmeter.embed.contextual import TokenEmbeddingService

    cands, refs = pairs(n)
    path = str(bundled_model_path())
    if impl == "bert_score":
        from bert_score import BERTScorer

        scorer = BERTScorer(model_type=path, num_layers=layer)  # the model loaded once, as ragmeter's
        t0 = time.perf_counter()
        f1 = scorer.score(cands, refs)[2].numpy()
    else:
        _SVC = TokenEmbeddingService({})
        _SVC.encoder(None)
        t0 = time.perf_counter()
        f1 = (ragmeter_f1 if impl == "ragmeter" else single_f1)(cands, refs, layer)
    print(json.dumps({"s": time.perf_counter() - t0, "f1": f1.tolist()}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=500)
    ap.add_argument("--layer", type=int, default=6)
    ap.add_argument("--single", action="store_true", help="also time each text through the model on its own")
    ap.add_argument("--child", choices=("ragmeter", "bert_score", "single"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.pairs, args.layer)
        return
    load0 = os.getloadavg()[0]
    times: dict[str, list[float]] = {"ragmeter": [], "bert_score": [], "single": []}
    values = {}
    order = ["ragmeter", "bert_score", "bert_score", "ragmeter"] + (["single"] if args.single else [])
    for name in order:
        proc = subprocess.run([sys.executable, __file__, "--child", name, "--pairs", str(args.pairs),
                               "--layer", str(args.layer)], capture_output=True, text=True, check=True)
        got = json.loads(proc.stdout.strip().splitlines()[-1])
        times[name].append(got["s"])
        values[name] = np.array(got["f1"])
        print(f"{name:<11} {got['s']:7.2f} s  (load {os.getloadavg()[0]:.2f})", flush=True)
    mean = {k: sum(v) / len(v) for k, v in times.items() if v}
    out = {"pairs": args.pairs, "layer": args.layer, "ragmeter_s": round(mean["ragmeter"], 3),
           "bert_score_s": round(mean["bert_score"], 3), "ratio": round(mean["bert_score"] / mean["ragmeter"], 2),
           "runs": {k: [round(t, 3) for t in v] for k, v in times.items() if v},
           "max_abs_f1_difference": float(np.abs(values["ragmeter"] - values["bert_score"]).max()),
           "load": [round(load0, 2), round(os.getloadavg()[0], 2)]}
    if "single" in mean:
        out |= {"single_s": round(mean["single"], 3), "single_ratio": round(mean["single"] / mean["ragmeter"], 2),
                "single_max_abs_f1_difference": float(np.abs(values["single"] - values["bert_score"]).max())}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
