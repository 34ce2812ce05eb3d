"""Fuzzing the command line in this process, so the class of bug stays closed: every command (read
from the typer app) given malformed options, garbage files and unknown references answers with the
exit status of docs/exit-codes.md and one or two lines, never a traceback. ``benchmarks/fuzz_cli.py``
runs the whole corpus in subprocesses, as a user would."""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cli_fuzz
from cli_fuzz import USAGE, Case, run_in_process

#: cases that fail while the arguments are parsed, before any work: cheap enough for every run
PARSE_LEVEL = ("help", "unknown option", "nothing given")
PARSE_VALUES = ("not a number", "not a finite number", "overflows to inf", "unknown choice")


@pytest.fixture(scope="module")
def fx(tmp_path_factory):
    return cli_fuzz.make_fixtures(tmp_path_factory.mktemp("fuzz"))


def _check(outcome: cli_fuzz.Outcome) -> None:
    case = outcome.case
    where = f"ragmeter {' '.join(case.argv)[:300]} ({case.why})"
    assert not outcome.traceback, f"{where}\n{outcome.stderr[-2000:]}"
    assert not outcome.wrong_exit, f"{where}: exit {outcome.code}, want {sorted(case.expect)}\n{outcome.stderr[-600:]}"
    if outcome.code == 2:  # said on stderr, as an error, in a few lines
        assert "error" in outcome.stderr.lower() and len(outcome.stderr.strip().splitlines()) <= 6, \
            f"{where}\n{outcome.stderr[-600:]}"


def test_the_corpus_covers_every_command(fx):
    cases = cli_fuzz.cases(fx)
    run = {" ".join(c.argv[:2]) for c in cases} | {c.argv[0] for c in cases}
    assert {" ".join(w) for w, _ in cli_fuzz.commands()} <= run
    # each command gets --help, an unknown option, and a case per file, number, choice or reference it takes
    assert len(cases) > 10 * len(cli_fuzz.commands())


@pytest.mark.parametrize("argv, option", [
    (["golden", "generate", "--corpus", "c", "--n", "2", "--name", "g", "--judge", "openai:m", "--references", "-3"],
     "--references"),
    (["agreement", "r.csv", "--bootstrap", "-1"], "--bootstrap"),
    (["monitor", "check", "--max-p95-ms", "-5"], "--max-p95-ms"),
    (["annotate", "create", "run", "--raters", "a,b", "--strata", "0"], "--strata"),
    (["eval", "example", "--max-cost", "nan"], "--max-cost"),
    (["serve", "--port", "70000"], "--port"),
    (["trend", "token_f1", "--limit", "9" * 40], "--limit"),
])
def test_bad_numbers_are_usage_errors_naming_the_option(argv, option):
    outcome = run_in_process(Case(argv, USAGE, "bad number"))
    assert outcome.code == 2 and not outcome.traceback and option in outcome.stderr, outcome.stderr


@pytest.mark.slow
def test_every_command_rejects_malformed_arguments(fx):
    cases = [c for c in cli_fuzz.cases(fx)
             if c.why in PARSE_LEVEL or (c.expect == USAGE and any(w in c.why for w in PARSE_VALUES))]
    assert len(cases) > 200
    for case in cases:
        _check(run_in_process(case))


@pytest.mark.slow
def test_the_issue_26_probes(fx):
    for case in cli_fuzz.issue_cases(fx):
        _check(run_in_process(case))


@pytest.mark.slow
def test_garbage_files_to_every_file_reader(fx):
    """A rotating sample of the garbage files (every file reader gets three; every garbage file
    reaches several readers); the benchmark gives every reader all of them."""
    cases = [c for c in cli_fuzz.cases(fx) if "garbage file" in c.why]
    by_reader: dict[str, list[Case]] = {}
    for c in cases:
        by_reader.setdefault(f"{c.argv[0]} {c.why.split(':')[0]}", []).append(c)
    chosen = [c for i, group in enumerate(by_reader.values()) for c in group[i % 3::max(1, len(group) // 3)][:3]]
    assert len(chosen) >= 2 * len(by_reader)
    for case in chosen:
        _check(run_in_process(case))


# ---- property: any bytes given to a file reader ---------------------------------------------------
READERS = {
    "monitor import": lambda fx, f: ["monitor", "import", f, "--db", fx.db],
    "annotate import": lambda fx, f: ["annotate", "import", fx.task, f, "--db", fx.db],
    "agreement": lambda fx, f: ["agreement", f],
    "dataset review-import": lambda fx, f: ["dataset", "review-import", "fuzzds", f, "--db", fx.db],
    "eval": lambda fx, f: ["eval", f, "-m", "token_f1", "--db", fx.db, "--no-progress"],
    "judge-prices": lambda fx, f: ["judge-prices", "--prices", f],
}
_json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                       st.text(max_size=20))
_json = st.recursive(_json_leaf, lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(st.sampled_from(["resourceSpans", "scopeSpans", "spans", "question",
                                                        "answer", "id", "item", "label", "review"]), inner,
                                       max_size=4), max_leaves=12)
_content = st.one_of(
    st.binary(max_size=300),
    st.text(alphabet=string.printable + "éü€\x00", max_size=300).map(lambda t: t.encode("utf-8", "replace")),
    _json.map(lambda v: json.dumps(v).encode()),
    st.lists(_json, max_size=4).map(lambda vs: "\n".join(json.dumps(v) for v in vs).encode()),
)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reader=st.sampled_from(sorted(READERS)), content=_content, suffix=st.sampled_from([".json", ".jsonl", ".csv"]))
def test_any_bytes_to_a_file_reader_never_raise(fx, reader, content, suffix):
    path = Path(fx.root) / f"hypothesis{suffix}"
    path.write_bytes(content)
    outcome = run_in_process(Case(READERS[reader](fx, str(path)), frozenset({0, 1, 2, 3}), f"{reader}: random file"))
    assert not outcome.traceback, outcome.stderr[-2000:]
    assert outcome.code in (0, 1, 2, 3)
