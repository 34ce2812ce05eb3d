"""Peak memory of a child process tree, for the benchmarks: the sum of proportional set sizes (PSS:
a page shared by n processes, such as a forked worker and its parent or Ray's processes, counts 1/n
in each), sampled on a thread while the child runs."""

from __future__ import annotations

import subprocess
import threading
import time
from typing import Any

import psutil


def tree_pss(proc: psutil.Process) -> int:
    """Bytes: the PSS of ``proc`` and all its descendants (RSS where PSS cannot be read)."""
    total = 0
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    for p in procs:
        try:
            total += p.memory_full_info().pss
        except (psutil.NoSuchProcess, psutil.AccessDenied, AttributeError):
            try:
                total += p.memory_info().rss
            except psutil.NoSuchProcess:
                pass
    return total


def run_measured(cmd: list[str], every_s: float | None = 0.1, **popen: Any
                 ) -> tuple[subprocess.Popen, str, str, float, int]:
    """Run ``cmd`` to its end: ``(process, stdout, stderr, wall seconds, peak tree PSS in bytes)``;
    ``every_s=None``: no sampling (peak 0), for a timing that the sampler's CPU does not disturb."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
    if every_s is None:
        out, err = proc.communicate()
        return proc, out, err, time.perf_counter() - t0, 0
    ps = psutil.Process(proc.pid)
    peak = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], tree_pss(ps))
            stop.wait(every_s)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    stop.set()
    th.join()
    return proc, out, err, wall, peak[0]
