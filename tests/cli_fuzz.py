"""Bad arguments and garbage files for every ``ragmeter`` command (the commands are read from the
typer app, so a new command is covered without listing it here). Used by
``benchmarks/fuzz_cli.py`` (each case in a subprocess) and ``tests/test_cli_fuzz.py`` (in this
process).

A case passes when the command prints no traceback and exits with the status docs/exit-codes.md
gives it: 2 for a usage or input error (a malformed value, a garbage file, an unknown run), 0 for
``--help``; cases whose input is valid but odd only need some documented status (0-3).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DOCUMENTED = frozenset({0, 1, 2, 3})
USAGE = frozenset({2})
EMPTY = frozenset({2, 3})  # an empty input: a usage error, or "nothing to do" (incomplete)
UNREACHABLE_JUDGE = "http://127.0.0.1:9/v1"  # port 9 (discard): refused at once


@dataclass
class Case:
    """One call of the command line and the statuses it may exit with."""

    argv: list[str]
    expect: frozenset[int]
    why: str
    timeout: float = 120.0


@dataclass
class Outcome:
    case: Case
    code: int | None  # None: timed out
    stderr: str
    traceback: bool = field(init=False)
    wrong_exit: bool = field(init=False)

    def __post_init__(self) -> None:
        self.traceback = "Traceback (most recent call last)" in self.stderr
        self.wrong_exit = self.code not in self.case.expect


# ---- fixtures ---------------------------------------------------------------------------------
def _otlp(trace: str, root_only: bool = True) -> dict[str, Any]:
    span = {"traceId": trace, "spanId": "00f067aa0ba902b7", "name": "rag",
            "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000250000000",
            "attributes": [{"key": "input.value", "value": {"stringValue": "When does it open?"}},
                           {"key": "output.value", "value": {"stringValue": "At nine."}}]}
    return {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": [span]}]}]}


GARBAGE_OTLP: dict[str, Any] = {
    # the shapes the issue found: each parsed as JSON, then taken apart as OTLP
    "otlp_rs_number.json": {"resourceSpans": 5},
    "otlp_rs_strings.json": {"resourceSpans": ["x", "y"]},
    "otlp_scope_number.json": {"resourceSpans": [{"scopeSpans": 7}]},
    "otlp_spans_string.json": {"resourceSpans": [{"scopeSpans": [{"spans": "abc"}]}]},
    "otlp_span_number.json": {"resourceSpans": [{"scopeSpans": [{"spans": [3]}]}]},
    "otlp_bad_time.json": {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "00f067aa0ba902b7",
         "startTimeUnixNano": "soon", "endTimeUnixNano": "later"}]}]}]},
    "otlp_huge_time.json": {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "00f067aa0ba902b7",
         "startTimeUnixNano": "9" * 40, "endTimeUnixNano": "9" * 41}]}]}]},
    "otlp_attr_list.json": {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "00f067aa0ba902b7",
         "startTimeUnixNano": "1", "endTimeUnixNano": "2", "attributes": {"a": 1}}]}]}]},
    "otlp_attr_values.json": {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "00f067aa0ba902b7",
         "startTimeUnixNano": "1", "endTimeUnixNano": "2",
         "attributes": [{"key": "gen_ai.usage.input_tokens", "value": {"intValue": "many"}},
                        {"key": "x", "value": "plain"}, 5]}]}]}]},
    "otlp_tokens_text.json": {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "00f067aa0ba902b7",
         "startTimeUnixNano": "1", "endTimeUnixNano": "2",
         "attributes": [{"key": "gen_ai.usage.input_tokens", "value": {"stringValue": "lots"}},
                        {"key": "ragmeter.cost_usd", "value": {"stringValue": "cheap"}},
                        {"key": "ragmeter.contexts", "value": {"stringValue": "{not json"}}]}]}]}]},
    "otlp_no_trace_id.json": {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"spanId": "00f067aa0ba902b7", "startTimeUnixNano": "1", "endTimeUnixNano": "2"}]}]}]},
    "console_bad_time.json": {"context": {"trace_id": "0x1", "span_id": "0x2"}, "start_time": "yesterday",
                              "end_time": 5},
    "console_context_list.json": {"context": [1], "start_time": "2024-01-01T00:00:00Z",
                                  "end_time": "2024-01-01T00:00:01Z"},
}


#: the OTLP shapes every file reader gets (valid JSON of a shape no reader takes)
OTLP_FOR_ALL = {"otlp_rs_number.json", "console_context_list.json"}
#: shapes only the strict OTLP decoder (``ragmeter.monitor.otlp``, the HTTP receiver's validation
#: layer) refuses; the lenient one it replaces reads them as spans without attributes
NEEDS_STRICT_OTLP = {"otlp_attr_list.json"}


def _strict_otlp() -> bool:
    import importlib.util

    return importlib.util.find_spec("ragmeter.monitor.otlp") is not None


@dataclass
class Fixtures:
    """A store with two runs, monitor calls, a task, a corpus and a dataset, plus garbage files."""

    root: Path
    db: str
    task: str = ""
    files: dict[str, Path] = field(default_factory=dict)

    @property
    def garbage(self) -> dict[str, Path]:
        return {k: v for k, v in self.files.items() if k.startswith("bad:")}


def make_fixtures(root: Path) -> Fixtures:
    """Write the files and fill the store through the library (not counted as fuzz runs)."""
    import ragmeter
    from ragmeter.golden.corpus import add_documents
    from ragmeter.human.tasks import create_task, parse_scales
    from ragmeter.io.readers import example_path
    from ragmeter.monitor.calls import insert_calls, normalise_call
    from ragmeter.store import open_store

    root.mkdir(parents=True, exist_ok=True)
    db = str(root / "fuzz.db")
    fx = Fixtures(root=root, db=db)
    example = example_path()
    ragmeter.evaluate(str(example), ["token_f1", "exact_match"], db=db, name="base", progress=False)
    ragmeter.evaluate(str(example), ["token_f1", "exact_match"], db=db, name="cand", progress=False)
    store = open_store(db)
    from datetime import UTC, datetime, timedelta

    now = datetime.now(UTC)
    insert_calls(store, [normalise_call({"call_id": f"c{i}", "query": "q?", "answer": "a.",
                                         "latency_ms": 100 + i, "timestamp": now - timedelta(minutes=i)})
                         for i in range(20)])
    fx.task, _ = create_task(store, "base", raters=["ann", "bob"], scales=parse_scales("overall"), n=4,
                             rubric=None, stratify=None, strata=4, seed=0, name="fuzz-task")
    add_documents(store, "fuzzcorpus", [example.parent / "corpus"])
    from ragmeter.golden.datasets import save_dataset

    save_dataset(store, "fuzzds", [s.model_dump(mode="json", exclude_none=True)
                                   for s in ragmeter.load(str(example)).samples[:6]])

    f = fx.files
    f["example"] = example
    small = root / "small.jsonl"  # a few rows: commands that run a pipeline stay quick
    small.write_text("".join(json.dumps(s.model_dump(mode="json", exclude_none=True)) + "\n"
                             for s in ragmeter.load(str(example)).samples[:5]))
    f["small"] = small
    f["corpus_dir"] = example.parent / "corpus"
    valid = root / "valid_otlp.json"
    valid.write_text(json.dumps(_otlp("4bf92f3577b34da6a3ce929d0e0e4736")))
    f["valid_otlp"] = valid
    ratings = root / "ratings.csv"
    ratings.write_text("item,rater,label\n1,a,1\n1,b,1\n2,a,0\n2,b,1\n3,a,1\n3,b,1\n")
    f["ratings"] = ratings
    qrels = root / "qrels.txt"
    qrels.write_text("q1 0 d1 1\nq1 0 d2 0\n")
    f["qrels"] = qrels
    run = root / "run.txt"
    run.write_text("q1 Q0 d1 1 2.0 r\nq1 Q0 d2 2 1.0 r\n")
    f["trec_run"] = run
    suite = root / "suite.yaml"
    suite.write_text(f"dataset: {small}\nmetrics: [token_f1]\n")
    f["suite"] = suite
    grid = root / "grid.yaml"
    grid.write_text(f"dataset: {small}\nmetrics: [token_f1]\ngrid:\n  top_k: [1]\n")
    f["grid"] = grid

    def bad(name: str, data: bytes | str) -> None:
        p = root / "bad" / name
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
        f[f"bad:{name}"] = p

    bad("empty.jsonl", b"")
    bad("empty.csv", b"")
    bad("header_only.csv", b"question,answer\n")
    bad("binary.csv", bytes(range(256)) * 8)
    bad("nul.csv", b"item,rater,label\n1,a,\x00\x00\n")
    bad("latin1.csv", "item,rater,label\nçé,a,1\n".encode("latin-1"))
    bad("binary.jsonl", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(200))
    bad("truncated.jsonl", b'{"question": "a", "answer": ')
    bad("list_of_numbers.json", b"[1, 2, 3]")
    bad("number.json", b"42")
    bad("deep.json", b"[" * 100_000 + b"]" * 100_000)
    bad("surrogate.jsonl", '{"question": "\\ud800", "answer": "\\udfff x"}\n')
    bad("huge_int.jsonl", '{"question": "q", "answer": "a", "score": ' + "9" * 5000 + "}\n")
    bad("garbage.yaml", b"metrics: [token_f1\n  - : : {\n")
    bad("yaml_list.yaml", b"- 1\n- 2\n")
    bad("text.txt", b"this is not the format you are looking for\n")
    for name, obj in GARBAGE_OTLP.items():
        if name not in NEEDS_STRICT_OTLP or _strict_otlp():
            bad(name, json.dumps(obj))
    d = root / "bad" / "a_directory"
    d.mkdir(exist_ok=True)
    f["bad:a_directory"] = d
    f["bad:missing"] = root / "bad" / "no_such_file.jsonl"
    return fx


# ---- which values go where ---------------------------------------------------------------------
#: options that keep a command's valid call quick (no embedding model to load)
FAST = {"correctness": ["--method", "keyword"], "pipeline": ["--method", "keyword"]}
FAST_KEYS = {"correctness": ("method",), "pipeline": ("method",)}
#: parameters (by their Python name) that name a file ragmeter reads and parses
FILE_INPUTS = {"data", "file", "files", "config", "examples", "prices", "suite_file", "qrels", "sheet"}
#: parameters that name free text (any UTF-8 text is valid) or documents
TEXT_INPUTS = {"rubric", "paths"}
TEXT_PARAMS = {("annotate rubric", "file")}
NOT_TEXT = ("bad:binary.csv", "bad:latin1.csv", "bad:binary.jsonl", "bad:a_directory", "bad:missing")
#: parameters that name a file or folder ragmeter writes
FILE_OUTPUTS = {"output", "out", "junit", "markdown", "write"}
#: parameters that name something stored (a run, task, dataset ...)
REFERENCES = {"run", "runs", "task", "ref", "a", "b", "baseline", "corpus", "against"}
DURATIONS = {"window", "since", "older_than"}
#: options whose value must come from a short list
CHOICES = {"on_error", "format", "engine", "method", "how", "level", "correction", "bucket", "missing",
           "chunker", "complexity", "style", "to", "weights", "pass_rule", "score_range", "confidence",
           "types", "family", "preset", "measure", "batch_fallback"}
#: repeatable KEY=VALUE options
KEY_VALUES = {"option", "map", "set", "param", "where", "threshold", "min_metric", "value"}


def _walk(cmd: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
    if hasattr(cmd, "commands"):
        if path and any(p.name != "help" for p in cmd.params):  # a group that runs on its own (runs)
            yield path, cmd
        for name, sub in sorted(cmd.commands.items()):
            yield from _walk(sub, [*path, name])
    else:
        yield path, cmd


def commands() -> list[tuple[list[str], Any]]:
    """Every leaf command of the ``ragmeter`` app: (words, click command)."""
    import typer

    from ragmeter.apps.cli import app

    return list(_walk(typer.main.get_command(app), []))


def _annotation(p: Any) -> Any:
    return p.type_descriptor.annotation


def _scalar(p: Any) -> type | None:
    """int, float, str, Path or bool of a parameter (list[X] -> X)."""
    from typing import get_args, get_origin

    a = _annotation(p)
    if get_origin(a) is list:
        a = get_args(a)[0]
    args = [x for x in get_args(a) if x is not type(None)]  # X | None
    if args:
        a = args[0]
    return a if isinstance(a, type) else None


def _is_flag(p: Any) -> bool:
    return getattr(p, "is_flag", False)


def _good_value(words: list[str], p: Any, fx: Fixtures) -> list[str]:
    """A valid value for a required parameter, so a case changes one thing at a time."""
    name = p.name
    cmd = " ".join(words)
    f = fx.files
    table: dict[str, list[str]] = {
        "run": ["base"], "runs": ["base", "cand"], "task": [fx.task], "ref": ["fuzzds"],
        "a": ["fuzzds"], "b": ["fuzzds"], "baseline": ["base"], "corpus": ["fuzzcorpus"],
        "data": [str(f["small"])], "file": [str(f["ratings"])], "files": [str(f["valid_otlp"])],
        "config": [str(f["grid"])], "suite_file": [str(f["suite"])], "qrels": [str(f["qrels"])],
        "paths": [str(f["corpus_dir"])], "sheet": [str(fx.root / "review.csv")],
        "output": [str(fx.root / "out" / "o.jsonl")], "write": [str(fx.root / "out" / "example")],
        "raters": ["ann,bob"], "metric": ["token_f1"], "metrics": ["token_f1"], "drop": ["0.05"],
        "n": ["2"], "judge": ["openai:gpt-4o-mini"], "older_than": ["3650d"], "name": ["fuzzname"],
        "tag": ["t1"], "tags": ["t1"],
    }
    if cmd == "trec" and name == "run":
        return [str(f["trec_run"])]
    if cmd in {"dataset finalise", "dataset review-export", "dataset review-import"} and name == "name":
        return ["fuzzds"]
    if cmd == "annotate add-rater" and name == "name":
        return ["carol"]
    return table.get(name, ["x"])


def _with(words: list[str], params: list[Any], fx: Fixtures, replace: dict[str, list[str]]) -> list[str]:
    """argv for ``words`` with every required parameter given (``replace`` overrides by name)."""
    pos: list[str] = []
    opts: list[str] = []
    for p in params:
        if p.name == "help":
            continue
        given = p.name in replace
        if not (p.required or given):
            continue
        values = replace[p.name] if given else _good_value(words, p, fx)
        if p.param_type_name == "argument":
            pos.extend(values)
        elif _is_flag(p):
            opts.append(p.opts[0])
        else:
            for v in values:
                opts += [p.opts[0], v]
    names = {p.name for p in params}
    fast = FAST.get(" ".join(words), [])
    if not any(f in replace for f in FAST_KEYS.get(" ".join(words), ())):
        opts += fast
    extra = ["--db", fx.db] if "db" in names and "db" not in replace else []
    if "judge_base_url" in names and "judge_base_url" not in replace:  # never the real provider
        extra += ["--judge-base-url", UNREACHABLE_JUDGE]
    return [*words, *pos, *opts, *extra]


def _numeric_bad(kind: type) -> list[tuple[str, frozenset[int], str]]:
    out = [("abc", USAGE, "not a number"), ("-3", DOCUMENTED, "negative")]
    if kind is float:
        out += [("nan", USAGE, "not a finite number"), ("1e400", USAGE, "overflows to inf")]
    else:
        out += [("9" * 30, DOCUMENTED, "30-digit integer")]
    return out


def cases(fx: Fixtures) -> list[Case]:
    """Every case: generic ones per command and parameter, then the issue's own probes."""
    out: list[Case] = []
    garbage = fx.garbage
    for words, cmd in commands():
        params = [p for p in cmd.params if p.name != "help"]
        cmd_name = " ".join(words)
        out.append(Case([*words, "--help"], frozenset({0}), "help"))
        out.append(Case(_with(words, params, fx, {}) + ["--no-such-option"], USAGE, "unknown option"))
        if any(p.required for p in params):
            out.append(Case([*words], USAGE, "nothing given"))
        if cmd_name == "serve":  # a valid call would serve forever: only invalid ones
            for v, why in (("-1", "negative port"), ("70000", "port above 65535"), ("abc", "not a number")):
                out.append(Case(["serve", "--port", v, "--db", fx.db], USAGE, why, timeout=30))
            out.append(Case(["serve", "--host", "no such host!", "--port", "0", "--db", fx.db], USAGE,
                            "unresolvable host", timeout=30))
            continue
        for p in params:
            kind = _scalar(p)
            name = p.name
            if name == "db":
                missing = fx.root / "bad" / "none" / f"{len(out)}" / "x.db"  # a command may create it
                out.append(Case(_with(words, params, fx, {"db": [str(missing)]}),
                                DOCUMENTED if not _reads_store(cmd_name) else USAGE,
                                "store in a missing folder"))
                continue
            if _is_flag(p) or kind is bool:
                continue
            if name in FILE_INPUTS or name in TEXT_INPUTS:
                for label, path in garbage.items():
                    if (name in TEXT_INPUTS or (cmd_name, name) in TEXT_PARAMS) and label not in NOT_TEXT:
                        continue
                    if label[4:] in GARBAGE_OTLP and label[4:] not in OTLP_FOR_ALL and cmd_name != "monitor import":
                        continue  # wrong OTLP shapes: for the OTLP reader (two stand for all others)
                    expect = EMPTY if any(w in label for w in ("empty", "header_only", "nul.")) else USAGE
                    out.append(Case(_with(words, params, fx, {name: [str(path)]}), expect,
                                    f"{name}: garbage file {label[4:]}"))
            elif name in FILE_OUTPUTS:
                for path, why in ((fx.root / "bad" / "a_directory", "a directory"),
                                  (fx.root / "bad" / "empty.csv" / "x", "below a file")):
                    if name == "write" and why == "a directory":
                        continue  # --write names a folder
                    out.append(Case(_with(words, params, fx, {name: [str(path)]}), USAGE, f"{name}: {why}"))
            elif name in REFERENCES and kind is str:
                for v in ("no-such-thing", "x@²", "x@-1", "~" * 3000):
                    out.append(Case(_with(words, params, fx, {name: [v]}), USAGE, f"{name}: unknown {v[:10]!r}"))
            elif name in DURATIONS:
                for v in ("1000000d", "99999999999999999999d", "-1d", "abc", "0d", "1.5.5h"):
                    out.append(Case(_with(words, params, fx, {name: [v]}), USAGE, f"{name}: duration {v}"))
            elif name in CHOICES and kind is str:
                out.append(Case(_with(words, params, fx, {name: ["bogus"]}), USAGE, f"{name}: unknown choice"))
            elif name in KEY_VALUES:
                for v in ("noequals", "=", "=x"):
                    out.append(Case(_with(words, params, fx, {name: [v]}), USAGE, f"{name}: {v!r}"))
            elif kind in (int, float):
                for v, expect, why in _numeric_bad(kind):
                    out.append(Case(_with(words, params, fx, {name: [v]}), expect, f"{name}: {why}"))
    out += issue_cases(fx)
    return out


