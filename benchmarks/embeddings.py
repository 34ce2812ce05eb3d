"""Embedding speed: raw ``SentenceTransformer.encode`` vs ragmeter's semantic metrics, same texts, one process.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/embeddings.py            # the headline (below)
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/embeddings.py --service  # the service's overheads
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/embeddings.py --sweep    # batch size x torch threads
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/embeddings.py --quick    # 1/10 of the texts
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/embeddings.py --backends # torch vs onnx vs onnx-int8
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/embeddings.py --onnx-sweep  # ONNX tokens per batch

The headline (no flag): 2,000 samples (a RAG answer of 1-3 sentences and its reference of 1-2
sentences, fixed seed, all texts distinct) scored with ``semantic_similarity`` by
``ragmeter.evaluate`` with the default settings, each run into a new, empty store (a cold embedding
cache), against what a user would otherwise write: ``SentenceTransformer(model).encode`` of the
answers and references (one call, default batch size) and the cosine of each pair, clipped at 0 as
the metric does. Both models are loaded and warmed up before any timing, so model loading is
excluded on both sides (its time is printed beside). The two sides run alternately, A/B/B/A
(``--rounds`` pairs of pairs), and the ratio of the medians is ``ratio_vs_sentence_transformers``;
``max_abs_diff`` is the largest difference between the two sides' 2,000 values. The optional int8
backend (``embedding_backend=onnx-int8``) is then run once on the same samples and its values
compared with the full-precision ones.

The headline's ``roofline`` says how close each side comes to this machine's limit:
``gemm_peak_gflops`` is its float32 matrix-product speed (the best of five numpy 4096x384 @
384x1536 products, before and after the timed runs; each measurement is listed), the work is the
encoder's floating-point operations over the 4,000 texts at their exact token lengths
(``work_exact_gflop``) and with sentence-transformers' padding (``work_st_padded_gflop``: sorted by
characters, batches of 32 padded to their longest text): per token and layer 2·4·h² for the
attention projections and 2·2·h·f for the feed-forward, per text and layer 2·2·L²·h for the
attention (element-wise work left out). ``st_achieved_gflops`` is the padded work over
sentence-transformers' median time, ``ragmeter_achieved_gflops`` the exact work over ragmeter's
(store, tokenisation and pooling included), and ``max_ratio_at_peak`` sentence-transformers'
time over the exact work's time at the peak: the highest ``ratio_vs_sentence_transformers`` a
float32 encoder running every operation at the machine's peak could show. With all-MiniLM-L6-v2
on 2 cores it is about 1.65, so the 1.5x target needs 90% of the peak end to end.

``--service`` (the service's own overheads, torch on both sides): 5,000 short answers (6-14 words) and 1,000 passages (5-9 sentences, about 100-200 words),
generated with a fixed seed, laid out as samples of one answer, four references and one retrieved
passage. ragmeter scores them with ``semantic_similarity`` (answer vs best reference) and
``context_similarity`` (answer vs passage) through ``ragmeter.evaluate`` - dataset checks, store
writes and aggregation included - against raw encoding of the same texts with the same model
object:

1. no duplicates: ragmeter's overhead over raw encode (target <= 10%);
2. 50% duplicate texts (each distinct text twice): ragmeter embeds each once (target >= 1.8x);
3. the same evaluations again on their stores: every vector from the cache (target >= 20x);
4. (with onnxruntime installed) the ONNX Runtime backends on the no-duplicate data.

``--backends`` compares the encoders alone (no store, no metrics): sentence-transformers (torch),
ragmeter's ONNX Runtime export in float32 (``onnx``) and with int8 weights (``onnx-int8``) on
2,000 texts (1,600 short answers, 400 passages), timed paired in rotating order on 4 chunks,
best of two per chunk; the JSON gives texts/s of each, the ratios to torch, and how far each
backend's cosine similarities are from torch's over every pair of the 2,000 texts (max, 99th
percentile, mean of |cos_backend - cos_torch|). ``--threads 1`` runs every backend on one thread:
on a machine shared with other jobs, two-thread torch suffers more from losing a core than ONNX
Runtime does, and one thread each compares the kernels alone.

The machine this runs on may be shared, so raw and ragmeter are measured *paired*: the data is
cut into 4 chunks (250 samples, 1,500 texts each) and both are timed twice on each chunk in ABBA
order, so drifts in the machine's load hit both alike; the best of the two runs of each chunk
counts, and the sums over all chunks are compared. Wall time and this process's CPU time are
both reported. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

WORDS = """
the a of to and in is for on that with as by at from this be are was it or an which ferry port
island crossing ticket passenger vehicle deck captain harbour timetable departure arrival terminal
check booking refund fare season summer winter weather storm delay cancel service route vessel crew
safety lifejacket muster station cabin cafe luggage bicycle pet dog child adult senior discount card
pass annual monthly weekly daily morning evening night hour minute day week month year holiday
staff manager director office headquarters policy leave sick pay salary contract training course
security password laptop email phone network access badge visitor guest meeting report budget cost
price euro pound tax invoice receipt payment cash online app website account login reset support
north south east west coast bay river bridge road car van truck bus train station airport town city
village market school hospital museum church castle park beach cliff lighthouse tide wave wind rain
fog snow sun cloud temperature warm cold early late open closed free full busy quiet fast slow new old
large small long short high low first last next previous every each all some many few more less most
must should can may will would could need want give take make keep leave arrive depart wait board
""".split()


def make_texts(n_short: int, n_passage: int, seed: int = 20261122) -> tuple[list[str], list[str]]:
    rng = np.random.default_rng(seed)

    def sentence(lo: int, hi: int) -> str:
        words = rng.choice(WORDS, int(rng.integers(lo, hi + 1)))
        return (" ".join(words).capitalize() + ".").replace(" .", ".")

    shorts = list(dict.fromkeys(sentence(6, 14) for _ in range(int(n_short * 1.05))))[:n_short]
    passages = [" ".join(sentence(12, 24) for _ in range(int(rng.integers(5, 10)))) for _ in range(n_passage)]
    assert len(shorts) == n_short and len(set(passages)) == n_passage
    return shorts, passages


def make_samples(shorts: list[str], passages: list[str]) -> list[dict]:
    """One answer, four references and one passage per sample."""
    return [{"id": f"s{i}", "answer": shorts[5 * i], "references": shorts[5 * i + 1:5 * i + 5],
             "contexts": [passages[i]]} for i in range(len(passages))]


def chunk_texts(shorts: list[str], passages: list[str], n_chunks: int) -> list[tuple[list[str], list[str]]]:
    """Split into ``n_chunks`` pieces of whole samples (5 shorts and 1 passage per sample)."""
    per = len(passages) // n_chunks
    return [(shorts[5 * per * k:5 * per * (k + 1)], passages[per * k:per * (k + 1)]) for k in range(n_chunks)]


def with_duplicates(shorts: list[str], passages: list[str], seed: int = 7) -> tuple[list[str], list[str]]:
    """Slots of the same size, filled by half as many distinct texts, each used twice, shuffled."""
    rng = np.random.default_rng(seed)
    s = shorts[:len(shorts) // 2] * 2
    p = passages[:len(passages) // 2] * 2
    return [s[i] for i in rng.permutation(len(s))], [p[i] for i in rng.permutation(len(p))]


class Clock:
    """Wall time and this process's CPU time of a block (CPU time is less disturbed by other
    processes on a shared machine; both are reported)."""

    def __enter__(self) -> Clock:
        self.wall0, self.cpu0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall0
        self.cpu = time.process_time() - self.cpu0


def raw_encode(model, shorts: list[str], passages: list[str], batch_size: int):
    """Raw sentence-transformers: returns (clock for both, clock shorts, clock passages, vectors...)."""
    kw = {"batch_size": batch_size, "normalize_embeddings": True, "convert_to_numpy": True,
          "show_progress_bar": False}
    with Clock() as total:
        with Clock() as c_short:
            a = model.encode(shorts, **kw)
        with Clock() as c_pass:
            b = model.encode(passages, **kw)
    return total, c_short, c_pass, a, b


def ragmeter_eval(samples: list[dict], db: str, options: dict | None = None):
    import ragmeter

    options = options or {"embedding_backend": "st"}
    with Clock() as c:
        result = ragmeter.evaluate(samples, ["semantic_similarity", "context_similarity"], db=db, options=options)
    return c, result


def check_values(result, samples: list[dict], shorts: list[str], a: np.ndarray,
                 passages: list[str], b: np.ndarray) -> float:
    """Largest difference between ragmeter's values and the same formula on the raw embeddings."""
    row = {t: a[i] for i, t in enumerate(shorts)}
    prow = {t: b[i] for i, t in enumerate(passages)}
    diffs = []
    for s, sem, ctx in zip(samples, result.scores["semantic_similarity"], result.scores["context_similarity"],
                           strict=True):
        want = max(0.0, max(float(row[s["answer"]] @ row[r]) for r in s["references"]))
        want_ctx = max(0.0, float(row[s["answer"]] @ prow[s["contexts"][0]]))
        diffs += [abs(sem.value - want), abs(ctx.value - want_ctx)]
    return max(diffs)


