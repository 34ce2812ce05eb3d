"""Every ``ragmeter`` command with bad arguments and garbage files, each call in a subprocess as a
user runs it (the console script), counting tracebacks and exit statuses that differ from
docs/exit-codes.md. The commands are read from the typer app, so a new command is fuzzed without
being listed; the cases (tests/cli_fuzz.py) include the probes of issue 26: garbage files to
``monitor import``, ``monitor stats --window 1000000d``, ``dataset export 'x@²'``, ``annotate create
--strata 0``, a binary CSV to ``annotate import``, negative counts and limits, a two-file import
whose second file is bad, a judge that cannot be reached.

There is no library to compare against here: the figure is the count of wrong answers (0). The
last line printed is one JSON object: ``{"runs": N, "tracebacks": 0, "wrong_exit_codes": 0, ...}``.

    python benchmarks/fuzz_cli.py [--workers 2] [--only monitor]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import cli_fuzz  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2, help="subprocesses at a time")
    ap.add_argument("--only", default=None, help="only cases whose command line contains this")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ragmeter-fuzz-") as tmp:
        root = Path(tmp)
        fx = cli_fuzz.make_fixtures(root / "fixtures")
        cases = [c for c in cli_fuzz.cases(fx) if args.only is None or args.only in " ".join(c.argv)]
        commands = {" ".join(w) for w, _ in cli_fuzz.commands()}
        print(f"{len(cases)} cases over {len(commands)} commands, {args.workers} at a time", flush=True)
        with ThreadPoolExecutor(args.workers) as pool:
            outcomes = list(pool.map(lambda c: cli_fuzz.run_subprocess(c, root), cases))
    bad = [o for o in outcomes if o.traceback or o.wrong_exit]
    for o in bad:
        last = next((ln for ln in reversed(o.stderr.strip().splitlines()) if ln.strip()), "")
        print(f"{'TRACEBACK ' if o.traceback else ''}exit {o.code} (want {sorted(o.case.expect)}): "
              f"{o.case.why}: ragmeter {' '.join(o.case.argv)[:200]}\n    {last[:300]}")
    covered = {" ".join(c.argv[:2]) if " ".join(c.argv[:2]) in commands else c.argv[0] for c in cases}
    result = {"runs": len(outcomes), "tracebacks": sum(o.traceback for o in outcomes),
              "wrong_exit_codes": sum(o.wrong_exit for o in outcomes),
              "timeouts": sum(o.code is None for o in outcomes), "commands": len(commands),
              "commands_run": len(covered & commands), "seconds": round(time.perf_counter() - t0, 1)}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    out = main()
    sys.exit(0 if out["tracebacks"] == 0 and out["wrong_exit_codes"] == 0 else 1)
