"""Joint judge requests: the metrics of a run that read the same sample's texts share one call.

Faithfulness (the answer's claims against the contexts) and context recall (the reference's
statements against the contexts) each send the sample's retrieved contexts, faithfulness and
answer relevancy its question and answer; asked separately, a sample pays for them twice. A request that may be joined carries a ``joint`` part (built
by :mod:`ragmeter.metrics.judge.joint`: its group, its name in the joint reply, and how to build
the joint request from its partners). Before the queued requests of a run are sent,
:func:`plan` replaces each group of two or more such parts of one sample by one joint request;
that request then takes the ordinary path -- cache, dry-run plan, online calls, ``--batch``
(custom_id = its cache key), Ray -- and :func:`split` gives each part its own verdict from the
reply, under the key the part's own request has.

The cache: a joint reply fills the joint request's key and, for each part, the key of the part's
own request (the part's verdict, marked with the joint key), so a later run asking for one of the
metrics alone, or with ``judge_joint=false``, is served from the cache and pays nothing. A part
whose own key is already cached is never joined: it is served from the cache as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ragmeter.llm.request import OK, JudgeRequest, JudgeResult


def joint_part(req: JudgeRequest) -> Any:
    """The request's joint part, or ``None`` for a request that is always sent alone."""
    return getattr(req, "joint", None)


def plan(service: Any, requests: Sequence[JudgeRequest]) -> tuple[list[JudgeRequest], dict[int, list[JudgeRequest]]]:
    """The requests to send: ``requests`` with each joinable group replaced by its joint request.

    Returns ``(sent, members)``: ``members[i]`` lists the original requests the joint request
    ``sent[i]`` answers (absent for a request sent as it is). Parts whose own verdict is already
    known (this service's memory or the store's judge cache) are left alone, and so is a part
    without a partner; ``judge_joint=false`` joins nothing.
    """
    reqs = list(requests)
    if not service.cfg.joint or sum(1 for r in reqs if joint_part(r) is not None) < 2:
        return reqs, {}
    candidates = [i for i, r in enumerate(reqs) if joint_part(r) is not None]
    keys = {i: service.key(reqs[i]) for i in candidates}
    unknown = {k: reqs[i] for i, k in keys.items() if k not in service._memory and k not in service._failed}
    found = service._store_lookup(unknown)
    groups: dict[Any, list[int]] = {}
    for i in candidates:
        if keys[i] in unknown and keys[i] not in found:
            groups.setdefault(joint_part(reqs[i]).group, []).append(i)
    sent: list[JudgeRequest] = []
    members: dict[int, list[JudgeRequest]] = {}
    joined: set[int] = set()  # indices of the requests a joint request answers
    for idx in groups.values():
        named = {joint_part(reqs[i]).name: set() for i in idx}
        for i in idx:
            named[joint_part(reqs[i]).name].add(keys[i])
        if len(named) < 2 or any(len(k) > 1 for k in named.values()):
            # one part (faithfulness and hallucination share a verdict), or one part asked two
            # different ways (another parameter): each request as it is
            continue
        joint = joint_part(reqs[idx[0]]).combine([reqs[i] for i in idx])
        if joint is None:
            continue
        joined.update(idx)
        members[len(sent)] = [reqs[i] for i in idx]
        sent.append(joint)
    return sent + [r for i, r in enumerate(reqs) if i not in joined], members


def split(service: Any, joint: JudgeRequest, res: JudgeResult, parts: Sequence[JudgeRequest]
          ) -> list[tuple[JudgeRequest, JudgeResult]]:
    """Each part's result from the joint request's: its own verdict (the reply's ``part.name``
    key) under its own request's key, or the joint request's failure with its precise reason.

    The joint call is accounted once, under the joint request (``judge_calls.metric`` names its
    metrics joined by ``+``; :func:`ragmeter.llm.accounting.run_judge_usage` splits its tokens
    and cost equally among them); the parts' results carry no tokens of their own. A new verdict
    is also stored under each part's own key (see the module docstring).
    """
    out = []
    stored: set[str] = set()  # faithfulness and hallucination: one part, one key, one row
    for r in parts:
        key = service.key(r)
        value = getattr(res.value, joint_part(r).name) if res.status == OK and res.value is not None else None
        part = replace(res, key=key, value=value, input_tokens=0, output_tokens=0, cached_tokens=0,
                       cache_write_tokens=0, cost_usd=0.0 if res.cost_usd is not None else None,
                       logprobs=None)
        if part.ok:
            service._remember(part)
            if not res.cached and service.store is not None and not service.cfg.dry_run and key not in stored:
                stored.add(key)
                row = service._cache_row(r, replace(part, raw=None))
                row["response"]["joint"] = res.key
                service._cache_rows.append(row)
        out.append((r, part))
    return out


def attribute(per_metric: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per-metric figures with each joint entry (``faithfulness+context_recall``) attributed to its
    metrics: each metric counts the joint calls that judged it (``calls``, ``cached``,
    ``failed``, and ``joint_calls`` of them), and gets an equal share of their tokens and cost.
    The run's totals are unchanged (a joint call is one call)."""
    out: dict[str, dict[str, Any]] = {}
    counts = ("calls", "cached", "failed")
    for name, m in per_metric.items():
        names = name.split("+") if "+" in name else [name]
        for part in names:
            t = out.setdefault(part, dict.fromkeys(m, 0))
            for k, v in m.items():
                if not isinstance(v, int | float):
                    continue
                t[k] = t.get(k, 0) + (v if k in counts or len(names) == 1 else v / len(names))
            if len(names) > 1:
                t["joint_calls"] = t.get("joint_calls", 0) + m.get("calls", 0) + m.get("cached", 0)
    for t in out.values():
        for k in ("input_tokens", "output_tokens", "cached_input_tokens", "cache_write_tokens"):
            if k in t:
                t[k] = round(t[k])
        if "cost_usd" in t:
            t["cost_usd"] = round(float(t["cost_usd"]), 6)
    return out