def sweep(model, shorts: list[str], passages: list[str]) -> dict:
    import torch

    out = {}
    default_threads = torch.get_num_threads()
    sub_s, sub_p = shorts[:1000], passages[:200]
    model.encode(sub_s[:64], batch_size=32)
    for threads in sorted({1, default_threads}):
        torch.set_num_threads(threads)
        for bs in (16, 32, 64, 128):
            _, cs, cp, _, _ = raw_encode(model, sub_s, sub_p, bs)
            out[f"threads={threads},batch={bs}"] = {
                "short_per_s": round(len(sub_s) / cs.wall, 1), "passage_per_s": round(len(sub_p) / cp.wall, 1),
                "short_per_cpu_s": round(len(sub_s) / cs.cpu, 1), "passage_per_cpu_s": round(len(sub_p) / cp.cpu, 1)}
            print(f"threads {threads} batch {bs:>3}: {len(sub_s) / cs.wall:7.1f} short/s  "
                  f"{len(sub_p) / cp.wall:6.1f} passages/s  (per CPU-second: {len(sub_s) / cs.cpu:7.1f} short, "
                  f"{len(sub_p) / cp.cpu:6.1f} passages)", flush=True)
    torch.set_num_threads(default_threads)
    return out


def paired(chunks: list, run_a, run_b, repeats: int = 2) -> tuple[list, list]:
    """Run ``run_a`` and ``run_b`` ``repeats`` times on every chunk, in ABBA order (BAAB on odd
    chunks). Returns, per chunk, the list of each one's results (first run first)."""
    a_out: list[list] = []
    b_out: list[list] = []
    for k, chunk in enumerate(chunks):
        ra: list = []
        rb: list = []
        for r in range(repeats):
            first_a = (k + r) % 2 == 0
            for fn, out in ((run_a, ra), (run_b, rb)) if first_a else ((run_b, rb), (run_a, ra)):
                out.append(fn(chunk))
        a_out.append(ra)
        b_out.append(rb)
    return a_out, b_out


