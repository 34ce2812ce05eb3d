"""Judge panels: every judge metric computed by each judge of a panel and combined; the run keeps
each judge's values, Krippendorff's alpha between them (the krippendorff package is the
reference), each judge's agreement with the rest of the panel and its self-preference."""

from __future__ import annotations

import json
import math

import krippendorff  # the reference for alpha (an extra of ragmeter's): missing, this module fails
import numpy as np
import pytest

from judge_server import JudgeServer, _render, verdict
from ragmeter.core.errors import ConfigError
from ragmeter.llm.families import model_family
from ragmeter.stats.panel import agreement_with_panel, combine, paired_difference

KEY_ENV = "RAGMETER_TEST_JUDGE_KEY"


class PanelServer(JudgeServer):
    """The scripted judge, answering per model: ``always-1`` finds every claim supported,
    ``always-0`` none, ``gpt-4o`` supports every claim of an answer that names it (its own) and
    judges the rest honestly; any other model is the honest rule-based judge."""

    async def _scripted(self, wire, body, system, user, named, model):  # noqa: ANN001, ANN202
        if model not in {"always-1", "always-0", "gpt-4o"} or '"ClaimVerdicts"' not in json.dumps(body):
            return await super()._scripted(wire, body, system, user, named, model)
        with self.lock:
            self.requests.append({"wire": wire, "body": body, "model": model})
        data = verdict("ClaimVerdicts", system, user)
        if model == "always-1" or (model == "gpt-4o" and "gpt-4o" in user):
            data = {"claims": [{**c, "verdict": "supported"} for c in data["claims"]] or
                    [{"claim": "x", "reason": "scripted", "verdict": "supported"}]}
        elif model == "always-0":
            data = {"claims": [{**c, "verdict": "not_found"} for c in data["claims"]] or
                    [{"claim": "x", "reason": "scripted", "verdict": "not_found"}]}
        return 200, {}, _render(wire, data, json.dumps(data), system, user, model, body)


@pytest.fixture(scope="module")
def server():
    srv = PanelServer().start()
    yield srv
    srv.stop()


def _samples(n: int = 24) -> list[dict]:
    """Half the answers by gpt-4o, half by claude; every other answer grounded in its context."""
    out = []
    for i in range(n):
        model = "gpt-4o" if i % 2 == 0 else "claude-3-5-haiku"
        grounded = (i // 2) % 2 == 0
        answer = (f"Harbour {i} opens at dawn, says {model}." if grounded else f"Volcano {i} erupts weekly, says {model}.")
        out.append({"id": f"s{i}", "question": f"When does harbour {i} open?", "answer": answer,
                    "contexts": [f"Harbour {i} opens at dawn, says {model}."], "metadata": {"model": model}})
    return out


def _options(server: JudgeServer, *judges: str, **extra) -> dict:
    return {"panel": list(judges), "judge_base_url": server.url + "/v1", "judge_api_key_env": KEY_ENV,
            "judge_backoff_base": 0.01, "judge_backoff_max": 0.05, **extra}


def test_combine_rules():
    assert combine([1.0, 0.0, 0.5], "mean") == 0.5
    assert combine([1.0, 0.0, 0.2], "median") == 0.2
    assert combine([1.0, 0.0, 0.2], "min") == 0.0
    assert combine([1.0, 0.0, 0.6], "majority") == 1.0
    assert combine([1.0, 0.2, 0.4], "majority") == 0.0
    assert combine([1.0, 0.0], "majority") == 0.5  # a split panel: the middle of the range
    assert combine([5.0, 4.0, 1.0], "majority", (1.0, 5.0)) == 5.0
    with pytest.raises(ValueError):
        combine([], "mean")


def test_model_families():
    assert [model_family(m) for m in ("gpt-4o-mini", "o3-mini", "openai:o4-mini", "claude-3-5-haiku",
                                      "gemini-2.0-flash", "ollama:llama3.1:8b", "meta-llama/Llama-3.1-8B",
                                      "mistral-large", "mixtral-8x7b", "my-judge")] == [
        "openai", "openai", "openai", "anthropic", "google", "meta", "meta", "mistral", "mistral", "my-judge"]


def test_agreement_with_panel_is_leave_one_out():
    m = np.array([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 1.0, 0.0]])
    a = agreement_with_panel(m, 2, "mean")  # the rest of the panel says 0.5 everywhere
    assert a == {"n": 4, "mean_abs_diff": 0.5, "pearson": None}
    b = agreement_with_panel(m, 0, "mean")  # vs the mean of judges 1 and 2: 0.5, 0, 0.5, 0
    assert b["mean_abs_diff"] == pytest.approx(0.75) and b["pearson"] is None


