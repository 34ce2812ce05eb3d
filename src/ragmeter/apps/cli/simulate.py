"""``ragmeter simulate``: simulated users talk to a system under test; the conversations are
stored as a dataset that ``ragmeter eval dataset:NAME`` scores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ragmeter.apps.cli._common import DB_HELP, console, err_console, get_store
from ragmeter.apps.cli._params import number
from ragmeter.core.counts import count


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate_cmd)


def simulate_cmd(
    target: Annotated[str, typer.Option("--target", help="The system under test: an OpenAI-compatible base URL (http://HOST:PORT/v1), an HTTP endpoint with --target-kind http (POST {messages, model} -> {content}), or python:MODULE:FUNCTION (FUNCTION(messages) -> text).")],
    name: Annotated[str, typer.Option("--name", help="Dataset name the conversations are stored under (evaluate them with `ragmeter eval dataset:NAME`).")],
    scenarios: Annotated[Path | None, typer.Option("--scenarios", help="YAML/JSON file with a list under 'scenarios:', each with persona, goal, expected_outcome (optional id, max_turns, stop, chatbot_role).")] = None,
    from_dataset: Annotated[str | None, typer.Option("--from-dataset", help="Instead of --scenarios: a stored dataset (NAME, NAME@VERSION): one simulated user per sample, its question the goal, its reference the expected outcome.")] = None,
    persona: Annotated[str | None, typer.Option("--persona", help="With --from-dataset: the simulated users' persona.")] = None,
    target_model: Annotated[str | None, typer.Option("--target-model", help="Model name sent to the target (required for an OpenAI-compatible target).")] = None,
    target_kind: Annotated[str, typer.Option("--target-kind", help="openai (chat completions) or http (POST {messages, model} -> {content}).")] = "openai",
    target_api_key_env: Annotated[str | None, typer.Option("--target-api-key-env", help="Environment variable with the target's API key (sent as a Bearer token).")] = None,
    turns: Annotated[int, typer.Option("--turns", help="User turns per conversation at most (a scenario's max_turns wins).", parser=number(1, 100, integer=True))] = 4,
    chatbot_role: Annotated[str | None, typer.Option("--chatbot-role", help="System prompt sent to the target and stored as the conversations' chatbot role (default: 'You are a helpful assistant.'; a scenario's chatbot_role wins).")] = None,
    judge: Annotated[str | None, typer.Option("--judge", help="LLM that plays the simulated user, as provider:model (openai:gpt-4o-mini, anthropic:..., ollama:...).")] = None,
    judge_base_url: Annotated[str | None, typer.Option("--judge-base-url", help="Endpoint of an OpenAI-compatible judge.")] = None,
    judge_api_key_env: Annotated[str | None, typer.Option("--judge-api-key-env", help="Name of the environment variable that holds the judge's API key.")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait for each reply of the target (the whole reply).", parser=number(0, 3600, low_open=True))] = 60.0,
    max_reply_mb: Annotated[float | None, typer.Option("--max-reply-mb", help="Largest reply of the target read, in MB (default 8; a larger one ends its conversation with the reason 'reply larger than N MB', and the rest of it is never read).", parser=number(0, 1e6, low_open=True))] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", help="Conversations sent to the target at once (the conversations advance a turn at a time together; 1 for a target that cannot take parallel calls). The simulated users' messages go through the judge's own limit.", parser=number(1, 256, integer=True))] = 8,
    batch: Annotated[bool, typer.Option("--batch", help="Refused (exit 2): each simulated user's next message depends on the target's last reply, so every turn would wait for its own batch; score the stored conversations with `ragmeter eval dataset:NAME --batch` (docs/judge.md#batch).")] = False,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the outcome as one JSON object.")] = False,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="Hide the progress bar.")] = False,
) -> None:
    """Simulate users (persona, goal, expected outcome) talking to a system under test through the
    judge client, and store the conversations as dataset NAME (DeepEval's conversation simulator
    and openevals' multi-turn simulation, over any judge ragmeter supports).

    Exits 2 on a bad scenarios file or option (nothing stored), or when no conversation could be
    held; 3 when some scenarios failed (the others are stored).
    """
    from ragmeter.core.errors import ConfigError
    from ragmeter.core.redact import redact
    from ragmeter.golden.datasets import _check_name
    from ragmeter.llm import get_judge
    from ragmeter.simulate.dialogue import simulate, store_conversations
    from ragmeter.simulate.scenarios import read_scenarios
    from ragmeter.simulate.targets import make_target

    _check_name(name)
    if batch:
        raise ConfigError("simulate cannot send its judge requests as a batch: each simulated user's next "
                          "message is written from the target's last reply, so every turn of every conversation "
                          "would wait for a batch of its own (up to 24 h each) while the target waits too. "
                          "Simulate without --batch; the scoring is where batching pays: "
                          f"`ragmeter eval dataset:{name} --metrics ... --batch`")
    if (scenarios is None) == (from_dataset is None):
        raise typer.BadParameter("give either --scenarios FILE or --from-dataset NAME", param_hint="'--scenarios'")
    store = None
    if scenarios is not None:
        items = read_scenarios(scenarios)
    else:
        from ragmeter.golden.datasets import samples_of

        store = get_store(db, must_exist=True)
        from ragmeter.simulate.scenarios import scenarios_from_samples

        items = scenarios_from_samples(samples_of(store, str(from_dataset)), persona, source=f"dataset:{from_dataset}")
    if not judge:
        raise ConfigError("simulate needs an LLM for the simulated user: --judge provider:model "
                          "(and --judge-base-url for an OpenAI-compatible server)")
    send, close = make_target(target, kind=target_kind, model=target_model, api_key_env=target_api_key_env,
                              timeout=timeout, max_reply_mb=max_reply_mb)
    store = store or get_store(db)
    opts: dict[str, Any] = {k: v for k, v in {"base_url": judge_base_url, "api_key_env": judge_api_key_env}.items()
                            if v is not None}
    svc = get_judge(judge, store=store, **opts)
    try:
        svc.preflight()
        from ragmeter.run.runner import _rich_progress

        with _rich_progress(not no_progress and not as_json and len(items) > 1) as prog:
            outcomes = simulate(items, send, svc, turns=turns, chatbot_role=chatbot_role, prefix=name,
                                concurrency=concurrency, progress=prog("conversations", len(items)))
        stats = svc.stats()
    finally:
        close()
        svc.close()
    done = [o.conversation for o in outcomes if o.conversation is not None]
    failed = [(sc.id, o.error) for sc, o in zip(items, outcomes, strict=True) if o.conversation is None]
    partial = [(sc.id, o.error) for sc, o in zip(items, outcomes, strict=True)
               if o.conversation is not None and o.error]
    if not done:
        raise ConfigError("no conversation could be held: " + "; ".join(f"{i}: {e}" for i, e in failed[:5]))
    info = {"kind": "simulation", "target": redact(target), "target_kind": target_kind, "target_model": target_model,
            "scenarios": str(scenarios) if scenarios else f"dataset:{from_dataset}", "turns": turns, "judge": judge}
    version = store_conversations(store, name, done, info)
    summary = {"dataset": f"dataset:{version.ref}", "conversations": len(done),
               "turns": sum(len(c.turns) for c in done), "failed": dict(failed),
               "ended": {o.conversation.id: o.ended for o in outcomes if o.conversation is not None},
               "judge": {k: stats.get(k) for k in ("calls", "cached", "failed", "input_tokens", "output_tokens", "cost_usd")}}
    if as_json:
        typer.echo(json.dumps(summary, default=str))
    else:
        console.print(f"stored {count(len(done), 'conversation')}, {count(summary['turns'], 'turn')} "
                      f"(user and assistant), as dataset:{version.ref}; "
                      f"score them with `ragmeter eval dataset:{name} --metrics role_adherence,...`",
                      markup=False, highlight=False)
        for sid, err in [*failed, *partial]:
            err_console.print(f"  {sid}: {err}", markup=False, highlight=False)
    if failed:
        raise typer.Exit(3)