def clock_of(result) -> Clock:
    return result if isinstance(result, Clock) else result[0]


def total(per_chunk: list[list]) -> tuple[float, float]:
    """Sum over chunks of the best (smallest) wall time and of the best CPU time of the repeats."""
    return (sum(min(clock_of(r).wall for r in runs) for runs in per_chunk),
            sum(min(clock_of(r).cpu for r in runs) for runs in per_chunk))


def varied_texts(n_short: int, n_passage: int) -> list[str]:
    """Short answers, passages, and texts unlike both (numbers, code, other scripts, one word)."""
    shorts, passages = make_texts(n_short, n_passage)
    odd = ["Paris", "x", "42", "SELECT * FROM ferries WHERE port = 'Dover';", "東京は日本の首都です",
           "Le ferry part à 8 h 15 du quai nord.", "Die Fähre fährt täglich um 9 Uhr.", "ok " * 200,
           "Refunds: 100% up to 48 h before departure, 50% afterwards, none after check-in.",
           "def refund(ticket): return ticket.price * 0.5"]
    return odd + shorts[:n_short - len(odd)] + passages


def compare_backends(quick: bool = False, repeats: int = 2, threads: int = 0) -> dict:
    """torch vs onnx vs onnx-int8 encoders on the same texts, paired (see the module docstring).
    ``threads``: torch and ONNX Runtime threads (0: each library's default, one per core)."""
    from ragmeter.embed import DEFAULT_BATCH_SIZE, get_encoder, resolve_model
    from ragmeter.embed.onnx import MAX_BATCH_TOKENS, OnnxEncoder

    n_short, n_passage = (400, 100) if quick else (1600, 400)
    texts = varied_texts(n_short, n_passage)
    rng = np.random.default_rng(3)
    texts = [texts[i] for i in rng.permutation(len(texts))]  # every chunk gets its share of each kind
    n_chunks = 4
    chunks = [texts[k::n_chunks] for k in range(n_chunks)]
    names = ("torch", "onnx", "onnx-int8")
    if threads:
        import torch

        torch.set_num_threads(threads)
    load_s = {}
    encoders = {}
    for name, model in zip(names, (None, "onnx:all-MiniLM-L6-v2", "onnx-int8:all-MiniLM-L6-v2"), strict=True):
        t = time.perf_counter()
        if threads and model is not None:
            encoders[name] = OnnxEncoder(resolve_model(model), threads=threads)
        else:
            encoders[name] = get_encoder(model)  # the ONNX ones export / quantise on first use, cached afterwards
        load_s[name] = round(time.perf_counter() - t, 2)
        encoders[name].encode(texts[:48])  # warm-up
    wall = dict.fromkeys(names, 0.0)
    cpu = dict.fromkeys(names, 0.0)
    vectors: dict[str, list[np.ndarray]] = {n: [] for n in names}
    for k, chunk in enumerate(chunks):
        order = names[k % 3:] + names[:k % 3]
        best: dict[str, tuple[float, float]] = {}
        for r in range(repeats):
            for name in order if r % 2 == 0 else order[::-1]:
                with Clock() as c:
                    x = encoders[name].encode(chunk, batch_size=DEFAULT_BATCH_SIZE)
                b = best.get(name, (float("inf"), float("inf")))
                best[name] = (min(b[0], c.wall), min(b[1], c.cpu))
                if r == 0:
                    vectors[name].append(x)
        for name in names:
            wall[name] += best[name][0]
            cpu[name] += best[name][1]
        print(f"chunk {k}: " + ", ".join(f"{n} {best[n][0]:.2f}s" for n in names)
              + f" (load average {os.getloadavg()[0]:.2f})", flush=True)
    x = {n: np.concatenate(v) for n, v in vectors.items()}
    ref = x["torch"] @ x["torch"].T
    iu = np.triu_indices(len(texts), k=1)
    out: dict = {"mode": "backends", "n_texts": len(texts), "n_short": n_short, "n_passage": n_passage,
                 "chunks": n_chunks, "repeats": repeats, "batch_size": DEFAULT_BATCH_SIZE,
                 "onnx_max_batch_tokens": MAX_BATCH_TOKENS, "cpu_count": os.cpu_count(),
                 "threads": threads or "library defaults",
                 "load_s": load_s, "texts_per_s": {}, "speedup_vs_torch": {}, "cpu_speedup_vs_torch": {},
                 "cosine_abs_diff_vs_torch": {}}
    for n in names:
        d = np.abs((x[n] @ x[n].T) - ref)[iu]
        out["texts_per_s"][n] = round(len(texts) / wall[n], 1)
        out["speedup_vs_torch"][n] = round(wall["torch"] / wall[n], 3)
        out["cpu_speedup_vs_torch"][n] = round(cpu["torch"] / cpu[n], 3)
        out["cosine_abs_diff_vs_torch"][n] = {"max": float(d.max()), "p99": float(np.quantile(d, 0.99)),
                                              "mean": float(d.mean()), "pairs": int(d.size)}
        print(f"{n:10s} {out['texts_per_s'][n]:7.1f} texts/s  {out['speedup_vs_torch'][n]:.2f}x torch "
              f"(CPU {out['cpu_speedup_vs_torch'][n]:.2f}x)  max |cos diff| {d.max():.2e}", flush=True)
    within = [n for n in names if out["cosine_abs_diff_vs_torch"][n]["max"] <= 1e-3]
    out["fastest_within_1e-3"] = max(within, key=lambda n: out["texts_per_s"][n])
    return out