def test_paired_difference_interval():
    d = paired_difference(np.array([1.0] * 10), np.array([0.0, 0.5] * 5))
    assert d["n"] == 10 and d["difference"] == pytest.approx(0.75)
    assert 0 < d["ci_low"] <= 0.75 <= d["ci_high"] <= 1.0
    assert paired_difference(np.array([]), np.array([]))["difference"] is None


def test_panel_of_three_scripted_judges(server, tmp_path, monkeypatch):
    from ragmeter import evaluate
    from ragmeter.apps.cli import main

    monkeypatch.setenv(KEY_ENV, "test")
    db = str(tmp_path / "p.db")
    res = evaluate(_samples(), metrics=["faithfulness"], db=db, progress=False,
                   options=_options(server, "openai:always-1", "openai:always-0", "openai:honest"))
    models = {r["model"] for r in server.requests if "model" in r}
    assert {"always-1", "always-0"} <= models
    values = [s.value for s in res.scores["faithfulness"]]
    honest = [s.details["panel"]["values"]["openai:honest"] for s in res.scores["faithfulness"]]
    assert set(honest) == {0.0, 1.0}
    assert values == pytest.approx([(1 + 0 + h) / 3 for h in honest])

    out = []
    monkeypatch.setattr("builtins.print", lambda *a, **k: out.append(" ".join(map(str, a))))
    import typer

    monkeypatch.setattr(typer, "echo", lambda m="", **k: out.append(str(m)))
    main(["show", "--db", db, "--json"])
    shown = json.loads(out[-1])
    panel = shown["panel"]
    assert panel["combine"] == "mean" and [j["label"] for j in panel["judges"]] == [
        "openai:always-1", "openai:always-0", "openai:honest"]
    assert all(j["calls"] == 24 for j in panel["judges"])
    f = panel["metrics"]["faithfulness"]
    assert f["values"]["openai:always-1"] == [1.0] * 24 and f["values"]["openai:always-0"] == [0.0] * 24
    assert f["values"]["openai:honest"] == honest
    assert f["combined"] == pytest.approx(values)
    ref = krippendorff.alpha(reliability_data=np.array([f["values"][k] for k in f["values"]]),
                             level_of_measurement="nominal")
    assert f["level"] == "nominal" and f["alpha"] == pytest.approx(ref, abs=1e-12)
    assert f["alpha"] < 0  # two judges that always disagree
    # the honest judge against the mean of the other two (0.5 everywhere): |h - 0.5| = 0.5
    assert f["agreement"]["openai:honest"]["mean_abs_diff"] == pytest.approx(0.5)
    assert f["agreement"]["openai:always-1"]["mean_abs_diff"] == pytest.approx(1 - np.mean(honest) / 2)
    assert shown["metrics"]["faithfulness"]["mean"] == pytest.approx(np.mean(values))


@pytest.mark.contract
def test_panel_alpha_interval_equals_krippendorff(server, tmp_path, monkeypatch):
    from ragmeter.run.panel_record import metric_figures

    rng = np.random.default_rng(3)
    vals = rng.uniform(size=(3, 30)).round(2)
    vals[1, 4] = np.nan
    rows = [[None if math.isnan(v) else float(v) for v in row] for row in vals]
    rec = metric_figures("m", [str(i) for i in range(30)], ["a", "b", "c"], rows, [0.5] * 30, "mean",
                         (0.0, 1.0), ["a", "b", "c"], [None] * 30)
    assert rec.level == "interval"
    assert rec.alpha == pytest.approx(krippendorff.alpha(reliability_data=vals, level_of_measurement="interval"),
                                      abs=1e-12)
    assert rec.self_preference == {}  # no answer's model in the data


def test_self_preference_of_a_judge_favouring_its_own_family(server, tmp_path, monkeypatch):
    from ragmeter import evaluate

    monkeypatch.setenv(KEY_ENV, "test")
    res = evaluate(_samples(), metrics=["faithfulness"], db=str(tmp_path / "s.db"), progress=False,
                   options=_options(server, "openai:gpt-4o", "openai:claude-3-5-haiku", "openai:llama-3.1"))
    prefs = res.extra["panel"]["metrics"]["faithfulness"]["self_preference"]
    gpt = prefs["openai:gpt-4o"]
    assert gpt["family"] == "openai" and gpt["n"] == 12
    assert gpt["difference"] == pytest.approx(0.5) and gpt["ci_low"] > 0
    assert gpt["other_families"]["difference"] == pytest.approx(0.0)
    claude = prefs["openai:claude-3-5-haiku"]
    assert claude["family"] == "anthropic" and claude["n"] == 12
    assert claude["ci_low"] <= 0 <= claude["ci_high"] or claude["difference"] <= 0
    assert prefs["openai:llama-3.1"]["n"] == 0  # no meta answers in the data


