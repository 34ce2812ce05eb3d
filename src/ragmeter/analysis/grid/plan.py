"""The grid plan: the grid config file (parameters, fixed values, correctness method, metrics,
judge re-ranking, successive halving) and the questions every configuration answers."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragmeter.core.config import load_config
from ragmeter.core.errors import ConfigError
from ragmeter.core.schema import Chunk, Sample
from ragmeter.metrics.correctness.methods import metric_for_method
from ragmeter.run.engines import check_engine

KV_GRID = "grid"
KV_PIPELINE = "pipeline"
CORRECTNESS_KEY = "correctness"
JUDGE_KEY = "judge_correctness"
#: bump when the bundled pipeline's behaviour changes, so cached outputs are not reused
BUNDLED_PIPELINE_VERSION = "1"

Log = Callable[[str], None]
Confirm = Callable[[dict[str, Any]], bool]



# ---- configuration -------------------------------------------------------------------------------

@dataclass
class HalvingConfig:
    """Successive halving: ``eta`` (keep the best 1/eta each round) and the smallest subset."""

    eta: int = 3
    min_questions: int = 8
    seed: int = 0


@dataclass
class GridConfig:
    """A grid search, usually read from a YAML/JSON file (see docs/experiments.md).

    Attributes:
        name: the grid's name (prefix of its runs' names).
        dataset: the questions and ground truth (path or ``example``).
        pipeline: ``module:function`` (default: the bundled ``ragmeter.pipeline:rag``).
        grid: list of ``{param: [values]}`` blocks; the configurations are the union of each
            block's cartesian product.
        fixed: pipeline parameters shared by every configuration.
        method / method_params: the correctness method (``semantic_guarded`` by default).
        metrics: more metrics for every configuration (retrieval, lexical ...).
        top_n: configurations re-evaluated with the LLM judge (0: none).
        alpha: significance level of the noise statements.
        workers: threads running the pipeline.
        cache: reuse stored pipeline outputs keyed by (pipeline, parameters, question).
        halving: successive halving settings, or ``None``.
        options: run options (``judge``, ``embedding_model`` ...).
        engine: where the metrics are scored: ``local`` or ``ray`` (non-judge metrics in blocks on
            a Ray runtime, same values; see docs/scale.md).
        ray_address: ``ray://HOST:10001`` of a Ray cluster (default: a local Ray runtime).
    """

    name: str = "grid"
    dataset: str = "example"
    pipeline: str = "ragmeter.pipeline:rag"
    grid: list[dict[str, list[Any]]] = field(default_factory=list)
    fixed: dict[str, Any] = field(default_factory=dict)
    method: str = "semantic_guarded"
    method_params: dict[str, Any] = field(default_factory=dict)
    metrics: list[Any] = field(default_factory=list)
    top_n: int = 5
    alpha: float = 0.05
    workers: int = 2
    cache: bool = True
    halving: HalvingConfig | None = None
    options: dict[str, Any] = field(default_factory=dict)
    source: str = "<config>"
    engine: str = "local"
    ray_address: str | None = None

    def configurations(self) -> list[dict[str, Any]]:
        """Every parameter combination, in file order, duplicates removed."""
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        for block in self.grid:
            keys = list(block)
            for combo in itertools.product(*(block[k] for k in keys)):
                params = dict(zip(keys, combo, strict=True))
                sig = json.dumps(params, sort_keys=True, default=str)
                if sig not in seen:
                    seen.add(sig)
                    out.append(params)
        return out

    @property
    def varying(self) -> list[str]:
        keys: list[str] = []
        for block in self.grid:
            keys.extend(k for k in block if k not in keys)
        return keys


def parse_grid_config(source: str | Path | dict[str, Any], *, overrides: Mapping[str, Any] | None = None) -> GridConfig:
    """Read a grid config (YAML/JSON file or mapping).

    Keys: ``name``, ``dataset``, ``pipeline``, ``grid`` (a mapping ``param: [values]`` or a list of
    such mappings), ``method`` (a name, or ``{"name": ..., "params": {...}}``), ``metrics``,
    ``options`` and ``experiment`` (``top_n``, ``alpha``, ``workers``, ``cache``, ``fixed``,
    ``halving``: ``true`` or ``{"eta": 3, "min_questions": 8}``, ``engine``: ``local`` or ``ray``,
    ``ray_address``). ``overrides`` (e.g. from the
    command line) replace values in ``experiment``/top level.

    Raises:
        ConfigError: missing or malformed keys, naming the key.
    """
    cfg = load_config(source)
    where = cfg.get("source", "<config>")
    exp = dict(cfg.get("experiment") or {})
    if not isinstance(exp, dict):
        raise ConfigError(f"{where}: 'experiment' must be a mapping")
    raw_grid = cfg.get("grid")
    if raw_grid is None:
        raise ConfigError(f"{where}: a grid search needs 'grid' (param: [values], ...)")
    blocks = raw_grid if isinstance(raw_grid, list) else [raw_grid]
    grid: list[dict[str, list[Any]]] = []
    for b in blocks:
        if not isinstance(b, dict) or not b:
            raise ConfigError(f"{where}: 'grid' must be a mapping param -> list of values (or a list of them)")
        block = {}
        for k, v in b.items():
            vals = v if isinstance(v, list) else [v]
            if not vals:
                raise ConfigError(f"{where}: grid parameter {k!r} has no value")
            block[str(k)] = vals
        grid.append(block)
    method_raw = cfg.get("method", exp.get("method", "semantic_guarded"))
    method_params: dict[str, Any] = {}
    if isinstance(method_raw, dict):
        method_params = dict(method_raw.get("params") or {})
        method_raw = method_raw.get("name")
    method = str(method_raw or "semantic_guarded")
    metric_for_method(method)  # validates
    halving_raw = exp.get("halving")
    halving = None
    if halving_raw:
        h = halving_raw if isinstance(halving_raw, dict) else {}
        halving = HalvingConfig(eta=int(h.get("eta", 3)), min_questions=int(h.get("min_questions", 8)),
                                seed=int(h.get("seed", 0)))
        if halving.eta < 2 or halving.min_questions < 2:
            raise ConfigError(f"{where}: halving needs eta >= 2 and min_questions >= 2")
    g = GridConfig(
        name=str(cfg.get("name") or Path(str(where)).stem or "grid"),
        dataset=str(cfg.get("dataset") or "example"),
        pipeline=str(cfg.get("pipeline") or "ragmeter.pipeline:rag"),
        grid=grid, fixed=dict(exp.get("fixed") or {}), method=method.replace("correct_", ""),
        method_params=method_params, metrics=list(cfg.get("metrics") or []),
        top_n=int(exp.get("top_n", 5)), alpha=float(exp.get("alpha", 0.05)),
        workers=int(exp.get("workers", 2)), cache=bool(exp.get("cache", True)), halving=halving,
        options=dict(cfg.get("options") or {}), source=str(where),
        engine=str(exp.get("engine") or "local"), ray_address=exp.get("ray_address") or None)
    for k, v in (overrides or {}).items():
        if v is None:
            continue
        if k == "judge":
            g.options["judge"] = v
        elif k == "set":
            for pk, pv in dict(v).items():
                g.fixed[pk] = pv
                for block in g.grid:
                    block.pop(pk, None)
            g.grid = [b for b in g.grid if b] or [{}]
        elif hasattr(g, k):
            setattr(g, k, v)
        else:
            raise ConfigError(f"unknown grid setting {k!r}")
    if g.top_n < 0:
        raise ConfigError(f"{where}: top_n must be >= 0")
    if not 0 < g.alpha < 1:
        raise ConfigError(f"{where}: alpha must be in (0, 1)")
    if g.workers < 1:
        raise ConfigError(f"{where}: workers must be >= 1")
    check_engine(g.engine)
    if g.dataset != "example" and not Path(g.dataset).is_absolute() and where not in ("<config>",):
        candidate = Path(str(where)).parent / g.dataset
        if candidate.exists() and not Path(g.dataset).exists():
            g.dataset = str(candidate)
    return g


# ---- questions -----------------------------------------------------------------------------------

@dataclass
class Question:
    """One distinct question of the dataset with its ground truth (answers are the pipeline's)."""

    id: str
    text: str
    references: list[str]
    negative_references: list[str]
    relevant: list[Chunk] | None
    metadata: dict[str, Any]


def questions_of(samples: Sequence[Sample]) -> list[Question]:
    """The dataset's distinct questions, in order of first appearance.

    Several samples asking the same question (e.g. different answers with human labels) become
    one question; its id is ``metadata.question_id`` when all of them agree, else the first
    sample's id. Human labels are *not* carried over: they judge the dataset's answers, not the
    pipeline's.

    Raises:
        ConfigError: a sample without a question.
    """
    groups: dict[str, list[Sample]] = {}
    for s in samples:
        if not s.question:
            raise ConfigError(f"sample {s.id!r} has no question: a grid search runs the pipeline on questions")
        groups.setdefault(s.question, []).append(s)
    out: list[Question] = []
    used: set[str] = set()
    for text, group in groups.items():
        first = group[0]
        qids = {str(s.metadata.get("question_id")) for s in group if s.metadata.get("question_id") is not None}
        qid = qids.pop() if len(qids) == 1 and len(group) == sum(
            1 for s in group if s.metadata.get("question_id") is not None) else first.id
        if qid in used:
            qid = first.id
        used.add(qid)
        refs = list(dict.fromkeys(r for s in group for r in s.references))
        negs = list(dict.fromkeys(r for s in group for r in s.negative_references))
        relevant = next((s.relevant for s in group if s.relevant is not None), None)
        meta = {k: v for k, v in first.metadata.items()
                if k not in {"answer_kind", "label_reason", "question_id"}}
        out.append(Question(qid, text, refs, negs, relevant, meta))
    return out