def onnx_sweep(quick: bool = False, repeats: int = 3) -> dict:
    """Texts/s of the ONNX backends for several token budgets per batch, short texts and passages
    apart; the budgets are interleaved in rotating order and the best of ``repeats`` counts."""
    from ragmeter.embed import get_encoder

    shorts, passages = make_texts(200 if quick else 800, 40 if quick else 160)
    budgets = (1024, 2048, 4096, 8192)  # 8192 = no cap at 32 texts of 256 tokens
    out = {}
    for model in ("onnx:all-MiniLM-L6-v2", "onnx-int8:all-MiniLM-L6-v2"):
        enc = get_encoder(model)
        enc.encode(passages[:8])
        best: dict[tuple[int, str], float] = {}
        for r in range(repeats):
            for budget in budgets[r % 4:] + budgets[:r % 4]:
                enc.max_batch_tokens = budget
                for kind, texts in (("short", shorts), ("passage", passages)):
                    t = _timed(enc, texts)
                    best[budget, kind] = min(best.get((budget, kind), t), t)
        for budget in budgets:
            res = {f"{k}_per_s": round(len(t) / best[budget, k], 1) for k, t in (("short", shorts),
                                                                                ("passage", passages))}
            out[f"{model.split(':')[0]},tokens={budget}"] = res
            print(model.split(":")[0], budget, res, flush=True)
        enc.max_batch_tokens = 2048
    return out


def _timed(enc, texts: list[str]) -> float:
    with Clock() as c:
        enc.encode(texts, batch_size=32)
    return c.wall


def make_pairs(n: int, seed: int = 20261128) -> list[dict]:
    """``n`` samples of a RAG answer (1-3 sentences) and its reference (1-2 sentences): the answer
    shares words with its reference, as a right answer would; every text distinct."""
    rng = np.random.default_rng(seed)

    def sentence(lo: int, hi: int) -> str:
        words = rng.choice(WORDS, int(rng.integers(lo, hi + 1)))
        return (" ".join(words).capitalize() + ".").replace(" .", ".")

    samples: list[dict] = []
    seen: set[str] = set()
    while len(samples) < n:
        ref = " ".join(sentence(6, 18) for _ in range(int(rng.integers(1, 3))))
        kept = [w for w in ref.split() if rng.random() < 0.6]
        ans = " ".join([" ".join(kept).capitalize().rstrip(".") + "."]
                       + [sentence(6, 16) for _ in range(int(rng.integers(0, 3)))])
        if ans in seen or ref in seen or ans == ref:
            continue
        seen.update((ans, ref))
        samples.append({"id": f"q{len(samples)}", "answer": ans, "reference": ref})
    return samples


