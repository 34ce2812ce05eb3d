"""``ragmeter align``: a judge metric tuned to human labels, judged on held-out labels only."""

from __future__ import annotations

import csv
import json
import re

import numpy as np
import pytest

from judge_server import JudgeServer, _render, blocks, verdict, words
from ragmeter.analysis.align import pick_examples, split_items

KEY_ENV = "RAGMETER_TEST_JUDGE_KEY"
_EXAMPLE = re.compile(r"^EXAMPLE (\d+) (.+)$")


def _examples(system: str) -> list[tuple[str, float]]:
    """The few-shot examples a request shows: (answer, human score)."""
    got: dict[int, dict[str, str]] = {}
    for label, body in blocks(system).items():
        m = _EXAMPLE.match(label)
        if m:
            got.setdefault(int(m.group(1)), {})[m.group(2)] = body
    return [(e.get("ANSWER", ""), float(e["HUMAN SCORE"])) for _, e in sorted(got.items()) if "HUMAN SCORE" in e]


class AlignServer(JudgeServer):
    """``copier``: copies the score of the most similar example it is shown (Jaccard similarity of
    the answers' words, at least 0.3), else judges as the rule-based judge; ``ignorer``: always the
    rule-based judge. Both answer a rubric rewrite with a fixed rubric."""

    async def _scripted(self, wire, body, system, user, named, model):  # noqa: ANN001, ANN202
        text = json.dumps(body)
        if model not in {"copier", "ignorer"} or ('"ClaimVerdicts"' not in text and '"RubricRewrite"' not in text):
            return await super()._scripted(wire, body, system, user, named, model)
        with self.lock:
            self.requests.append({"wire": wire, "body": body, "model": model})
        if '"RubricRewrite"' in text:
            data = {"rubric": "Score paraphrases of the contexts as supported. Costs $5."}
            return 200, {}, _render(wire, data, json.dumps(data), system, user, model, body)
        data = verdict("ClaimVerdicts", system, user)
        if model == "copier":
            answer = words(blocks(user).get("ANSWER", ""))
            best = max(((len(answer & words(a)) / max(1, len(answer | words(a))), h) for a, h in _examples(system)),
                       default=(0.0, None))
            if best[0] >= 0.3:
                v = "supported" if best[1] >= 0.5 else "not_found"
                data = {"claims": [{"claim": "c", "reason": "like the example", "verdict": v}]}
        return 200, {}, _render(wire, data, json.dumps(data), system, user, model, body)


@pytest.fixture(scope="module")
def server():
    srv = AlignServer().start()
    yield srv
    srv.stop()


#: four kinds of items, each with its own words: the rule-based judge is wrong on the first two
#: (a paraphrase people call faithful, a copied but misleading answer people do not), right on the rest
KINDS = {
    "paraphrase": ("The ferry {i} leaves early each morning.", "Ferry {i} departs at dawn.", 1),
    "misleading": ("Bridge {i} toll costs nothing on holidays.", "Bridge {i} toll costs nothing on holidays.", 0),
    "grounded": ("Museum {i} opens Tuesdays.", "Museum {i} opens Tuesdays.", 1),
    "invented": ("Volcano {i} erupts weekly.", "Library {i} lends maps.", 0),
}


def _labels(path, n_per_kind: int = 12) -> str:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "question", "answer", "contexts", "human"])
        for kind, (answer, context, human) in KINDS.items():
            for i in range(n_per_kind):
                w.writerow([f"{kind}-{i}", f"What about {kind} {i}?", answer.format(i=i),
                            json.dumps([context.format(i=i)]), human])
    return str(path)


def _run(args: list[str], capsys) -> tuple[int, str, str]:
    from ragmeter.apps.cli import main

    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_split_is_stratified_and_seeded():
    human = np.array([1.0] * 30 + [0.0] * 10)
    t1, h1 = split_items(human, 0.5, 7)
    t2, h2 = split_items(human, 0.5, 7)
    assert (t1, h1) == (t2, h2) and sorted(t1 + h1) == list(range(40))
    assert sum(human[h1] == 1) == 15 and sum(human[h1] == 0) == 5
    assert split_items(human, 0.5, 8) != (t1, h1)


def test_examples_are_disagreements_nearest_the_boundary_first():
    values = [0.9, 0.6, 0.1, 0.45, 1.0, 0.0]
    human = [0.0, 0.0, 1.0, 1.0, 1.0, 0.0]
    chosen, n = pick_examples(values, human, list(range(6)), 3, 0.5)
    assert n == 4  # items 4 and 5 agree with people
    assert chosen == [3, 1, 2]  # |0.45-0.5| first (a people-high item), then the low side's nearest, alternating


