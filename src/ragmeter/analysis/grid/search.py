"""Grid search (the search loop) over RAG configurations: run the user's pipeline for every combination
of parameters, score each with the chosen correctness method and metrics, rank with confidence
intervals, say when the winner is within noise, re-rank the top N with an LLM judge after a cost
estimate, and store everything (one run per configuration, the ranking in the ``grid`` kv
namespace). Optional successive halving spends the budget on the promising configurations.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ragmeter.analysis.grid.execute import PipelineStats, build_samples, run_pipeline
from ragmeter.analysis.grid.plan import (
    CORRECTNESS_KEY,
    JUDGE_KEY,
    KV_GRID,
    Confirm,
    GridConfig,
    Log,
    Question,
    parse_grid_config,
    questions_of,
)
from ragmeter.analysis.grid.ranking import ConfigResult, estimate_judge_cost, rank
from ragmeter.core.errors import ConfigError, RagmeterError
from ragmeter.core.schema import Sample
from ragmeter.metrics.correctness.methods import metric_for_method
from ragmeter.run.engines import check_engine

# ---- the search ----------------------------------------------------------------------------------------

@dataclass
class GridResult:
    grid_id: str
    config: GridConfig
    results: list[ConfigResult]
    ranking: dict[str, Any]
    judge_ranking: dict[str, Any] | None = None
    judge_estimate: dict[str, Any] | None = None
    judge_note: str | None = None
    calibration: dict[str, Any] | None = None
    halving: dict[str, Any] | None = None
    pipeline: dict[str, Any] = field(default_factory=dict)
    n_questions: int = 0

    def record(self) -> dict[str, Any]:
        c = self.config
        return {"name": c.name, "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "dataset": c.dataset, "pipeline": c.pipeline, "method": c.method,
                "method_params": c.method_params, "metrics": [str(m) for m in c.metrics],
                "params": {"grid": c.grid, "fixed": c.fixed}, "n_questions": self.n_questions,
                "runs": [r.record() for r in self.results], "ranking": self.ranking["rows"],
                "noise": _noise(self.ranking),
                "judge_ranking": self.judge_ranking["rows"] if self.judge_ranking else None,
                "judge_noise": _noise(self.judge_ranking) if self.judge_ranking else None,
                "judge_estimate": self.judge_estimate,
                "judge_note": self.judge_note, "calibration": self.calibration, "halving": self.halving,
                "pipeline_stats": self.pipeline}


def _noise(ranking: dict[str, Any]) -> dict[str, Any]:
    return {k: ranking.get(k) for k in ("alpha", "runner_up_p", "winner_within_noise", "within_noise")}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:60] or "grid"


def _fmt_params(params: dict[str, Any], keys: Sequence[str]) -> str:
    shown = [k for k in keys if k in params] or list(params)
    return " ".join(f"{k}={params[k]}" for k in shown)


def _correctness_entry(cfg: GridConfig, threshold: float | None = None) -> dict[str, Any]:
    params = dict(cfg.method_params)
    if threshold is not None:
        params["threshold"] = threshold
    return {"name": metric_for_method(cfg.method), "params": params, "key": CORRECTNESS_KEY}


def _score(samples: list[Sample], cfg: GridConfig, *, db: Any, name: str, threshold: float | None,
           options: dict[str, Any], engine: str | None = None) -> Any:
    """Evaluate one configuration's samples on the grid's engine (``engine`` overrides it)."""
    from ragmeter.run.runner import evaluate

    metrics = [_correctness_entry(cfg, threshold), *cfg.metrics]
    return evaluate(samples, metrics, db=db, name=name, options=options, engine=engine or cfg.engine,
                    ray_address=cfg.ray_address)


def _round_engine(cfg: GridConfig) -> str:
    """The engine of the successive-halving rounds: the grid's, except on a Ray cluster, whose
    workers cannot read the rounds' scratch SQLite file on the driver (they would embed every
    text again); the rounds score small subsets, so the driver does it."""
    return "local" if cfg.ray_address else cfg.engine


def _calibrate(cfg: GridConfig, dataset: Any, store: Any, log: Log) -> tuple[float | None, dict[str, Any] | None, str | None]:
    """semantic_dynamic: calibrate once on the dataset's labelled answers (the calibrate-then-apply workflow:
    validation set -> threshold -> grid search). Returns (threshold, calibration, run id)."""
    from ragmeter.run.runner import evaluate

    if cfg.method != "semantic_dynamic" or cfg.method_params.get("threshold") is not None:
        return None, None, None
    labelled = [s for s in dataset.samples if s.label is not None and s.answer is not None and s.references]
    if not labelled:
        log("[yellow]semantic_dynamic: the dataset has no labelled answers; calibrating each "
            "configuration on the similarity proxy (circular)[/yellow]")
        return None, None, None
    params = {k: v for k, v in cfg.method_params.items() if k != "threshold"}
    res = evaluate(labelled, [{"name": "correct_semantic_dynamic", "params": params, "key": CORRECTNESS_KEY}],
                   db=store, name=f"{cfg.name} calibration", options=cfg.options, engine=cfg.engine,
                   ray_address=cfg.ray_address)
    cal = res.extra.get("calibration") or {}
    t = cal.get("chosen")
    held = (cal.get("held_out") or {}).get("chosen") or {}
    log(f"calibrated threshold {t} on {cal.get('n_validation')} labelled answers "
        f"({cal.get('objective')}); held-out accuracy {held.get('accuracy', float('nan')):.3f} "
        f"(run {res.run_id})")
    return t, cal, res.run_id


def run_grid(config: str | Path | dict[str, Any] | GridConfig, *, db: str | Any = None, yes: bool = False,
             confirm: Confirm | None = None, log: Log | None = None,
             overrides: Mapping[str, Any] | None = None, log_rankings: bool = True) -> GridResult:
    """Run a grid search end to end (see the module docstring and docs/experiments.md).

    Args:
        config: a grid config file, mapping or :class:`GridConfig`.
        db: the store (URL or :class:`~ragmeter.store.Store`).
        yes: skip the cost confirmation of the judge phase.
        confirm: ``confirm(estimate) -> bool`` asked before judge calls are spent (default: refuse
            unless ``yes``, so nothing is spent without consent).
        log: where progress lines go (rich markup allowed); default: nowhere.
        overrides: ``top_n``, ``judge``, ``workers``, ``cache``, ``set`` (fixed parameters) ...
        log_rankings: also log the head of each ranking (the CLI prints full tables instead).

    Returns:
        A :class:`GridResult`; the record is also stored under kv ``grid``/``grid_id``.
    """
    from ragmeter.io import load
    from ragmeter.pipeline import accepts, load_pipeline
    from ragmeter.store import Store, open_store

    cfg = config if isinstance(config, GridConfig) else parse_grid_config(config, overrides=overrides)
    if isinstance(config, GridConfig) and overrides:
        raise ConfigError("pass overrides with a config file or mapping, not a GridConfig")
    if check_engine(cfg.engine) == "ray":  # start or reach Ray before any pipeline call is spent
        from ragmeter.run.engines.ray_runtime import init

        init(cfg.ray_address)
    log = log or (lambda msg: None)
    store = db if isinstance(db, Store) else open_store(db)
    fn = load_pipeline(cfg.pipeline)
    dataset = load(cfg.dataset)
    questions = questions_of(dataset.samples)
    configs = cfg.configurations()
    if not configs:
        raise ConfigError("the grid has no configuration")
    for p in configs:
        accepts(fn, {**cfg.fixed, **p})
    if cfg.options.get("judge") and (cfg.top_n > 0 or cfg.method in ("llm_judge", "hybrid")):
        from ragmeter.llm import problem

        why = problem(cfg.options)  # a judge that cannot be used stops the grid before any run is stored
        if why:
            raise ConfigError(f"the LLM judge cannot be used: {why}")
    grid_id = f"{_slug(cfg.name)}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{hashlib.sha1(str(time.time_ns()).encode()).hexdigest()[:4]}"
    log(f"grid [bold]{grid_id}[/bold]: {len(configs)} configurations x {len(questions)} questions, "
        f"method {cfg.method}, pipeline {cfg.pipeline}" + (", metrics on Ray" if cfg.engine == "ray" else ""))

    if any(m in ("llm_judge", "hybrid") for m in [cfg.method]):
        _confirm_judge(cfg, questions, configs, store, yes, confirm, log, phase="scoring every configuration")

    threshold, calibration, cal_run = _calibrate(cfg, dataset, store, log)
    pstats = PipelineStats()
    results = [ConfigResult(params=p, name=f"{cfg.name} {_fmt_params(p, cfg.varying)}") for p in configs]
    halving_info = None
    if cfg.halving is not None and len(configs) > 1:
        halving_info = _successive_halving(cfg, fn, questions, results, store, threshold, pstats, log)

    survivors = [r for r in results if r.eliminated_round is None]
    _run_configs(cfg, fn, survivors, questions, store, threshold, calibration, pstats, log)
    if all(r.error for r in survivors):
        raise ConfigError(f"every configuration failed; the first: {survivors[0].error}")
    if halving_info is not None:
        # distinct (configuration, question) pairs the pipeline had to answer, vs the full grid
        halving_info["pipeline_pairs"] = len(pstats.pairs)
        halving_info["pipeline_calls_saved"] = halving_info["pipeline_calls_full_grid"] - len(pstats.pairs)
        log(f"  successive halving saved {halving_info['pipeline_calls_saved']} of "
            f"{halving_info['pipeline_calls_full_grid']} pipeline calls and "
            f"{halving_info['scored_samples_saved']} scored samples")
    # configurations dropped by successive halving were scored on a subset only: not ranked with the rest
    ranking = rank(survivors, alpha=cfg.alpha)
    if log_rankings:
        _log_ranking(ranking, log, title="ranking by " + cfg.method)

    judge_ranking = estimate = note = None
    if cfg.top_n > 0 and cfg.options.get("judge"):
        top_names = ranking["order"][:cfg.top_n]
        top = [r for name in top_names for r in results if r.name == name]
        estimate = _confirm_judge(cfg, questions, [r.params for r in top], store, yes, confirm, log,
                                  phase=f"re-ranking the top {len(top)}", samples_by_config=[
                                      _samples_of(store, r.run_id) for r in top])
        if estimate.get("declined"):
            note = "judge phase declined: the final ranking is the " + cfg.method + " ranking"
        else:
            from ragmeter.run.runner import evaluate

            for r in top:
                samples = _samples_of(store, r.run_id)
                # an LLM-judged metric: scored on the driver whatever the engine (one judge service)
                res = evaluate(samples, [{"name": "correct_llm_judge", "key": JUDGE_KEY}], db=store,
                               name=f"{r.name} [judge]", options=cfg.options)
                s = res.summary[JUDGE_KEY]
                r.judge_run_id, r.judge_mean = res.run_id, s.mean
                r.judge_ci = (s.ci_low, s.ci_high)
                r.judge_values = {x.id: sc.value for x, sc in zip(res.samples, res.scores[JUDGE_KEY], strict=True)}
                log(f"  judged {r.name}: {_f(s.mean)} [{_f(s.ci_low)}, {_f(s.ci_high)}] "
                    f"(n={s.n}, no value {s.n_missing})")
            judge_ranking = rank(top, alpha=cfg.alpha, judge=True)
            if log_rankings:
                _log_ranking(judge_ranking, log, title=f"final ranking of the top {len(top)} by the LLM judge")
    elif cfg.top_n > 0:
        note = ("no judge configured: the final ranking is the " + cfg.method + " ranking "
                "(--judge provider:model re-ranks the top N)")
    if note:
        log(note)
    out = GridResult(grid_id, cfg, results, ranking, judge_ranking, estimate, note,
                     calibration={**calibration, "run_id": cal_run} if calibration else None,
                     halving=halving_info, n_questions=len(questions),
                     pipeline={"calls": pstats.calls, "cached": pstats.cached, "errors": pstats.errors,
                               "seconds": round(pstats.seconds, 3)})
    store.kv_put(KV_GRID, grid_id, json.loads(json.dumps(out.record(), default=str)))
    log(f"stored grid {grid_id} (kv namespace '{KV_GRID}'); pipeline calls {pstats.calls}, "
        f"cached {pstats.cached}, errors {pstats.errors}")
    return out


def _f(v: Any) -> str:
    return "—" if v is None else f"{v:.4f}"


def _log_ranking(ranking: dict[str, Any], log: Log, *, title: str, show: int = 5) -> None:
    log(f"[bold]{title}[/bold] (95% CI; p = paired permutation vs #1, Holm-adjusted)")
    for row in ranking["rows"][:show]:
        p = "" if row["p_vs_winner_holm"] is None else f"  p={row['p_vs_winner_holm']:.3g}"
        log(f"  {row['rank']:>3}. {_f(row['mean'])} [{_f(row['ci_low'])}, {_f(row['ci_high'])}]  {row['name']}{p}")
    if len(ranking["rows"]) > show:
        log(f"  ... {len(ranking['rows']) - show} more")
    if ranking.get("runner_up_p") is not None:
        n_tied = len(ranking["within_noise"]) - 1
        if ranking["winner_within_noise"]:
            log(f"  the winner is within noise of the runner-up (paired permutation p = "
                f"{ranking['runner_up_p']:.3g} >= {ranking['alpha']}); {n_tied} configuration(s) are not "
                "significantly different from #1")
        else:
            log(f"  the winner beats the runner-up significantly (p = {ranking['runner_up_p']:.3g}); "
                f"{n_tied} configuration(s) are not significantly different from #1")


def _samples_of(store: Any, run_id: str | None) -> list[Sample]:
    if run_id is None:
        raise RagmeterError("configuration has no stored run")
    return store.run_samples(run_id)


def _confirm_judge(cfg: GridConfig, questions: Sequence[Question], configs: Sequence[dict[str, Any]], store: Any,
                   yes: bool, confirm: Confirm | None, log: Log, *, phase: str,
                   samples_by_config: Sequence[Sequence[Sample]] | None = None) -> dict[str, Any]:
    """Estimate the judge's cost for ``phase`` and ask for consent (``yes`` skips the question).

    Raises:
        RagmeterError: consent refused for the scoring phase (nothing can be ranked without it).
    """
    from ragmeter.llm import problem

    why = problem(cfg.options)
    if why:
        raise ConfigError(f"{phase} needs an LLM judge: {why}")
    if samples_by_config is None:
        # answers do not exist yet: a 200-character placeholder per (configuration, question), so the
        # estimate counts one call each (an upper bound: identical answers would share a call, and
        # hybrid only judges its uncertainty band)
        samples = [Sample(id=q.id, question=q.text, answer=f"{'x' * 190} {i:>8}", references=q.references)
                   for i in range(len(configs)) for q in questions]
    else:
        samples = [s for group in samples_by_config for s in group]
    est = estimate_judge_cost(samples, cfg.options, store,
                              judge_params=cfg.method_params.get("judge_params") if cfg.method != "hybrid" else None)
    cost = est.get("est_cost_usd")
    cost_text = f"${cost:.4f}" if cost is not None else "unknown (no price for this model)"
    log(f"judge estimate for {phase}: {est.get('planned_calls')} calls for {est.get('requests')} "
        f"answers ({est.get('reused')} cached or duplicate), ~{est.get('est_input_tokens')} input + "
        f"{est.get('est_output_tokens')} output tokens, "
        f"cost {cost_text} "
        f"with {est.get('judge')}; the rule of thumb: ${est['rule_of_thumb_usd']:.4f}")
    if yes:
        return est
    ok = confirm(est) if confirm is not None else False
    if not ok:
        est["declined"] = True
        if samples_by_config is None:
            raise RagmeterError(f"judge cost not confirmed for {phase} (pass --yes to accept)")
    return est


def _run_configs(cfg: GridConfig, fn: Callable[..., Any], results: Sequence[ConfigResult],
                 questions: Sequence[Question], store: Any, threshold: float | None,
                 calibration: dict[str, Any] | None, pstats: PipelineStats, log: Log) -> None:
    """Run the pipeline and score every configuration on every question (one stored run each)."""
    for i, r in enumerate(results, 1):
        params = {**cfg.fixed, **r.params}
        try:
            outputs = run_pipeline(fn, cfg.pipeline, params, questions, store=store, use_cache=cfg.cache,
                                   workers=cfg.workers, stats=pstats)
        except ConfigError as exc:
            r.error = str(exc)
            log(f"  [{i}/{len(results)}] {r.name}: [red]skipped[/red] ({exc})")
            continue
        samples = build_samples(questions, outputs, params)
        res = _score(samples, cfg, db=store, name=r.name, threshold=threshold, options=cfg.options)
        _fill(r, res)
        extra = {"grid": {"params": r.params, "fixed": cfg.fixed, "pipeline": cfg.pipeline}}
        if calibration:
            extra["calibration"] = calibration
        run = store.get_run(res.run_id)
        store.update_run(res.run_id, extra={**(run.extra or {}), **extra})
        errors = sum(1 for o in outputs if "error" in o)
        log(f"  [{i}/{len(results)}] {r.name}: {cfg.method} {_f(r.mean)} [{_f(r.ci_low)}, {_f(r.ci_high)}]"
            + (f", {errors} pipeline error(s)" if errors else "") + f"  (run {res.run_id})")


def _fill(r: ConfigResult, res: Any) -> None:
    s = res.summary[CORRECTNESS_KEY]
    r.run_id, r.mean, r.ci_low, r.ci_high, r.n = res.run_id, s.mean, s.ci_low, s.ci_high, s.n
    r.values = {x.id: sc.value for x, sc in zip(res.samples, res.scores[CORRECTNESS_KEY], strict=True)}
    r.metrics = {k: m.mean for k, m in res.summary.items()}
    r.directions = {k: m.direction for k, m in res.summary.items()}


def _successive_halving(cfg: GridConfig, fn: Callable[..., Any], questions: Sequence[Question],
                        results: list[ConfigResult], store: Any, threshold: float | None,
                        pstats: PipelineStats, log: Log) -> dict[str, Any]:
    """Score every configuration on a small random subset of questions, keep the best 1/eta,
    grow the subset eta-fold, repeat until the survivors would run on every question (that last
    round is the normal full evaluation). Intermediate scores go to a scratch store, so only full
    evaluations become runs. Returns the rounds and the pipeline calls saved."""
    assert cfg.halving is not None
    h = cfg.halving
    n_all = len(questions)
    order = np.random.default_rng(h.seed).permutation(n_all).tolist()
    rounds = max(1, 1 + int(math.floor(math.log(max(1.0, n_all / h.min_questions), h.eta))))
    sizes = [max(h.min_questions, math.ceil(n_all / h.eta ** (rounds - 1 - r))) for r in range(rounds)]
    sizes = [min(n_all, s) for s in sizes]
    alive = list(results)
    info: dict[str, Any] = {"eta": h.eta, "min_questions": h.min_questions, "rounds": []}
    scratch_dir = tempfile.mkdtemp(prefix="ragmeter-halving-")
    scratch = f"sqlite:///{Path(scratch_dir) / 'rounds.db'}"
    try:
        for r_i, size in enumerate(sizes[:-1]):
            if len(alive) <= 1:
                break
            subset = [questions[j] for j in order[:size]]
            scores: dict[str, tuple[float, dict[str, float | None]]] = {}
            for r in alive:
                params = {**cfg.fixed, **r.params}
                try:
                    outs = run_pipeline(fn, cfg.pipeline, params, subset, store=store, use_cache=cfg.cache,
                                        workers=cfg.workers, stats=pstats)
                except ConfigError as exc:
                    r.error = str(exc)
                    r.eliminated_round = r_i
                    continue
                res = _score(build_samples(subset, outs, params), cfg, db=scratch,
                             name=f"{r.name} [round {r_i}]", threshold=threshold, options=cfg.options,
                             engine=_round_engine(cfg))
                m = res.summary[CORRECTNESS_KEY].mean
                scores[r.name] = (m if m is not None else -math.inf, {})
            ranked = sorted((r for r in alive if r.name in scores), key=lambda r: -scores[r.name][0])
            keep_n = max(1, math.ceil(len(ranked) / h.eta))
            cutoff = scores[ranked[keep_n - 1].name][0] if ranked else -math.inf
            kept = [r for r in ranked if scores[r.name][0] >= cutoff]  # ties with the cut-off stay
            for r in ranked:
                if r not in kept:
                    r.eliminated_round = r_i
                    r.mean = scores[r.name][0] if math.isfinite(scores[r.name][0]) else None
            info["rounds"].append({"round": r_i, "questions": size, "configs": len(ranked), "kept": len(kept),
                                   "scores": {r.name: scores[r.name][0] for r in ranked}})
            log(f"  halving round {r_i}: {len(ranked)} configurations on {size} questions -> keep {len(kept)}")
            alive = kept
    finally:
        import shutil

        shutil.rmtree(scratch_dir, ignore_errors=True)
    full = len(results) * n_all
    info["survivors"] = [r.name for r in alive]
    info["scored_samples_full_grid"] = full
    info["scored_samples"] = sum(rd["configs"] * rd["questions"] for rd in info["rounds"]) + len(alive) * n_all
    info["scored_samples_saved"] = full - info["scored_samples"]
    info["pipeline_calls_full_grid"] = full
    log(f"  successive halving: {len(alive)} of {len(results)} configurations survive; samples scored "
        f"{info['scored_samples']} instead of {full} (saved {info['scored_samples_saved']})")
    return info


def evaluate_pipeline(dataset: str = "example", pipeline: str = "ragmeter.pipeline:rag",
                      params: Mapping[str, Any] | None = None, *, method: str | None = "semantic_guarded",
                      method_params: Mapping[str, Any] | None = None, metrics: Sequence[Any] = (),
                      name: str | None = None, db: str | Any = None, options: Mapping[str, Any] | None = None,
                      workers: int = 2, cache: bool = True, log: Log | None = None,
                      engine: str = "local", ray_address: str | None = None) -> Any:
    """Run a pipeline once over a dataset's questions and evaluate it as one stored run (what a
    grid does for one configuration): e.g. a deliberately worse ``top_k=1`` run for the gate.

    ``engine``/``ray_address`` choose where the metrics are scored, as in :func:`ragmeter.evaluate`.

    Returns:
        The :class:`~ragmeter.run.runner.EvaluationResult`; the correctness metric's key is
        ``correctness`` (with ``method=None`` only ``metrics`` are computed).
    """
    from ragmeter.io import load
    from ragmeter.pipeline import accepts, load_pipeline
    from ragmeter.run.runner import evaluate
    from ragmeter.store import Store, open_store

    log = log or (lambda msg: None)
    store = db if isinstance(db, Store) else open_store(db)
    p = dict(params or {})
    fn = load_pipeline(pipeline)
    accepts(fn, p)
    data = load(dataset)
    questions = questions_of(data.samples)
    cfg = GridConfig(name=name or "pipeline", dataset=dataset, pipeline=pipeline, grid=[{}], fixed=p,
                     method=(method or "semantic_guarded").replace("correct_", ""),
                     method_params=dict(method_params or {}), metrics=list(metrics),
                     options=dict(options or {}), workers=workers, cache=cache,
                     engine=check_engine(engine), ray_address=ray_address)
    if method is None and not metrics:
        raise ConfigError("give a correctness method or at least one metric")
    threshold, calibration, _cal_run = _calibrate(cfg, data, store, log) if method else (None, None, None)
    stats = PipelineStats()
    outputs = run_pipeline(fn, pipeline, p, questions, store=store, use_cache=cache, workers=workers, stats=stats)
    samples = build_samples(questions, outputs, p)
    entries = ([_correctness_entry(cfg, threshold)] if method else []) + list(metrics)
    res = evaluate(samples, entries, db=store, name=name or f"{pipeline} {_fmt_params(p, list(p))}".strip(),
                   options=dict(options or {}), engine=engine, ray_address=ray_address)
    extra = {"pipeline": {"target": pipeline, "params": p, "calls": stats.calls, "cached": stats.cached,
                          "errors": stats.errors}}
    if calibration:
        extra["calibration"] = calibration
    run = store.get_run(res.run_id)
    store.update_run(res.run_id, extra={**(run.extra or {}), **extra})
    res.extra.update(extra)
    return res

