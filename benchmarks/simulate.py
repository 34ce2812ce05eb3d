"""Simulated users: conversations held one after another against conversations advanced together.

``ragmeter simulate`` holds one conversation per scenario: each user turn is one request to the
LLM playing the user (through the judge client) and one to the system under test. Before, the
scenarios were held one after another (``ragmeter.simulate.dialogue.simulate_one`` per scenario, what
DeepEval's ``ConversationSimulator`` and a hand-written loop do without ``async``); now
``simulate`` advances every conversation a turn at a time together: the users' messages go to the
judge as one concurrent batch, then to the target on ``--concurrency`` threads.

Setup (one process; the scripted judge server of tests/judge_server.py runs in a subprocess and
answers in ``--delay`` seconds; the target is a Python callable that takes ``--delay`` seconds):
``--scenarios`` scenarios of ``--turns`` user turns each. Both ways must store the same
conversations (``same_conversations``). The last line printed is one JSON object with the wall
times, the ideal of each way (user turns x 2 x delay one after another; rounds x (1 + waves of
target calls) x delay together) and the speedup.

    python benchmarks/simulate.py [--scenarios 12] [--turns 4] [--delay 0.2]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge import start_server  # noqa: E402

DELAY = 0.2


def target(messages: list[dict[str, str]]) -> str:
    time.sleep(DELAY)
    return f"Here is what I know about that: {messages[-1]['content']}"


def main() -> None:
    global DELAY
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", type=int, default=12)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--delay", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()
    DELAY = args.delay
    from ragmeter.llm import get_judge
    from ragmeter.simulate.dialogue import simulate, simulate_one
    from ragmeter.simulate.scenarios import Scenario

    scenarios = [Scenario(id=f"s{i}", persona=f"Traveller number {i}.", goal=f"Ask about route {i} and its fares.",
                          expected_outcome="The fares are explained.") for i in range(args.scenarios)]
    proc, url = start_server(args.delay)
    out: dict[str, object] = {"scenarios": args.scenarios, "turns": args.turns, "delay_s": args.delay,
                              "concurrency": args.concurrency}
    try:
        def judge(tag: str):  # a new service each way (memory cache only, no store): every request is sent
            return get_judge("openai:sim-user", base_url=url + "/v1", store=None)

        svc = judge("1")
        svc.preflight()
        t = time.perf_counter()
        one_by_one = [simulate_one(sc, target, svc, turns=args.turns, chatbot_role=None,
                                   conversation_id=f"sim-{sc.id}") for sc in scenarios]
        out["one_after_another_s"] = round(time.perf_counter() - t, 3)
        svc.close()
        svc = judge("2")
        t = time.perf_counter()
        together = simulate(scenarios, target, svc, turns=args.turns, concurrency=args.concurrency)
        out["together_s"] = round(time.perf_counter() - t, 3)
        svc.close()
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
    print(f"{args.scenarios} scenarios x {args.turns} turns, judge and target {args.delay * 1000:.0f} ms: "
          f"one after another {out['one_after_another_s']} s (ideal {out['ideal_one_after_another_s']} s), "
          f"together {out['together_s']} s (ideal {out['ideal_together_s']} s): {out['speedup']}x; "
          f"same conversations: {out['same_conversations']}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