def headline(n: int = 2000, rounds: int = 1, int8: bool = True) -> dict:
    """ragmeter's ``semantic_similarity`` (default settings, cold store) against plain
    sentence-transformers encode + cosine on the same samples (see the module docstring)."""
    load_start = os.getloadavg()[0]
    t = time.perf_counter()
    from sentence_transformers import SentenceTransformer

    from ragmeter.embed import bundled_model_path
    st_import_s = time.perf_counter() - t
    t = time.perf_counter()
    st = SentenceTransformer(str(bundled_model_path()), device="cpu")
    st_load_s = time.perf_counter() - t
    import ragmeter
    from ragmeter.embed import get_encoder

    t = time.perf_counter()
    enc = get_encoder()  # what the default settings run on (the ONNX export is made once per machine)
    rm_load_s = time.perf_counter() - t
    samples = make_pairs(n)
    answers = [s["answer"] for s in samples]
    refs = [s["reference"] for s in samples]
    tmp = Path(tempfile.mkdtemp(prefix="ragmeter-bench-"))
    counter = iter(range(10_000))

    def plain() -> tuple[float, np.ndarray]:
        t0 = time.perf_counter()
        x = st.encode(answers + refs, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        values = np.maximum((x[:n] * x[n:]).sum(axis=1), 0.0)
        return time.perf_counter() - t0, values

    def ours(options: dict | None = None) -> tuple[float, np.ndarray]:
        db = f"sqlite:///{tmp / f'run{next(counter)}.db'}"  # a new store: nothing cached
        t0 = time.perf_counter()
        res = ragmeter.evaluate(samples, ["semantic_similarity"], db=db, options=options)
        wall = time.perf_counter() - t0
        assert res.extra["embeddings"]["computed"] == 2 * n and res.extra["embeddings"]["cached"] == 0
        return wall, np.array([s.value for s in res.scores["semantic_similarity"]])

    peaks = [gemm_peak_gflops()]
    # warm-up of both sides (first-call allocations, one-time imports), not timed
    st.encode(answers[:64], show_progress_bar=False)
    ragmeter.evaluate(samples[:16], ["semantic_similarity"], db=f"sqlite:///{tmp / 'warm.db'}")
    times: dict[str, list[float]] = {"sentence_transformers": [], "ragmeter": []}
    values: dict[str, np.ndarray] = {}
    for r in range(rounds):
        for side in ("sentence_transformers", "ragmeter", "ragmeter", "sentence_transformers"):
            wall, v = plain() if side == "sentence_transformers" else ours()
            times[side].append(wall)
            values.setdefault(side, v)
            print(f"round {r + 1} {side}: {wall:.2f}s (load average {os.getloadavg()[0]:.2f})", flush=True)
    peaks.append(gemm_peak_gflops())
    med = {k: float(np.median(v)) for k, v in times.items()}
    diff = float(np.abs(values["ragmeter"] - values["sentence_transformers"]).max())
    out: dict = {
        "mode": "headline", "samples": n, "texts_embedded_per_run": 2 * n, "metric": "semantic_similarity",
        "data": "generated RAG-like answers (1-3 sentences) and references (1-2 sentences), all distinct",
        "order": "A/B/B/A" + f" x {rounds}", "store": "cold (a new, empty store per ragmeter run)",
        "model_load": "excluded on both sides (loaded and warmed up before timing; times below)",
        "default_encoder": type(enc).__name__, "encoder_threads": _threads(enc),
        "cpu_count": os.cpu_count(), "st_import_s": round(st_import_s, 2), "st_load_s": round(st_load_s, 2),
        "ragmeter_load_s": round(rm_load_s, 2),
        "sentence_transformers_s": [round(x, 3) for x in times["sentence_transformers"]],
        "ragmeter_s": [round(x, 3) for x in times["ragmeter"]],
        "median_s": {k: round(v, 3) for k, v in med.items()},
        "ratio_vs_sentence_transformers": round(med["sentence_transformers"] / med["ragmeter"], 3),
        "max_abs_diff": diff, "within_1e-6": diff <= 1e-6,
        "roofline": roofline(enc, answers + refs, med, peaks),
    }
    print(f"sentence-transformers encode + cosine {med['sentence_transformers']:.2f}s, ragmeter "
          f"{med['ragmeter']:.2f}s (medians): {out['ratio_vs_sentence_transformers']:.2f}x; "
          f"max |diff| {diff:.2e}", flush=True)
    roof = out["roofline"]
    print(f"roofline: float32 GEMM peak {roof['gemm_peak_gflops']:.0f} GFLOP/s; work {roof['work_exact_gflop']:.0f} "
          f"GFLOP exact, {roof['work_st_padded_gflop']:.0f} with sentence-transformers' padding; achieved "
          f"sentence-transformers {roof['st_achieved_gflops']:.0f}, ragmeter {roof['ragmeter_achieved_gflops']:.0f} "
          f"GFLOP/s; at the peak ragmeter would be {roof['max_ratio_at_peak']:.2f}x", flush=True)
    if int8 and importlib.util.find_spec("onnxruntime"):
        wall, v = ours({"embedding_backend": "onnx-int8"})
        d = np.abs(v - values["ragmeter"])
        out["onnx_int8"] = {"s_one_run": round(wall, 3), "max_abs_diff_vs_full_precision": float(d.max()),
                            "mean_abs_diff_vs_full_precision": float(d.mean()),
                            "p99_abs_diff_vs_full_precision": float(np.quantile(d, 0.99))}
        print(f"onnx-int8 (one run) {wall:.2f}s; |diff| vs full precision max {d.max():.4f}, "
              f"mean {d.mean():.4f}", flush=True)
    out["load_avg"] = [round(load_start, 2), round(os.getloadavg()[0], 2)]
    shutil.rmtree(tmp, ignore_errors=True)
    return out


def gemm_peak_gflops(reps: int = 5) -> float:
    """This machine's float32 matrix-product speed: the best of ``reps`` numpy products of a
    4096x384 and a 384x1536 matrix (the shape of a BERT-small feed-forward layer over 4,096
    tokens), in GFLOP/s (2·m·k·n floating-point operations each)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4096, 384), dtype=np.float32)
    b = rng.standard_normal((384, 1536), dtype=np.float32)
    a @ b  # first-call allocations
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * 4096 * 384 * 1536 / best / 1e9


def forward_gflop(lengths: list[int], config: dict) -> float:
    """Floating-point operations (GFLOP) of a BERT encoder's forward pass over texts of these token
    ``lengths`` (each padded length counted as it is computed): per layer and token, the four
    attention projections 2·4·h², the feed-forward 2·2·h·f; per layer and text, the attention
    scores and their weighted sum 2·2·L²·h (embeddings, norms, activations and pooling are
    element-wise and left out)."""
    h, f, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    per_token = 2 * 4 * h * h + 2 * 2 * h * f
    return layers * sum(n * per_token + 4 * n * n * h for n in lengths) / 1e9


def st_padded_lengths(texts: list[str], token_counts: list[int], batch_size: int = 32) -> list[int]:
    """The padded length of every row sentence-transformers computes: it sorts texts by character
    count (longest first, ``np.argsort`` of the negated lengths, as ``SentenceTransformer.encode``
    does), cuts batches of ``batch_size`` and pads each batch to its longest tokenised text."""
    order = np.argsort([-len(t) for t in texts])
    out: list[int] = []
    for start in range(0, len(order), batch_size):
        batch = order[start:start + batch_size]
        out += [max(token_counts[i] for i in batch)] * len(batch)
    return out


def roofline(enc, texts: list[str], med: dict[str, float], peaks: list[float]) -> dict:
    """How close each side comes to this machine's float32 matrix-product speed (see
    :func:`gemm_peak_gflops`, :func:`forward_gflop`): the work at the texts' exact token lengths
    and with sentence-transformers' padding, each side's achieved GFLOP/s (ragmeter's over the
    exact work), and ``max_ratio_at_peak``: sentence-transformers' time over the time the exact
    work would take at the peak, the ratio a ragmeter running every operation at the peak would
    reach."""
    from ragmeter.embed import bundled_model_path

    config = json.loads((bundled_model_path() / "config.json").read_text(encoding="utf-8"))
    tok = getattr(enc, "tokenizer", None)
    if tok is None:  # the sentence-transformers encoder: its tokenizer, with truncation
        counts = [len(x) for x in enc.model.tokenizer(texts, truncation=True, max_length=enc.model.max_seq_length)[
            "input_ids"]]
    else:
        counts = [len(e.ids) for e in tok.encode_batch(texts)]
    exact = forward_gflop(counts, config)
    padded = forward_gflop(st_padded_lengths(texts, counts), config)
    peak = max(peaks)
    return {
        "gemm_peak_gflops": round(peak, 1),
        "gemm_peak_measured_gflops": [round(p, 1) for p in peaks],
        "gemm_shape": "4096x384 @ 384x1536 float32, numpy, best of 5, before and after the timed runs",
        "tokens": sum(counts), "mean_tokens": round(sum(counts) / len(counts), 1), "max_tokens": max(counts),
        "work_exact_gflop": round(exact, 1), "work_st_padded_gflop": round(padded, 1),
        "st_achieved_gflops": round(padded / med["sentence_transformers"], 1),
        "ragmeter_achieved_gflops": round(exact / med["ragmeter"], 1),
        "st_fraction_of_peak": round(padded / med["sentence_transformers"] / peak, 3),
        "ragmeter_fraction_of_peak": round(exact / med["ragmeter"] / peak, 3),
        "max_ratio_at_peak": round(med["sentence_transformers"] / (exact / peak), 3),
    }


def _threads(enc) -> int | None:
    if getattr(enc, "threads", None):
        return enc.threads
    session = getattr(enc, "session", None)
    if session is not None:
        return session.get_session_options().intra_op_num_threads
    import torch

    return torch.get_num_threads()


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="a tenth of the texts")
    ap.add_argument("--sweep", action="store_true", help="only measure batch sizes x torch threads")
    ap.add_argument("--no-onnx", action="store_true", help="skip the ONNX Runtime backends")
    ap.add_argument("--backends", action="store_true", help="only compare the torch, onnx and onnx-int8 encoders")
    ap.add_argument("--onnx-sweep", action="store_true", help="only measure tokens per batch of the ONNX backends")
    ap.add_argument("--threads", type=int, default=0, help="with --backends: torch and ONNX Runtime threads")
    ap.add_argument("--repeats", type=int, default=2, help="runs of each side per chunk (the best counts)")
    ap.add_argument("--service", action="store_true", help="the service's overheads over raw encode (torch)")
    ap.add_argument("--samples", type=int, default=2000, help="headline: samples (2 texts each)")
    ap.add_argument("--rounds", type=int, default=1, help="headline: A/B/B/A rounds")
    ap.add_argument("--no-int8", action="store_true", help="headline: skip the int8 backend's agreement")
    args = ap.parse_args(argv)
    if not (args.service or args.sweep or args.backends or args.onnx_sweep):
        res = headline(args.samples // (10 if args.quick else 1), args.rounds, not args.no_int8)
        print(json.dumps(res))
        return res
    load_start = os.getloadavg()[0]
    if args.backends or args.onnx_sweep:
        res = compare_backends(args.quick, args.repeats, args.threads) if args.backends else {"onnx_sweep": onnx_sweep(args.quick)}
        res["load_avg"] = [round(load_start, 2), round(os.getloadavg()[0], 2)]
        print(json.dumps(res))
        return res

    t = time.perf_counter()
    import sentence_transformers  # noqa: F401
    import_s = time.perf_counter() - t
    import torch

    from ragmeter.embed import DEFAULT_BATCH_SIZE, get_encoder

    t = time.perf_counter()
    enc = get_encoder(backend="st")
    load_s = time.perf_counter() - t
    model = enc.model  # raw encode uses the very model object ragmeter uses (torch on both sides)
    scale = 10 if args.quick else 1
    shorts, passages = make_texts(5000 // scale, 1000 // scale)
    print(f"import sentence-transformers {import_s:.2f}s, load model {load_s:.2f}s, torch threads "
          f"{torch.get_num_threads()}, {os.cpu_count()} CPUs, load average {load_start:.2f}", flush=True)
    if args.sweep:
        res = {"sweep": sweep(model, shorts, passages), "load_avg": [load_start, os.getloadavg()[0]]}
        print(json.dumps(res))
        return res

    bs = DEFAULT_BATCH_SIZE
    model.encode(shorts[:64] + passages[:8], batch_size=bs)  # warm-up: first-call allocations
    n_texts = len(shorts) + len(passages)
    n_chunks = 4 if not args.quick else 2
    tmp = Path(tempfile.mkdtemp(prefix="ragmeter-bench-"))
    counter = iter(range(10_000))

    def fresh_db() -> str:
        return f"sqlite:///{tmp / f'run{next(counter)}.db'}"

    ragmeter_eval(make_samples(shorts[:10], passages[:2]), fresh_db())  # warm-up: one-time imports

    def raw(chunk):
        return raw_encode(model, chunk[0], chunk[1], bs)

    def cold(options=None):
        def run(chunk):
            db = fresh_db()
            c, result = ragmeter_eval(make_samples(*chunk), db, options)
            return c, result, db
        return run

    # 1. no duplicates
    chunks = chunk_texts(shorts, passages, n_chunks)
    raws, rms = paired(chunks, raw, cold(), args.repeats)
    (w_raw, u_raw), (w_rm, u_rm) = total(raws), total(rms)
    w_raw_s = sum(min(r[1].wall for r in runs) for runs in raws)
    w_raw_p = sum(min(r[2].wall for r in runs) for runs in raws)
    max_diff = max(check_values(res[0][1], make_samples(*ch), ch[0], r[0][3], ch[1], r[0][4])
                   for ch, r, res in zip(chunks, raws, rms, strict=True))
    assert all(run[1].extra["embeddings"]["computed"] == len(ch[0]) + len(ch[1])
               for ch, runs in zip(chunks, rms, strict=True) for run in runs)
    print(f"no duplicates: raw encode {w_raw:.2f}s ({len(shorts) / w_raw_s:.0f} short/s, "
          f"{len(passages) / w_raw_p:.1f} passages/s); ragmeter {w_rm:.2f}s [CPU {u_raw:.2f}s vs {u_rm:.2f}s]",
          flush=True)

    # 2. 50% duplicates, within each evaluated chunk
    d_chunks = [with_duplicates(*ch, seed=k) for k, ch in enumerate(chunks)]
    raws_d, rms_d = paired(d_chunks, raw, cold(), args.repeats)
    (w_raw_d, u_raw_d), (w_rm_d, u_rm_d) = total(raws_d), total(rms_d)
    assert all(run[1].extra["embeddings"]["computed"] == (len(ch[0]) + len(ch[1])) // 2
               for ch, runs in zip(chunks, rms_d, strict=True) for run in runs)
    print(f"50% duplicates: raw encode {w_raw_d:.2f}s; ragmeter {w_rm_d:.2f}s (embedded {n_texts // 2} of "
          f"{n_texts} texts) [CPU {u_raw_d:.2f}s vs {u_rm_d:.2f}s]", flush=True)

    # 3. warm re-runs on the stores of step 1, paired with raw encodes of the same chunks
    def warm(chunk_and_db):
        c, result = ragmeter_eval(make_samples(*chunk_and_db[0]), chunk_and_db[1])
        assert result.extra["embeddings"]["computed"] == 0
        assert result.extra["embeddings"]["cached"] == len(chunk_and_db[0][0]) + len(chunk_and_db[0][1])
        return c

    warm_in = [(ch, runs[0][2]) for ch, runs in zip(chunks, rms, strict=True)]
    raws_w, warms = paired(warm_in, lambda x: raw(x[0]), warm, args.repeats)
    (w_raw_w, u_raw_w), (w_warm, u_warm) = total(raws_w), total(warms)
    print(f"warm re-runs: raw encode {w_raw_w:.2f}s; ragmeter {w_warm:.3f}s (computed 0, cached {n_texts}) "
          f"[CPU {u_raw_w:.2f}s vs {u_warm:.3f}s]", flush=True)

    out = {
        "n_short": len(shorts), "n_passage": len(passages), "chunks": n_chunks, "repeats": args.repeats,
        "batch_size": bs,
        "torch_threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
        "import_sentence_transformers_s": round(import_s, 3), "load_model_s": round(load_s, 3),
        "raw_short_per_s": round(len(shorts) / w_raw_s, 1), "raw_passage_per_s": round(len(passages) / w_raw_p, 1),
        "raw_texts_per_s": round(n_texts / w_raw, 1), "ragmeter_texts_per_s": round(n_texts / w_rm, 1),
        "overhead": round(w_rm / w_raw - 1, 4),
        "dup_raw_texts_per_s": round(n_texts / w_raw_d, 1), "dup_ragmeter_texts_per_s": round(n_texts / w_rm_d, 1),
        "dup_speedup": round(w_raw_d / w_rm_d, 3),
        "warm_ragmeter_texts_per_s": round(n_texts / w_warm, 1), "warm_speedup": round(w_raw_w / w_warm, 2),
        "cpu_time_ratios": {"overhead": round(u_rm / u_raw - 1, 4), "dup_speedup": round(u_raw_d / u_rm_d, 3),
                            "warm_speedup": round(u_raw_w / u_warm, 2)},
        "max_abs_diff_vs_raw": float(max_diff),
    }

    # 4. ONNX Runtime backends, when installed
    if not args.no_onnx and importlib.util.find_spec("onnxruntime") and importlib.util.find_spec("onnx"):
        for backend in ("onnx", "onnx-int8"):
            key = backend.replace("-", "_")
            t = time.perf_counter()
            onnx_enc = get_encoder(f"{backend}:all-MiniLM-L6-v2")  # exports on first use, cached afterwards
            out[f"{key}_first_load_s"] = round(time.perf_counter() - t, 2)
            onnx_enc.encode(shorts[:64] + passages[:8])
            raws_o, rms_o = paired(chunks, raw, cold({"embedding_backend": backend}), args.repeats)
            (w_raw_o, u_raw_o), (w_o, u_o) = total(raws_o), total(rms_o)
            diff = max(abs(x.value - y.value) for ro, rt in zip(rms_o, rms, strict=True)
                       for k in ("semantic_similarity", "context_similarity")
                       for x, y in zip(ro[0][1].scores[k], rt[0][1].scores[k], strict=True))
            print(f"{backend} backend: raw encode (torch) {w_raw_o:.2f}s; ragmeter with {backend} {w_o:.2f}s "
                  f"[CPU {u_raw_o:.2f}s vs {u_o:.2f}s]", flush=True)
            out.update({f"{key}_texts_per_s": round(n_texts / w_o, 1),
                        f"{key}_speedup_vs_raw_torch": round(w_raw_o / w_o, 3),
                        f"{key}_cpu_speedup_vs_raw_torch": round(u_raw_o / u_o, 3),
                        f"{key}_max_abs_diff": float(diff)})

    out["targets_met"] = {"overhead<=0.10": out["overhead"] <= 0.10, "dup_speedup>=1.8": out["dup_speedup"] >= 1.8,
                          "warm_speedup>=20": out["warm_speedup"] >= 20}
    out["load_avg"] = [round(load_start, 2), round(os.getloadavg()[0], 2)]
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"overhead over raw encode {out['overhead']:+.1%}; 50% duplicates {out['dup_speedup']:.2f}x faster; "
          f"warm re-run {out['warm_speedup']:.1f}x faster")
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    sys.exit(0 if main(sys.argv[1:]) else 1)
