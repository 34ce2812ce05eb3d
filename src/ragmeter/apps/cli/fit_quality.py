"""``ragmeter fit-quality``: fit the ``quality_offline`` model on a user's human labels and write it
to a file that ``--metrics quality_offline --option quality_model=FILE`` uses."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ragmeter.apps.cli._common import console, fail
from ragmeter.core.counts import count


def register(app: typer.Typer) -> None:
    app.command("fit-quality")(fit_quality_cmd)


def fit_quality_cmd(
    data: Annotated[str, typer.Argument(metavar="LABELS", help="Human-labelled file (.jsonl/.json/.csv/.parquet, gzipped or not) "
                                               "with answer, reference(s) and a label per row, or 'example-human'.")],
    label: Annotated[str, typer.Option("--label", help="The label column, or several (one per rater, "
                                       "comma-separated: their mean is fitted).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the model (JSON).")] = Path("quality_model.json"),
    groups: Annotated[str | None, typer.Option("--groups", help="Field (of a row's metadata, or id / question) "
                                               "whose rows share a cross-validation fold. Default: rows with the "
                                               "same references (the same question).")] = None,
    label_range: Annotated[str | None, typer.Option("--label-range", help="LOW,HIGH of the label scale mapped to "
                                                    "0-1 (default: the labels' own min and max).")] = None,
    rater: Annotated[str | None, typer.Option("--rater", help="Column naming the rater in a long layout.")] = None,
    map_: Annotated[list[str] | None, typer.Option("--map", help="field=column for columns the aliases miss (repeatable).")] = None,
    fmt_: Annotated[str | None, typer.Option("--format", help="File format when the suffix does not say.")] = None,
    option: Annotated[list[str] | None, typer.Option("--option", help="key=value embedding option "
                                                     "(embedding_model_paths, embedding_device, language).")] = None,
) -> None:
    """Fit quality_offline (ridge regression over token_f1, semantic_similarity, BERTScore and claim
    features) to human labels, report its grouped cross-validated agreement (each item predicted by a
    model fitted on folds without its group), and write the model. Use it with `ragmeter eval DATA
    --metrics quality_offline --option quality_model=FILE`.
    """
    from ragmeter.analysis.meta_eval.reader import read_labels
    from ragmeter.analysis.quality_fit import MIN_ITEMS, fit_quality_model, groups_of, labelled_features
    from ragmeter.apps.cli.core import _parse_value
    from ragmeter.core.errors import RagmeterError
    from ragmeter.io.quality_model import write_quality_model

    rng = None
    if label_range is not None:
        try:
            rng = [float(x) for x in label_range.split(",")]
        except ValueError:
            rng = []
        if len(rng) != 2 or not rng[0] < rng[1] or any(x != x or abs(x) == float("inf") for x in rng):
            raise fail(f"--label-range: give LOW,HIGH with LOW < HIGH (e.g. 0,100), got {label_range!r}")
    opts = {}
    for kv in option or []:
        k, sep, v = kv.partition("=")
        if not sep or not k.strip():
            raise fail(f"--option: expected key=value, got {kv!r}")
        opts[k.strip()] = _parse_value(v)
    from ragmeter.core.errors import ConfigError
    from ragmeter.run.option_keys import check_option_keys

    try:
        check_option_keys(opts, "--option")  # a misspelt embedding option would be ignored
    except ConfigError as exc:
        raise fail(str(exc)) from None
    if not out.parent.is_dir():
        raise fail(f"--out: folder {out.parent} does not exist")
    try:
        labelled = read_labels(data, label=label, rater=rater, mapping=map_, fmt=fmt_)
        if len(labelled.items) < MIN_ITEMS:
            raise fail(f"{labelled.source}: {count(len(labelled.items), 'labelled item')} with label {label!r}; fitting a quality "
                       f"model needs at least {MIN_ITEMS}")
        missing = [i for i, s in enumerate(labelled.samples) if not s.answer or not s.references]
        if missing:
            i = missing[0]
            line = f", line {labelled.lines[i]}" if i < len(labelled.lines) else ""
            what = "answer" if not labelled.samples[i].answer else "reference"
            raise fail(f"{labelled.source}{line}, field {what!r}: missing or empty ({count(len(missing), 'row')} like it); "
                       "every row needs an answer and a reference")
        group_keys, how = groups_of(labelled.samples, groups, labelled.lines, labelled.source)
        human = labelled.human
        if rng is not None:
            _check_range(human, rng, labelled)
        x = labelled_features(labelled.samples, opts)
        model = fit_quality_model(x, human, group_keys, label=labelled.label, source=labelled.source, groups_how=how,
                                  label_range=rng)
        write_quality_model(model, out)
    except RagmeterError as exc:
        raise fail(str(exc), exc.exit_code) from None
    cv = model["cv"]
    console.print(f"fitted quality_offline on {model['n']} items of {labelled.source} (label {labelled.label!r}, scaled "
                  f"{model['label_range'][0]:g}-{model['label_range'][1]:g} to 0-1), ridge alpha {model['alpha']:g}",
                  highlight=False, soft_wrap=True)
    console.print(f"cross-validated ({cv['folds']} folds, {cv['n_groups']} groups by {cv['groups']}): Pearson "
                  f"{cv['pearson']:.3f}, Spearman {cv['spearman']:.3f}, Kendall {cv['kendall']:.3f}",
                  highlight=False, soft_wrap=True)
    console.print(f"wrote {out}; use it with --metrics quality_offline --option quality_model={out}",
                  highlight=False, soft_wrap=True)


def _check_range(human: Any, rng: list[float], labelled: Any) -> None:
    """Every label inside --label-range: one outside would be clipped to 0 or 1 and fitted as such."""
    import numpy as np

    y = np.asarray(human, dtype=float)
    outside = np.flatnonzero((y < rng[0]) | (y > rng[1]))
    if outside.size:
        i = int(outside[0])
        line = f", line {labelled.lines[i]}" if i < len(labelled.lines) else ""
        raise fail(f"{labelled.source}{line}, field {labelled.label!r}: label {y[i]:g} is outside --label-range "
                   f"{rng[0]:g},{rng[1]:g} ({count(int(outside.size), 'label')} outside, labels "
                   f"{y.min():g} to {y.max():g}); give the scale the labels are on")
