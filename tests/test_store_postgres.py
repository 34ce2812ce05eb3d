"""The store on a real PostgreSQL server (Debian's packages), started by the test on loopback."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ragmeter
from ragmeter.store import open_store
from references import require_extra

sys.path.insert(0, str(Path(__file__).parent / "plugins"))
import rm_testmetrics  # noqa: E402,F401

pytestmark = pytest.mark.postgres


def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def pg_url(tmp_path_factory):
    bindir = _pg_bin()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries not installed (make test installs Debian's postgresql)")
    require_extra("psycopg")
    as_user: list[str] = []
    if os.geteuid() == 0:  # postgres refuses to run as root
        if shutil.which("runuser") is None:
            pytest.skip("running as root without runuser")
        as_user = ["runuser", "-u", "postgres", "--"]
    base = Path(f"/tmp/ragmeter-pg-{os.getpid()}")
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(mode=0o777)
    data = base / "data"
    if as_user:
        shutil.chown(base, "postgres")
    subprocess.run([*as_user, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"],
                   check=True, capture_output=True)
    port = _free_port()
    proc = subprocess.Popen([*as_user, str(bindir / "postgres"), "-D", str(data), "-p", str(port),
                             "-h", "127.0.0.1", "-k", str(base)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("PostgreSQL did not start")
            time.sleep(0.2)
    time.sleep(0.5)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(base, ignore_errors=True)


def test_runs_on_postgres(pg_url):
    rows = [{"id": f"s{i}", "question": "q", "answer": "ü" * (i % 4), "reference": "üü"} for i in range(12)]
    res = ragmeter.evaluate(rows, ["t_len_ratio", "t_flaky"], db=pg_url, name="pg")
    store = open_store(pg_url)
    run = store.get_run("pg")
    assert run.id == res.run_id and run.status == "completed"
    assert run.summary["t_flaky"]["n_missing"] == 6
    table = store.score_table(res.run_id)
    assert table["t_len_ratio"]["s1"].value == pytest.approx(0.5)
    # resuming a finished run computes nothing and changes nothing
    again = ragmeter.evaluate(None, resume=res.run_id, db=pg_url)
    assert again.summary == res.summary
    assert len(store.scores(res.run_id)) == 24
    store.put_embeddings("m", {"h1": b"\x00" * 8}, 2)
    store.put_embeddings("m", {"h1": b"\x00" * 8, "h2": b"\x01" * 8}, 2)
    assert set(store.get_embeddings("m", ["h1", "h2", "h3"])) == {"h1", "h2"}
