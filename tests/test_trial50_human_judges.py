"""The judge workbench's text and files as a new user meets them: a panel file that is empty or does
not parse (named with its line), and arena/align/meta-eval counts that agree with their nouns."""

from __future__ import annotations

import json

import pytest

from ragmeter.apps.cli import main
from ragmeter.apps.cli._panel import panel_options
from ragmeter.apps.cli.arena import lines
from ragmeter.core.errors import ConfigError


@pytest.mark.parametrize("text", ["[]\n", "judges: []\n"])
def test_an_empty_panel_file_says_so(tmp_path, text):
    # before: an empty panel fell through to "it needs an LLM judge and none is configured"
    p = tmp_path / "panel.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=r"panel.yaml: the panel lists no judges"):
        panel_options(None, p, None)


def test_an_empty_panel_file_on_the_command_line(tmp_path, capsys):
    p = tmp_path / "panel.yaml"
    p.write_text("[]\n")
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "1", "question": "q", "answer": "a", "contexts": ["a"]}\n')
    with pytest.raises(SystemExit) as exc:
        main(["eval", str(data), "-m", "faithfulness", "--panel", str(p), "--db", str(tmp_path / "db.sqlite")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "the panel lists no judges" in err and "none is configured" not in err


@pytest.mark.parametrize("name,text,where", [
    ("panel.yaml", "- openai:gpt-4o-mini\n  - x: [\n", "line 2, column 6"),
    ("panel.json", '["openai:gpt-4o-mini",]', "line 1, column 23"),
])
def test_a_panel_file_that_does_not_parse_names_its_line(tmp_path, name, text, where):
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(ConfigError, match=rf"{name}, {where}: cannot parse the panel"):
        panel_options(None, p, None)


def _pair(wins, ties, losses):
    return {"a": "A", "b": "B", "wins": wins, "ties": ties, "losses": losses, "n_judged": wins + ties + losses,
            "n_not_judged": 0, "win_rate": {"value": 0.5, "ci_low": 0.1, "ci_high": 0.9},
            "position_bias": {"rate": None}}


def test_arena_counts_agree_with_their_nouns():
    rec = {"systems": [{"label": "A"}, {"label": "B"}], "n_items": 2, "metric": "pairwise",
           "pairs": [_pair(1, 1, 1), _pair(2, 0, 0)]}
    text = "\n".join(lines(rec))
    assert "A vs B: 1 win, 1 tie, 1 loss (3 judged)" in text  # before: 1 wins, 1 ties, 1 losses
    assert "A vs B: 2 wins, 0 ties, 0 losses (2 judged)" in text


def test_fit_quality_refuses_labels_outside_label_range(tmp_path, capsys):
    # before: labels outside --label-range were clipped to 0 or 1 and fitted as such, exit 0
    rows = [{"id": f"s{i}", "question": f"q{i}", "answer": f"a{i}", "reference": f"a{i}", "human": 1 + i % 5}
            for i in range(25)]
    data = tmp_path / "labels.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(SystemExit) as exc:
        main(["fit-quality", str(data), "--label", "human", "--label-range", "2,4", "-o", str(tmp_path / "m.json")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "labels.jsonl, line 1, field 'human': label 1 is outside --label-range 2,4 (10 labels outside" in err
    assert not (tmp_path / "m.json").exists()


def test_judge_prices_of_an_unpriced_model_is_incomplete_with_close_names(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["judge-prices", "--model", "openai:gpt-4o-mni"])
    assert exc.value.code == 3  # before: "no price for ..." with exit 0
    out = " ".join(capsys.readouterr().out.split())
    assert "no price for openai:gpt-4o-mni: its cost would be unknown" in out
    assert "Did you mean: gpt-4o-mini," in out and out.count("gpt-4o-mini,") == 1
    with pytest.raises(SystemExit) as exc:
        main(["judge-prices", "--model", "ollama:mystery", "--json"])
    assert exc.value.code == 3
    assert json.loads(capsys.readouterr().out) == {"model": "ollama:mystery", "input": None, "output": None}


def test_a_price_entry_with_an_unknown_key_is_an_error(tmp_path, capsys):
    # before: `cached: 0.075` (or a misspelt key) was ignored without a word
    f = tmp_path / "prices.yaml"
    f.write_text("gpt-x: {input: 1, output: 2, cached: 0.5}\n")
    with pytest.raises(SystemExit) as exc:
        main(["judge-prices", "--prices", str(f), "--model", "openai:gpt-x"])
    assert exc.value.code == 2
    assert "prices.yaml: entry 'gpt-x': unknown key 'cached'" in capsys.readouterr().err


def test_meta_eval_compare_title_says_which_run_is_a(tmp_path, capsys):
    from ragmeter.analysis.meta_eval.records import MetaComparison
    from ragmeter.apps.cli.meta_eval import _print_comparison

    # before: "meta-evaluation B vs A (difference b - a)" over columns a, b: read as a = B
    _print_comparison(MetaComparison("run-old", "run-new", False, 0.95, None))
    out = " ".join(capsys.readouterr().out.split())
    assert "a = run-old (--compare), b = run-new; difference b - a" in out