def _reads_store(cmd: str) -> bool:
    """Commands that only read the store must not create one (a mistyped --db is an error)."""
    return cmd.split()[0] in {"show", "export", "compare", "gate", "power", "trend", "report", "runs", "batches",
                              "agent-stats", "reliability", "composite", "consistency", "monitor"} \
        and cmd not in {"monitor import", "monitor evaluate"}


def issue_cases(fx: Fixtures) -> list[Case]:
    """The probes of issue 26 (and the documented examples it found broken)."""
    db = ["--db", fx.db]
    g = fx.garbage
    judge = ["--judge", "openai:gpt-4o-mini", "--judge-base-url", UNREACHABLE_JUDGE]
    out = [Case(["monitor", "import", str(p), *db], USAGE, f"monitor import: {label[4:]}")
           for label, p in g.items() if "empty" not in label]
    out += [
        Case(["monitor", "import", str(fx.files["valid_otlp"]), str(g["bad:otlp_rs_number.json"]), *db],
             USAGE, "monitor import: a good file and a bad one (nothing stored)"),
        Case(["monitor", "stats", "--window", "1000000d", *db], USAGE, "monitor stats: huge window"),
        Case(["dataset", "export", "x@²", "--output", str(fx.root / "o.jsonl"), *db], USAGE,
             "dataset export: superscript version"),
        Case(["annotate", "create", "base", "--raters", "a,b", "--strata", "0", "--stratify", "token_f1",
              *db], USAGE, "annotate create --strata 0"),
        Case(["annotate", "import", fx.task, str(g["bad:binary.csv"]), *db], USAGE,
             "annotate import: binary CSV"),
        Case(["golden", "generate", "--corpus", "fuzzcorpus", "--n", "2", "--name", "g", "--references", "-3",
              *judge, "--dry-run", *db], USAGE, "golden generate --references -3"),
        Case(["agreement", str(fx.files["ratings"]), "--bootstrap", "-1"], USAGE, "agreement --bootstrap -1"),
        Case(["monitor", "check", "--max-p95-ms", "-5", *db], USAGE, "monitor check --max-p95-ms -5"),
        Case(["golden", "generate", "--corpus", "fuzzcorpus", "--n", "2", "--name", "g", *judge, *db],
             USAGE, "golden generate: unreachable judge (pre-flight)", timeout=60),
        Case(["eval", str(fx.files["example"]), "-m", "faithfulness", *judge, *db], USAGE,
             "eval: unreachable judge (pre-flight)", timeout=60),
        Case(["eval", str(g["bad:empty.csv"]), "-m", "token_f1", *db], frozenset({3}), "eval: empty CSV"),
        Case(["eval", str(g["bad:empty.jsonl"]), "-m", "token_f1", *db], frozenset({3}), "eval: empty JSONL"),
        Case(["monitor", "evaluate", "-m", "token_f1", "--no-progress", *db], frozenset({3}),
             "monitor evaluate: a metric without any value (calls have no reference)"),
        Case(["export", "base", "-f", "xlsx", "-o", str(fx.root / "out.xlsx"), *db], frozenset({0}),
             "export -f xlsx (README)"),
        Case(["eval", str(fx.files["example"]), "--judge-base-url", "http://ZZTOKEN123@127.0.0.1:9/v1",
              "--judge", "openai:gpt-4o-mini", "-m", "faithfulness", *db], USAGE,
             "eval: judge URL with a user part", timeout=60),
    ]
    return out


