"""Simulated users: conversations held one after another against conversations advanced together.

``ragmeter simulate`` holds one conversation per scenario: each user turn is one request to the
LLM playing the user (through the judge client) and one to the system under test. Before, the
scenarios were held one after another (``ragmeter.simulate.dialogue.simulate_one`` per scenario, what
DeepEval's ``ConversationSimulator`` and a hand-written loop do without ``async``); now
``simulate`` advances every conversation a turn at a time together: the users' messages go to the
judge as one concurrent batch, then to the target on ``--concurrency`` threads.

Setup (one process; the scripted judge server of tests/judge_server.py runs in a subprocess and
answers in ``--delay`` seconds; the target is a Python callable, ``benchmarks/_sim_target.py``, that
takes ``--delay`` seconds): ``--scenarios`` scenarios of ``--turns`` user turns each. Both ways must
store the same conversations (``same_conversations``).

Then the command a user types, as a fresh process: ``ragmeter simulate --scenarios FILE --target
python:_sim_target:reply --judge openai:sim-user --judge-base-url URL/v1 --turns T --concurrency C``
(the installed console script, loading from bytecode as an installed copy does:
``benchmarks/_fresh.py``), timed from launch to exit, ``--reps`` times (default 3; medians, every
time and the load average; an unmeasured warm-up run first). Each run stores into a store of its
own, created beforehand (a user's store exists already; the judge's replies are cached in the
store, so a shared one would answer later runs from its cache). Its conversations must be those
held in this process (``fresh_same_conversations``).

The last line printed is one JSON object with the wall times, the ideal of each way (user turns x
2 x delay one after another; rounds x (1 + waves of target calls) x delay together), the speedup,
and the fresh process's median wall time and its ratio to the ideal of the together way
(``fresh_process: true``).

    python benchmarks/simulate.py [--scenarios 12] [--turns 4] [--delay 0.2] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _fresh import installed_env, load_avg, median, ragmeter_command, run_timed  # noqa: E402
from _sim_target import DELAY_ENV, reply  # noqa: E402
from judge import start_server  # noqa: E402

#: the dataset name of the fresh process: its conversation ids (NAME-SCENARIO) are those of
#: ``simulate(...)`` in this process (default prefix ``sim``)
NAME = "sim"


def conversation_turns(samples: list[Any]) -> dict[str, list[tuple[str, str]]]:
    """``{conversation id: [(role, content), ...]}`` of the conversation samples among ``samples``."""
    from ragmeter.conversations.model import CONVERSATION_KEY

    out = {}
    for s in samples:
        conv = (s.metadata or {}).get(CONVERSATION_KEY)
        if isinstance(conv, dict):
            out[conv["id"]] = [(t["role"], t["content"]) for t in conv["turns"]]
    return out


def fresh_cli(args: argparse.Namespace, scenarios: list[Any], url: str, held: list[Any]) -> dict[str, Any]:
    """``--reps`` fresh ``ragmeter simulate`` processes against the judge server at ``url``."""
    from ragmeter.conversations.model import to_samples
    from ragmeter.io.stored import load_samples
    from ragmeter.store import Store

    expected = conversation_turns([s for c in held for s in to_samples(c)])
    runs: list[dict[str, Any]] = []
    loads = [load_avg()]
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        spec = tmp / "scenarios.json"
        spec.write_text(json.dumps({"scenarios": [{k: v for k, v in asdict(sc).items() if v is not None}
                                                        for sc in scenarios]}))
        env = installed_env(tmp / "pycache", PYTHONPATH=str(HERE), OPENAI_API_KEY="unused-by-the-local-server",
                            **{DELAY_ENV: str(args.delay)})
        argv = ["simulate", "--scenarios", str(spec), "--name", NAME, "--target", "python:_sim_target:reply",
                "--judge", "openai:sim-user", "--judge-base-url", url + "/v1", "--turns", str(args.turns),
                "--concurrency", str(args.concurrency), "--json"]

        def one(tag: str) -> tuple[float, dict[str, Any], bool]:
            db = f"sqlite:///{tmp / f'{tag}.db'}"
            Store(db).close()  # the store exists before the command, as a user's does
            wall, stdout = run_timed([*argv, "--db", db], env)
            store = Store(db)
            try:
                same = conversation_turns(load_samples(store, NAME)) == expected
            finally:
                store.close()
            return wall, json.loads(stdout.strip().splitlines()[-1]), same

        one("warm")  # warm-up, not measured: bytecode and the file system cache
        for i in range(args.reps):
            wall, doc, same = one(f"run{i}")
            runs.append({"wall_s": round(wall, 3), "conversations": doc["conversations"], "turns": doc["turns"],
                         "judge_calls": doc["judge"]["calls"], "judge_cached": doc["judge"]["cached"],
                         "same_conversations": same})
            loads.append(load_avg())
    return {"command": " ".join([*ragmeter_command(), *argv[:-1], "--db", "DB", "--json"])
                .replace(url, "URL").replace(str(spec), "FILE"),
            "reps": args.reps, "runs": runs, "wall_s": median([r["wall_s"] for r in runs]),
            "same_conversations": all(r["same_conversations"] for r in runs), "load_avg_1_5_15": loads,
            "bytecode": "compiled by an unmeasured warm-up run, as pip does at install"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", type=int, default=12)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--delay", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--reps", type=int, default=3, help="fresh `ragmeter simulate` processes (median reported)")
    args = ap.parse_args()
    os.environ[DELAY_ENV] = str(args.delay)  # the target's reply time, in this process and the fresh ones
    from ragmeter.llm import get_judge
    from ragmeter.simulate.dialogue import simulate, simulate_one
    from ragmeter.simulate.scenarios import Scenario

    scenarios = [Scenario(id=f"s{i}", persona=f"Traveller number {i}.", goal=f"Ask about route {i} and its fares.",
                          expected_outcome="The fares are explained.") for i in range(args.scenarios)]
    proc, url = start_server(args.delay)
    out: dict[str, object] = {"scenarios": args.scenarios, "turns": args.turns, "delay_s": args.delay,
                              "concurrency": args.concurrency, "load_avg_1_5_15_start": load_avg()}
    try:
        def judge(tag: str):  # a new service each way (memory cache only, no store): every request is sent
            return get_judge("openai:sim-user", base_url=url + "/v1", store=None)

        svc = judge("1")
        svc.preflight()
        t = time.perf_counter()
        one_by_one = [simulate_one(sc, reply, svc, turns=args.turns, chatbot_role=None,
                                   conversation_id=f"{NAME}-{sc.id}") for sc in scenarios]
        out["one_after_another_s"] = round(time.perf_counter() - t, 3)
        svc.close()
        svc = judge("2")
        t = time.perf_counter()
        together = simulate(scenarios, reply, svc, turns=args.turns, prefix=NAME, concurrency=args.concurrency)
        out["together_s"] = round(time.perf_counter() - t, 3)
        svc.close()
        held = [o.conversation for o in together if o.conversation]
        fresh = fresh_cli(args, scenarios, url, held)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    turns = sum(len(o.conversation.turns) // 2 for o in together if o.conversation)
    out["user_turns"] = turns
    out["ideal_one_after_another_s"] = round(turns * 2 * args.delay, 3)
    rounds = max(len(o.conversation.turns) // 2 for o in together if o.conversation)
    waves = -(-args.scenarios // args.concurrency)  # target calls of a round, --concurrency at a time
    out["ideal_together_s"] = round(rounds * (1 + waves) * args.delay, 3)
    out["same_conversations"] = [o.conversation.model_dump() if o.conversation else None for o in one_by_one] == \
        [o.conversation.model_dump() if o.conversation else None for o in together]
    out["speedup"] = round(out["one_after_another_s"] / out["together_s"], 2)  # type: ignore[operator]
    out["together_over_ideal"] = round(out["together_s"] / out["ideal_together_s"], 2)  # type: ignore[operator]
    fresh["ideal_s"] = out["ideal_together_s"]
    fresh["wall_over_ideal"] = round(fresh["wall_s"] / fresh["ideal_s"], 2)
    out["fresh_cli"] = fresh
    out["fresh_process"] = True
    out["fresh_wall_s"] = fresh["wall_s"]
    out["fresh_wall_over_ideal"] = fresh["wall_over_ideal"]
    out["fresh_same_conversations"] = fresh["same_conversations"]
    # what the command spends beyond the work timed in this process: start-up, store, exit
    out["fresh_overhead_s"] = round(fresh["wall_s"] - out["together_s"], 3)  # type: ignore[operator]
    print(f"{args.scenarios} scenarios x {args.turns} turns, judge and target {args.delay * 1000:.0f} ms: "
          f"one after another {out['one_after_another_s']} s (ideal {out['ideal_one_after_another_s']} s), "
          f"together {out['together_s']} s (ideal {out['ideal_together_s']} s): {out['speedup']}x; "
          f"same conversations: {out['same_conversations']}")
    print(f"fresh `ragmeter simulate` processes ({args.reps}, median): {fresh['wall_s']} s launch to exit, "
          f"{fresh['wall_over_ideal']}x the ideal {fresh['ideal_s']} s (in this process: together "
          f"{out['together_s']} s, {out['together_over_ideal']}x; {out['fresh_overhead_s']} s more); "
          f"runs {[r['wall_s'] for r in fresh['runs']]}; "
          f"same conversations: {fresh['same_conversations']}; load average {fresh['load_avg_1_5_15']}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
