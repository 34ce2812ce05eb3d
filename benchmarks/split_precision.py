"""Can this CPU's bfloat16 / int8 matrix units give float32 embeddings faster? A study.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/split_precision.py [--texts 1000]

The embedding target (``benchmarks/embeddings.py``: 1.5x sentence-transformers with values within
1e-6) needs more matrix-product speed than float32 gives on 2 cores (the headline's ``roofline``).
This CPU has AMX tiles (``amx_bf16``, ``amx_int8``), whose bfloat16 products are about ten times
float32's. bfloat16 keeps 8 bits of mantissa, so a product in it is off by about 1e-2; the known way
to get float32 accuracy back (Henry et al., "Leveraging the bfloat16 Artificial Intelligence
Datatype For Higher-Precision Computations", ARITH 2019) splits each float32 operand into bfloat16
parts, ``a = a1 + a2 + a3``, and sums the products of the parts: ``bf16x3`` keeps
a1·b1 + a1·b2 + a2·b1, ``bf16x6`` adds a1·b3 + a2·b2 + a3·b1. The parts of one level are laid side
by side along the inner dimension, so each mode is one product of a 3x (6x) wider matrix, with
float32 accumulation and output (oneDNN's ``fpmath_mode=bf16``, which PyTorch exposes as
``torch.backends.mkldnn.matmul.fp32_precision = "bf16"``; the parts are exact in bfloat16, so its
conversion loses nothing). The int8 units are measured with ``torch._int_mm`` (int8 x int8 ->
int32, exact), the base of the Ozaki scheme.

Two parts:

1. **One product** of the encoder's feed-forward shape (4096 tokens x 384 @ 384 x 1536): the
   speed of each mode in float32-equivalent GFLOP/s (2·M·K·N over the wall time, splitting of the
   activations included, the weights split once) and its largest error relative to the float64
   product's largest entry.
2. **The encoder end to end** (all-MiniLM-L6-v2 through sentence-transformers, every
   ``nn.Linear`` computed in the mode): the time to encode ``--texts`` answer/reference pairs (the
   embeddings benchmark's data) against plain float32, and the largest difference of the pairs'
   cosines from float32's.

The last line printed is one JSON object: per mode ``gemm_gflops``, ``gemm_rel_err``,
``encode_s``, ``speedup_vs_float32`` and ``max_cos_diff``, and ``best_within_1e-6``: the fastest
mode whose cosines stay within 1e-6 of float32 and its speed-up.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

MODES = ("float32", "bf16", "bf16x3", "bf16x6")
# (part of a, part of b) kept by each split mode, by level
PAIRS = {"bf16": [(0, 0)], "bf16x3": [(0, 0), (0, 1), (1, 0)],
         "bf16x6": [(0, 0), (0, 1), (1, 0), (0, 2), (1, 1), (2, 0)]}


def split(x, parts: int = 3) -> list:
    """``x`` as ``parts`` float32 tensors, each exactly representable in bfloat16, summing to ``x``
    up to the last part's rounding."""
    import torch

    out, rest = [], x
    for _ in range(parts):
        head = rest.to(torch.bfloat16).to(torch.float32)
        out.append(head)
        rest = rest - head
    return out


class SplitLinear:
    """``y = x @ W.T + b`` with the products of ``mode``'s bfloat16 parts (weights split once)."""

    def __init__(self, weight, bias, mode: str) -> None:
        import torch

        self.pairs = PAIRS[mode]
        self.parts = 1 + max(i for i, _ in self.pairs)
        w = split(weight.detach().t().contiguous(), 1 + max(j for _, j in self.pairs))  # K x N
        self.w = torch.cat([w[j] for _, j in self.pairs], 0).contiguous()
        self.bias = None if bias is None else bias.detach()

    def __call__(self, x):
        import torch

        shape = x.shape
        a = split(x.reshape(-1, shape[-1]), self.parts)
        wide = a[0] if len(self.pairs) == 1 else torch.cat([a[i] for i, _ in self.pairs], 1)
        mk = torch.backends.mkldnn.matmul
        mk.fp32_precision = "bf16"  # only this product: attention's products stay float32
        try:
            y = wide @ self.w
        finally:
            mk.fp32_precision = "ieee"
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*shape[:-1], y.shape[-1])


