"""What a command imports before its real work: a fresh process of ``ragmeter --help``, ``compare``,
``report`` or a lexical run's view loads none of the heavy optional stacks it does not use (checked
through ``sys.modules`` in a subprocess; no timing is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

HEAVY = ("torch", "sentence_transformers", "transformers", "plotly", "fastapi", "uvicorn", "pandas",
         "sklearn", "openai", "tiktoken", "genai_prices", "ragmeter.apps.server")


def _modules_after(code: str, also: tuple[str, ...] = ()) -> set[str]:
    """The heavy modules (of :data:`HEAVY`, the metric families and ``also``) loaded once ``code``
    has run in a fresh interpreter."""
    script = textwrap.dedent(code) + textwrap.dedent(f"""
        import json, sys
        names = {list(HEAVY) + list(also)!r} + ["ragmeter.metrics.judge", "ragmeter.metrics.agent", "ragmeter.metrics.semantic"]
        print(json.dumps([m for m in names if m in sys.modules]))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def _cli(args: list[str]) -> str:
    return f"""
        from ragmeter.apps.cli import main
        try:
            main({args!r})
        except SystemExit:
            pass
    """


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Two stored lexical runs (token_f1) of the same 30 samples, written through the Store API."""
    import numpy as np

    from ragmeter.core.schema import Sample, ScoreColumn
    from ragmeter.stats import aggregate_many
    from ragmeter.store import Store

    db = tmp_path_factory.mktemp("startup") / "s.db"
    store = Store(f"sqlite:///{db}")
    samples = [Sample(id=f"s{i}", question=f"q{i}", answer=f"a{i}", references=[f"r{i}"]) for i in range(30)]
    ids = []
    for shift in (0.0, 0.1):
        rid = store.create_run(dataset_source="t.jsonl", fingerprint="t", samples=samples,
                               metrics=[{"name": "token_f1", "params": {}, "key": "token_f1"}],
                               config={"metrics": ["token_f1"]}, version="t")
        vals = np.clip(np.linspace(0.1, 0.8, 30) + shift, 0, 1)
        store.add_scores(rid, "token_f1", [s.id for s in samples], ScoreColumn(vals))
        summary = aggregate_many({"token_f1": (vals, [None] * 30)}, bounds={"token_f1": (0.0, 1.0)})
        summary["token_f1"].update(direction="higher", family="lexical", range=[0.0, 1.0])
        store.finish_run(rid, status="completed", summary=summary, timings={"total_s": 1.0})
        ids.append(rid)
    store.close()
    return f"sqlite:///{db}", ids


def test_help_and_compare_help_import_no_heavy_stack():
    assert _modules_after(_cli(["--help"])) == set()
    assert _modules_after(_cli(["compare", "--help"])) == set()
    assert _modules_after(_cli(["serve", "--help"])) == set()


def test_compare_of_stored_runs_imports_no_heavy_stack(two_runs):
    url, (a, b) = two_runs
    assert _modules_after(_cli(["compare", a, b, "--db", url])) == set()


def test_a_lexical_runs_view_does_not_import_every_metric_family(two_runs):
    """The report's and the dashboard's view of a lexical run asks whether its metrics get a score
    band: answered from the lexical family's module, not by importing the judge, agent and
    semantic families too; the answer is the one the full registry gives."""
    url, (a, _) = two_runs
    loaded = _modules_after(f"""
        from ragmeter.metrics.registry import banded
        assert banded("token_f1", "lexical") is False
        assert banded("ndcg@10", "retrieval") is False
        from ragmeter.apps.report.paged import cached_run
        from ragmeter.store import Store
        cached_run(Store({url!r}), {a!r})
    """)
    assert not loaded & {"ragmeter.metrics.judge", "ragmeter.metrics.agent", "ragmeter.metrics.semantic"}
    from ragmeter.metrics.registry import all_metrics, banded

    for spec in all_metrics():
        assert banded(spec.name, spec.family) is bool(spec.banded)


def test_banded_of_a_judge_metric_by_its_family_module():
    loaded = _modules_after("""
        from ragmeter.metrics.registry import banded
        assert banded("faithfulness(judge=openai:x)", "judge") is True
        assert banded("no_such_metric", "judge") is True  # unknown here: the family's trait
        assert banded("no_such_metric", "lexical") is False
    """)
    assert "ragmeter.metrics.judge" in loaded


def test_report_and_dashboard_views_build_figures_without_plotlys_classes(two_runs, tmp_path):
    """The report's and the dashboard's figures are written as plain JSON (tests/test_figures_plain.py
    checks them against plotly's validated output): plotly's figure classes are never loaded."""
    url, (a, b) = two_runs
    out = tmp_path / "r.html"
    assert "plotly.graph_objs" not in _modules_after(_cli(["report", a, b, "-o", str(out), "--db", url]),
                                                     also=("plotly.graph_objs",))
    assert out.stat().st_size > 0
    loaded = _modules_after(f"""
        from starlette.testclient import TestClient
        from ragmeter.apps.server import create_app
        client = TestClient(create_app({url!r}), base_url="http://127.0.0.1")
        assert client.get("/runs/{a}").status_code == 200
    """, also=("plotly.graph_objs",))
    assert "fastapi" in loaded and "plotly.graph_objs" not in loaded


def test_serve_listens_before_importing_the_app():
    """``ragmeter serve`` opens its sockets (ragmeter.apps.server.listen) before FastAPI is imported."""
    loaded = _modules_after("""
        from ragmeter.apps.server.listen import listen
        for sock in listen("127.0.0.1", 0):
            assert sock.getsockname()[1] > 0
            sock.close()
    """, also=("ragmeter.apps.server.app",))
    assert not loaded & {"fastapi", "uvicorn", "ragmeter.apps.server.app"}