def test_panel_cli_dry_run_and_errors(server, tmp_path, monkeypatch, capsys):
    from ragmeter.apps.cli import main

    monkeypatch.setenv(KEY_ENV, "test")
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(json.dumps(s) for s in _samples(6)) + "\n")
    n = len(server.requests)
    base = ["eval", str(data), "-m", "faithfulness", "--db", str(tmp_path / "c.db"),
            "--judge-base-url", server.url + "/v1", "--judge-api-key-env", KEY_ENV]
    main([*base, "--judge", "openai:always-1", "--judge", "openai:always-0", "--dry-run", "--json"])
    plan = json.loads(capsys.readouterr().out)
    assert plan["planned_calls"] == 12 and set(plan["judges"]) == {"openai:always-1", "openai:always-0"}
    assert len(server.requests) == n  # nothing sent
    panel = tmp_path / "panel.yaml"
    panel.write_text("- openai:always-1\n- {model: openai:always-0, label: zero}\n")
    main([*base, "--panel", str(panel), "--panel-combine", "min", "--no-progress", "--json"])
    run = json.loads(capsys.readouterr().out)
    assert run["metrics"]["faithfulness"]["mean"] == 0.0  # min of always 1 and always 0
    assert [j["label"] for j in run["panel"]["judges"]] == ["openai:always-1", "zero"]
    main(["show", "--db", str(tmp_path / "c.db")])
    text = capsys.readouterr().out
    assert "judge panel" in text and "Krippendorff's alpha (nominal)" in text and "zero" in text
    for bad, msg in ((["--panel-combine", "mode", "--judge", "openai:a", "--judge", "openai:b"], "use one of"),
                     (["--panel-combine", "mean", "--judge", "openai:a"], "needs a panel"),
                     (["--panel", str(panel), "--judge", "openai:a"], "not both")):
        with pytest.raises(SystemExit) as exc:
            main([*base, *bad])
        assert exc.value.code == 2 and msg in capsys.readouterr().err
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps([{"model": "openai:a", "api_key": "sk-abcdefghijklmnopqrstuvwx"}, "openai:b"]))
    with pytest.raises(SystemExit) as exc:
        main([*base, "--panel", str(secret)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "secret" in err and "sk-abc" not in err


def test_a_panel_needs_two_judges_and_the_local_engine():
    from ragmeter.run.panel import members, wrap

    with pytest.raises(ConfigError, match="at least two"):
        members({"panel": ["openai:a"]})
    with pytest.raises(ConfigError, match="provider:model"):
        members({"panel": ["a", "b"]})
    with pytest.raises(ConfigError, match="local engine"):
        wrap([], {"panel": ["openai:a", "openai:b"]}, engine="ray")
    assert [m.label for m in members({"panel": ["openai:a", "openai:a"]})] == ["openai:a", "openai:a#2"]


def test_meta_eval_with_a_panel(server, tmp_path, monkeypatch, capsys):
    from ragmeter.apps.cli import main
    from ragmeter.store import open_store

    monkeypatch.setenv(KEY_ENV, "test")
    data = tmp_path / "labels.jsonl"
    data.write_text("\n".join(json.dumps({**s, "human": i % 2}) for i, s in enumerate(_samples(12))) + "\n")
    db = str(tmp_path / "m.db")
    main(["meta-eval", str(data), "-m", "faithfulness", "--judge", "openai:always-1", "--judge", "openai:honest",
          "--judge-base-url", server.url + "/v1", "--judge-api-key-env", KEY_ENV, "--db", db, "--json",
          "--no-progress", "--panel-combine", "median"])
    rec = json.loads(capsys.readouterr().out)
    run = open_store(db).get_run(rec["run_id"])
    panel = run.extra["panel"]
    assert panel["combine"] == "median" and set(panel["metrics"]["faithfulness"]["values"]) == {
        "openai:always-1", "openai:honest"}
    honest = panel["metrics"]["faithfulness"]["values"]["openai:honest"]
    assert panel["metrics"]["faithfulness"]["combined"] == pytest.approx([(1 + h) / 2 for h in honest])


def test_the_report_shows_the_panel_escaped(server, tmp_path, monkeypatch):
    from ragmeter import evaluate
    from ragmeter.apps.report.render import write_report
    from ragmeter.store import open_store

    monkeypatch.setenv(KEY_ENV, "test")
    db = str(tmp_path / "r.db")
    res = evaluate(_samples(6), metrics=["faithfulness"], db=db, progress=False,
                   options=_options(server, "openai:always-1", {"model": "openai:honest", "label": "<b>x</b>"}))
    html = write_report(open_store(db), [res.run_id], tmp_path / "r.html").read_text()
    assert "Judge panel" in html and "Krippendorff" in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>x</b>" not in html