def timed(fn, reps: int) -> float:
    fn()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def gemm_study(reps: int = 10) -> dict:
    import torch

    m, k, n = 4096, 384, 1536
    gen = torch.Generator().manual_seed(45)
    a = torch.randn(m, k, generator=gen)
    b = torch.randn(k, n, generator=gen) * 0.05
    exact = a.double() @ b.double()
    scale = float(exact.abs().max())
    flop = 2 * m * k * n
    out: dict = {"shape": f"{m}x{k} @ {k}x{n}"}
    mk = torch.backends.mkldnn.matmul
    try:
        mk.fp32_precision = "ieee"
        sec = timed(lambda: a @ b, reps)
        out["float32"] = {"gemm_gflops": round(flop / sec / 1e9, 1),
                          "gemm_rel_err": float((a @ b).double().sub(exact).abs().max()) / scale}
        ab, bb = a.to(torch.bfloat16), b.to(torch.bfloat16)
        sec = timed(lambda: ab @ bb, reps)
        out["bf16_native_bf16_output"] = {
            "gemm_gflops": round(flop / sec / 1e9, 1),
            "gemm_rel_err": float((ab @ bb).double().sub(exact).abs().max()) / scale,
            "note": "bfloat16 in and out: the peak of the AMX tiles, not usable for float32 results"}
        for mode in ("bf16", "bf16x3", "bf16x6"):
            lin = SplitLinear(b.t(), None, mode)
            sec = timed(lambda lin=lin: lin(a), reps)
            out[mode] = {"gemm_gflops": round(flop / sec / 1e9, 1),
                         "gemm_rel_err": float(lin(a).double().sub(exact).abs().max()) / scale}
        ia = torch.randint(-127, 128, (m, k * 6), dtype=torch.int8, generator=gen)
        ib = torch.randint(-127, 128, (k * 6, n), dtype=torch.int8, generator=gen)
        sec = timed(lambda: torch._int_mm(ia, ib), reps)
        out["int8_int_mm"] = {"gemm_gops": round(6 * flop / sec / 1e9, 1),
                              "float32_equivalent_gflops_ozaki_6_products": round(flop / sec / 1e9, 1),
                              "note": "int8 x int8 -> int32, inner dimension x6 (six slice products), "
                                      "slicing not counted"}
    finally:
        mk.fp32_precision = "ieee"
    return out


def encode_study(n_texts: int, reps: int) -> dict:
    import torch
    from embeddings import make_pairs
    from sentence_transformers import SentenceTransformer

    from ragmeter.embed import bundled_model_path

    torch.set_num_threads(os.cpu_count() or 1)
    st = SentenceTransformer(str(bundled_model_path()), device="cpu")
    samples = make_pairs(n_texts)
    texts = [s["answer"] for s in samples] + [s["reference"] for s in samples]
    linears = [m for m in st.modules() if isinstance(m, torch.nn.Linear)]
    original = {id(m): m.forward for m in linears}

    def encode() -> np.ndarray:
        return st.encode(texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)

    def cosines(x: np.ndarray) -> np.ndarray:
        return (x[:n_texts] * x[n_texts:]).sum(axis=1)

    results: dict = {}
    base = None
    for mode in MODES:
        for m in linears:
            m.forward = original[id(m)] if mode == "float32" else SplitLinear(m.weight, m.bias, mode)
        with torch.inference_mode():
            sec = timed(encode, reps)
            cos = cosines(encode())
        if base is None:
            base = (sec, cos)
        results[mode] = {"encode_s": round(sec, 3), "speedup_vs_float32": round(base[0] / sec, 3),
                         "max_cos_diff": float(np.abs(cos - base[1]).max())}
        print(f"{mode:8s} encode {sec:.2f}s ({base[0] / sec:.2f}x float32), max |cos diff| "
              f"{results[mode]['max_cos_diff']:.2e} (load average {os.getloadavg()[0]:.2f})", flush=True)
    for m in linears:
        m.forward = original[id(m)]
    return results


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=1000, help="answer/reference pairs encoded (2 texts each)")
    ap.add_argument("--reps", type=int, default=2, help="timed encodes per mode (best counts)")
    args = ap.parse_args(argv)
    import torch

    flags = Path("/proc/cpuinfo").read_text().split() if Path("/proc/cpuinfo").exists() else []
    out: dict = {"cpu_count": os.cpu_count(), "torch": torch.__version__,
                 "amx_bf16": "amx_bf16" in flags, "amx_int8": "amx_int8" in flags,
                 "load_avg_start": round(os.getloadavg()[0], 2)}
    torch.set_num_threads(os.cpu_count() or 1)
    gemm = gemm_study()
    out["gemm"] = gemm
    for name, row in gemm.items():
        if isinstance(row, dict):
            speed = row.get("gemm_gflops", row.get("gemm_gops"))
            print(f"GEMM {gemm['shape']} {name:26s} {speed:8.1f} G/s  rel err "
                  f"{row.get('gemm_rel_err', 0.0):.1e}", flush=True)
    out["encode"] = encode_study(args.texts, args.reps)
    ok = {m: r for m, r in out["encode"].items() if r["max_cos_diff"] <= 1e-6}
    best = max(ok, key=lambda m: ok[m]["speedup_vs_float32"])
    out["best_within_1e-6"] = {"mode": best, "speedup_vs_float32": ok[best]["speedup_vs_float32"]}
    out["load_avg_end"] = round(os.getloadavg()[0], 2)
    print(f"fastest mode within 1e-6 of float32's cosines: {best} "
          f"({ok[best]['speedup_vs_float32']:.2f}x float32)", flush=True)
    print(json.dumps(out), flush=True)
    return out


if __name__ == "__main__":
    main()
