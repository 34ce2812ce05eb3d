"""``ragmeter.evaluate`` in several threads at once gives exactly the values of the same runs one
after the other: shared caches (ROUGE's token ids, SQuAD normalisation, BLEU statistics) hand out
consistent results, and the collector pause is undone once, by the last run."""

from __future__ import annotations

import gc
import random
import sys
import threading
import time

import pytest

import ragmeter
from ragmeter.metrics.lexical import rouge_metrics as _lexical_rouge
from ragmeter.metrics.lexical import string_kernels as _lexical_kernels
from ragmeter.metrics.lexical import translation as _lexical_mt

METRICS = ["rouge1_fmeasure", "rougeL_fmeasure"]


def _data(seed: int, n: int = 600) -> list[dict]:
    """Rows over a large vocabulary of made-up words, so each run interns thousands of new tokens."""
    rng = random.Random(seed)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 9)))
             for _ in range(4000)]

    def text() -> str:
        return " ".join(rng.choice(vocab) for _ in range(rng.randint(5, 30)))

    return [{"id": f"r{seed}-{i}", "answer": text(), "reference": text()} for i in range(n)]


def _values(result: ragmeter.EvaluationResult) -> dict[str, list[float | None]]:
    return {m: [s.value for s in result.scores[m]] for m in METRICS}


def _forget_caches() -> None:
    _lexical_rouge._TOKENIZERS.clear()
    _lexical_kernels._NORMALIZED.clear()
    _lexical_kernels._SQUAD_IDS.clear()
    _lexical_mt._BLEU_MEMO.clear()


def _in_threads(data: dict[str, list[dict]], tmp_path, attempt: int) -> dict[str, dict[str, list[float | None]]]:
    """Each dataset evaluated in its own thread, both started at the same moment."""
    start = threading.Barrier(len(data))
    together: dict[str, dict[str, list[float | None]]] = {}
    errors: list[BaseException] = []

    def run(k: str) -> None:
        try:
            start.wait()
            res = ragmeter.evaluate(data[k], METRICS, db=str(tmp_path / f"par-{k}-{attempt}.db"), progress=False)
            together[k] = _values(res)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(k,)) for k in data]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return together


def test_two_threads_give_the_values_of_two_runs_one_after_the_other(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMETER_WORKERS", "1")  # both runs in this process: the shared state is tested
    data = {"a": _data(1), "b": _data(2)}
    sequential = {}
    for k, rows in data.items():
        _forget_caches()
        sequential[k] = _values(ragmeter.evaluate(rows, METRICS, db=str(tmp_path / f"seq-{k}.db"),
                                                  progress=False))
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: races show up at once
    try:
        for attempt in range(3):
            _forget_caches()  # both threads intern the same fresh tokenizer's ids at the same time
            assert _in_threads(data, tmp_path, attempt) == sequential
    finally:
        sys.setswitchinterval(switch)
    assert gc.isenabled()  # the last run to finish let the collector run again


@pytest.mark.slow
def test_threads_with_the_forked_worker_give_the_sequential_values(tmp_path, monkeypatch):
    """Runs large enough for the forked worker (engines/forked.py): one run in the process gets it
    at a time, the other scores alone; the values are those of the runs one after the other."""
    monkeypatch.delenv("RAGMETER_WORKERS", raising=False)
    data = {"a": _data(3, n=5000), "b": _data(4, n=5000)}
    sequential = {}
    for k, rows in data.items():
        sequential[k] = _values(ragmeter.evaluate(rows, METRICS, db=str(tmp_path / f"seq-{k}.db"),
                                                  progress=False))
    _forget_caches()
    assert _in_threads(data, tmp_path, 0) == sequential


class _Yielding(dict):
    """A dict that lets other threads run inside each update, as a free-threaded interpreter (or a
    switch at the wrong instruction) would: a read-then-insert without a lock hands out one id twice."""

    def setdefault(self, key, default=None):
        time.sleep(0)
        return super().setdefault(key, default)

    def __setitem__(self, key, value):
        time.sleep(0)
        super().__setitem__(key, value)


def test_rouge_tokenizer_gives_one_id_per_token_under_threads():
    tok = _lexical_rouge.RougeTokenizer(use_stemmer=False)
    tok._token_ids = _Yielding()
    words = [f"w{i}x" for i in range(3000)]
    start = threading.Barrier(4)

    def intern(ws: list[str]) -> None:
        start.wait()
        for w in ws:
            tok._id(w)

    threads = [threading.Thread(target=intern, args=(words[k::2] + words[k::3],)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = list(tok._token_ids.values())
    assert len(ids) == len(set(ids)) == len(words)  # no two tokens share an id
    assert sorted(ids) == list(range(len(words)))


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="POSIX fork")
def test_a_forked_child_gets_a_free_tokenizer_lock():
    import os

    tok = _lexical_rouge.tokenizer(False)
    with tok._lock:  # another thread holds it at the moment of the fork
        pid = os.fork()
        if pid == 0:
            ok = tok._lock.acquire(timeout=5)
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
