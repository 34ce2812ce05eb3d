"""A spy for Ray workers (``worker_process_setup_hook="ray_spy.install"``): every
``SentenceTransformerEncoder.encode`` / ``OnnxEncoder.encode`` call in a worker appends ``PID N_TEXTS`` to a file in
``$RAGMETER_TEST_SPY_DIR``, so a test sees which processes encoded what."""

from __future__ import annotations

import os


def install() -> None:
    from ragmeter.embed.encoders import SentenceTransformerEncoder
    from ragmeter.embed.onnx import OnnxEncoder  # the default model may run on ONNX Runtime

    for cls in (SentenceTransformerEncoder, OnnxEncoder):
        cls.encode = _spy(cls.encode)  # type: ignore[method-assign]


def _spy(real):  # type: ignore[no-untyped-def]
    def encode(self, texts, *, batch_size=None):  # type: ignore[no-untyped-def]
        texts = list(texts)
        with open(os.path.join(os.environ["RAGMETER_TEST_SPY_DIR"], f"{os.getpid()}.log"), "a") as fh:
            fh.write(f"{os.getpid()} {len(texts)}\n")
        return real(self, texts, batch_size=batch_size)

    return encode


def calls(spy_dir: str) -> list[tuple[int, int]]:
    """``(pid, texts)`` of every encode call the workers made."""
    out = []
    for name in sorted(os.listdir(spy_dir)):
        with open(os.path.join(spy_dir, name)) as fh:
            out += [tuple(int(x) for x in line.split()) for line in fh if line.strip()]
    return out  # type: ignore[return-value]