def test_align_helps_a_judge_that_copies_its_examples(server, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(KEY_ENV, "test")
    labels = _labels(tmp_path / "labels.csv")
    db = str(tmp_path / "a.db")
    base = ["align", "faithfulness", "--labels", labels, "--judge-base-url", server.url + "/v1",
            "--judge-api-key-env", KEY_ENV, "--db", db, "--seed", "3"]
    code, out, err = _run([*base, "--judge", "openai:copier", "--name", "strict", "--json"], capsys)
    assert code == 0, err
    a = json.loads(out)
    assert a["helped"] is True and a["version"] == 1 and a["default"] == 1
    assert len(a["held_out"]) == 24 and not set(a["held_out"]) & set(a["tuning"])
    assert a["examples"] and all(e["id"] in a["tuning"] for e in a["examples"])
    k = a["changes"]["kendall"]
    assert a["statistic"] == "kendall" and k["after"] > k["before"] and k["ci_low"] > 0
    assert a["changes"]["agreement_rate"]["after"] == 1.0
    assert a["after"]["n"] == 24  # the held-out part only
    # the tuned template is used by name in an ordinary run
    n = len(server.requests)
    code, out, err = _run(["eval", labels, "-m", "faithfulness@strict", "--db", db, "--judge", "openai:copier",
                           "--judge-base-url", server.url + "/v1", "--judge-api-key-env", KEY_ENV, "--json",
                           "--no-progress"], capsys)
    assert code == 0, err
    run = json.loads(out)
    assert "faithfulness@strict" in run["metrics"]
    sent = server.requests[n:]
    assert sent and all("EXAMPLE 1 HUMAN SCORE" in json.dumps(r["body"]) for r in sent)
    # the text report says so
    code, out, err = _run([*base, "--judge", "openai:copier", "--name", "strict", "--no-progress"], capsys)
    assert code == 0 and "the tuning helped" in out and "held-out" in out


def test_align_says_when_the_tuning_did_not_help(server, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(KEY_ENV, "test")
    labels = _labels(tmp_path / "labels.csv")
    db = str(tmp_path / "b.db")
    base = ["align", "faithfulness", "--labels", labels, "--judge", "openai:ignorer", "--judge-base-url",
            server.url + "/v1", "--judge-api-key-env", KEY_ENV, "--db", db, "--name", "loose"]
    code, out, err = _run([*base, "--json"], capsys)
    assert code == 0, err
    a = json.loads(out)
    c = a["changes"][a["statistic"]]
    assert a["helped"] is False and a["version"] == 1 and a["default"] == 0
    assert c["ci_low"] is None or c["ci_low"] <= 0 <= c["ci_high"]
    code, out, err = _run([*base, "--rewrite-rubric"], capsys)
    assert code == 0, err
    assert "the tuning did not help" in out and "own template" in out
    from ragmeter.llm.templates import TemplateBook
    from ragmeter.store import open_store

    rec = TemplateBook(open_store(db)).record("loose")
    assert rec["default"] == 0 and [v["version"] for v in rec["versions"]] == [1, 2]
    assert rec["versions"][1]["rubric"].startswith("Score paraphrases") and "Reply with" in rec["versions"][1]["rubric"]
    # faithfulness@loose keeps the metric's own template: the same requests as plain faithfulness
    from ragmeter.core.context import ScoringContext
    from ragmeter.metrics.registry import resolve

    ctx = ScoringContext({}, store=open_store(db))
    jm = resolve("faithfulness").spec.fn
    s = __import__("ragmeter").load(labels).samples[:1]
    assert jm.requests(s, {"template": "loose"}, ctx)[0].system == jm.requests(s, {}, ctx)[0].system
    assert jm.requests(s, {"template": "loose:2"}, ctx)[0].system != jm.requests(s, {}, ctx)[0].system


def test_align_dry_run_sends_nothing(server, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(KEY_ENV, "test")
    labels = _labels(tmp_path / "labels.csv")
    n = len(server.requests)
    code, out, err = _run(["align", "faithfulness", "--labels", labels, "--judge", "openai:gpt-4o-mini",
                           "--judge-base-url", server.url + "/v1", "--db", str(tmp_path / "c.db"), "--dry-run",
                           "--json", "--rewrite-rubric"], capsys)
    assert code == 0, err
    p = json.loads(out)
    assert p["requests_sent"] == 0 and len(server.requests) == n
    assert p["calls"] == {"before": 48, "cached_before": 0, "rewrite": 1, "after": 24} and p["planned_calls"] == 73
    assert p["est_cost_usd"] > 0
    code, out, err = _run(["align", "faithfulness", "--labels", labels, "--judge", "openai:gpt-4o-mini",
                           "--judge-base-url", server.url + "/v1", "--db", str(tmp_path / "c.db"), "--dry-run"],
                          capsys)
    assert code == 0 and "dry run" in out and "72" in out


@pytest.mark.parametrize("args, says", [
    (["token_f1"], "cannot be aligned"),
    (["faithfulness", "--holdout", "1.5"], "--holdout"),
    (["faithfulness", "--name", "a:b"], "without ':VERSION'"),
    (["faithfulness@x"], "by its name"),
])
def test_align_refuses_bad_input(args, says, server, tmp_path, capsys):
    labels = _labels(tmp_path / "labels.csv", 3)
    code, out, err = _run(["align", *args, "--labels", labels, "--judge", "openai:copier", "--judge-base-url",
                           server.url + "/v1", "--db", str(tmp_path / "d.db")], capsys)
    assert code == 2 and says in err


def test_unknown_template_is_a_clear_error(server, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(KEY_ENV, "test")
    labels = _labels(tmp_path / "labels.csv", 2)
    code, out, err = _run(["eval", labels, "-m", "faithfulness@nosuch", "--db", str(tmp_path / "e.db"),
                           "--judge", "openai:copier", "--judge-base-url", server.url + "/v1",
                           "--judge-api-key-env", KEY_ENV], capsys)
    assert code == 2 and "no tuned judge template 'nosuch'" in err
