"""`ragmeter export RUN --to mlflow` against a local `mlflow server` started by the test."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request

import pandas as pd
import pytest
from typer.testing import CliRunner

from ragmeter.apps.cli import app
from ragmeter.apps.export.mlflow import TAG, metric_name
from ragmeter.run.runner import evaluate
from references import require_extra

mlflow = require_extra("mlflow")  # in CI a stand-in when missing: conftest.py fails the tests
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlflow")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = os.path.join(os.path.dirname(sys.executable), "mlflow")
    proc = subprocess.Popen([exe, "server", "--host", "127.0.0.1", "--port", str(port),
                             "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
                             "--artifacts-destination", str(root / "artifacts"), "--workers", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=root)
    url = f"http://127.0.0.1:{port}"
    for _ in range(240):
        try:
            urllib.request.urlopen(url + "/health", timeout=1)
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail("mlflow server exited")
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("mlflow server did not start")
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def test_export_logs_metrics_params_and_artifacts_idempotently(mlflow_server, db_url, monkeypatch, tmp_path):
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    res = evaluate("example", ["token_f1", "ndcg@5", "exact_match"], db=db_url, name="baseline")
    runner = CliRunner()
    r = runner.invoke(app, ["export", res.run_id, "--to", "mlflow", "--experiment", "nightly", "--db", db_url])
    assert r.exit_code == 0, r.output
    assert "created MLflow run" in r.output
    client = MlflowClient()
    exp = client.get_experiment_by_name("nightly")
    found = client.search_runs([exp.experiment_id], filter_string=f"tags.{TAG} = '{res.run_id}'")
    assert len(found) == 1
    mrun = client.get_run(found[0].info.run_id)
    assert mrun.data.tags[TAG] == res.run_id
    for key, agg in res.summary.items():
        assert mrun.data.metrics[f"{metric_name(key)}.mean"] == pytest.approx(agg["mean"])
        assert mrun.data.metrics[f"{metric_name(key)}.ci_low"] == pytest.approx(agg["ci_low"])
        assert mrun.data.metrics[f"{metric_name(key)}.ci_high"] == pytest.approx(agg["ci_high"])
    assert "ndcg_at_5.mean" in mrun.data.metrics
    assert mrun.data.params["n_samples"] == str(len(res.samples))
    names = {a.path for a in client.list_artifacts(mrun.info.run_id)}
    assert {"samples.parquet", "report.html"} <= names
    local = client.download_artifacts(mrun.info.run_id, "samples.parquet", str(tmp_path))
    df = pd.read_parquet(local)
    assert list(df["id"]) == [s.id for s in res.samples]
    assert df["token_f1"].tolist() == pytest.approx([sc.value for sc in res.scores["token_f1"]])
    html = client.download_artifacts(mrun.info.run_id, "report.html", str(tmp_path))
    assert res.run_id in open(html, encoding="utf-8").read()

    # the second export updates the same MLflow run
    r = runner.invoke(app, ["export", res.run_id, "--to", "mlflow", "--experiment", "nightly", "--db", db_url])
    assert r.exit_code == 0, r.output
    assert "updated MLflow run " + mrun.info.run_id in r.output
    again = client.search_runs([exp.experiment_id], filter_string=f"tags.{TAG} = '{res.run_id}'")
    assert [x.info.run_id for x in again] == [mrun.info.run_id]