# ---- running ----------------------------------------------------------------------------------
def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({"HF_HUB_OFFLINE": "1", "COLUMNS": "100", "OPENAI_API_KEY": "sk-fuzz",
                "RAGMETER_RETRY_MAX_S": "2", "NO_COLOR": "1"})
    src = str(Path(__file__).resolve().parents[1] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_subprocess(case: Case, cwd: Path) -> Outcome:
    """``ragmeter ARGV`` as the console script runs it, in a new process."""
    cmd = [sys.executable, "-c", "from ragmeter.apps.cli import entry; entry()", *case.argv]
    try:
        p = subprocess.run(cmd, cwd=cwd, env=_env(), stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, errors="replace", timeout=case.timeout)
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return Outcome(case, None, err)
    return Outcome(case, p.returncode, p.stderr)


def run_in_process(case: Case) -> Outcome:
    """``ragmeter.apps.cli.main(ARGV)`` in this process: an escaping exception is a traceback."""
    import contextlib
    import io
    import traceback

    from ragmeter.apps.cli import main

    out, err = io.StringIO(), io.StringIO()
    code: int | None = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(case.argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: BLE001 - exactly what the fuzz looks for
            err.write(traceback.format_exc())
            code = 1
    return Outcome(case, code, err.getvalue())


def fresh_dir(root: Path) -> Path:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    return root
