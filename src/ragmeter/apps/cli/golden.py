"""``ragmeter corpus ...``, ``ragmeter golden generate`` and ``ragmeter dataset ...``: from a
folder of documents to a reviewed, versioned golden dataset with exact spans."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ragmeter.apps.cli._common import DB_HELP, console, err_console, get_store
from ragmeter.apps.cli._outputs import check_output_name
from ragmeter.apps.cli._params import number
from ragmeter.core.counts import count

corpus_app = typer.Typer(name="corpus", no_args_is_help=True,
                         help="Documents for golden datasets: add txt/md/html/pdf files, list them.")
golden_app = typer.Typer(name="golden", no_args_is_help=True,
                         help="Generate golden samples from a corpus with an LLM, filtered, with exact spans.")
dataset_app = typer.Typer(name="dataset", no_args_is_help=True,
                          help="Stored datasets: list, show, export, diff versions, tag, review by CSV.")


def register(app: typer.Typer) -> None:
    app.add_typer(corpus_app, name="corpus")
    app.add_typer(golden_app, name="golden")
    app.add_typer(dataset_app, name="dataset")


@corpus_app.command("add")
def corpus_add(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders (searched recursively).")],
    name: Annotated[str, typer.Option("--name", "-n", help="The corpus name.")],
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Add documents to a corpus. Each file's source name is its path relative to the folder
    given; a changed file becomes a new version, an unchanged one is skipped."""
    from ragmeter.golden.corpus import add_documents

    rep = add_documents(get_store(db), name, paths)
    console.print(f"corpus {name}: {len(rep['added'])} added, {len(rep['updated'])} updated (new version), "
                  f"{len(rep['unchanged'])} unchanged")
    for key in ("added", "updated"):
        for src in rep[key]:
            console.print(f"  {key:<8} {src}", highlight=False)


@corpus_app.command("list")
def corpus_list(
    name: Annotated[str | None, typer.Argument(help="A corpus: list its documents.")] = None,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """The corpora in the store, or one corpus's documents (version, characters, hash)."""
    from ragmeter.golden.corpus import corpus_documents, list_corpora

    store = get_store(db, must_exist=True)
    if name is None:
        names = list_corpora(store)
        if not names:
            console.print("no corpus yet: ragmeter corpus add DIR --name NAME")
        for n in names:
            console.print(f"{n}: {len(corpus_documents(store, n))} documents")
        return
    for d in corpus_documents(store, name):
        console.print(f"{d.path}  v{d.version}  {len(d.text)} chars  {d.format}  {d.content_hash[:12]}",
                      highlight=False)


@golden_app.command("generate")
def golden_generate(
    corpus: Annotated[str, typer.Option("--corpus", help="The corpus to generate from (ragmeter corpus add).")],
    n: Annotated[int, typer.Option("--n", help="Questions to generate (before filtering).", parser=number(1, 10_000_000, integer=True))],
    name: Annotated[str, typer.Option("--name", help="Dataset name; a new version if it exists.")],
    judge: Annotated[str, typer.Option("--judge", help="Generator model as provider:model (openai:..., anthropic:..., google:..., ollama:...).")],
    judge_base_url: Annotated[str | None, typer.Option("--judge-base-url", help="Endpoint of an OpenAI-compatible model.")] = None,
    judge_api_key_env: Annotated[str | None, typer.Option("--judge-api-key-env", help="Environment variable that holds the API key.")] = None,
    types: Annotated[str | None, typer.Option("--types", help="Mix, e.g. single_hop=0.5,multi_hop=0.2,comparison=0.1,summary=0.1,unanswerable=0.1 (the default).")] = None,
    chunker: Annotated[str, typer.Option(help="fixed, sentence, paragraph or markdown.")] = "paragraph",
    chunk_size: Annotated[int, typer.Option(help="Characters per passage at most.", parser=number(20, 10_000_000, integer=True))] = 800,
    complexity: Annotated[str, typer.Option(help="simple, moderate or hard.")] = "moderate",
    style: Annotated[str, typer.Option(help="natural, formal, casual, keywords or misspelled.")] = "natural",
    persona: Annotated[str | None, typer.Option(help="Who asks, e.g. 'a first-time passenger'.")] = None,
    language: Annotated[str | None, typer.Option(help="Language code of the questions (e.g. pt).")] = None,
    examples: Annotated[Path | None, typer.Option(help="JSONL of example questions (question, answer) to imitate.")] = None,
    references: Annotated[int, typer.Option(help="Alternative correct answers per question.", parser=number(0, 20, integer=True))] = 1,
    negatives: Annotated[int, typer.Option(help="Plausible wrong answers per question.", parser=number(0, 20, integer=True))] = 1,
    verify: Annotated[bool, typer.Option("--verify/--no-verify", help="Judge checks: spans support the answer; answerable from the spans alone.")] = True,
    seed: Annotated[int, typer.Option(help="Seed of the passage and type draw.", parser=number(0, integer=True))] = 0,
    tag: Annotated[str | None, typer.Option(help="Tag the new version.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the planned calls and cost; call nothing, store nothing.")] = False,
    max_cost: Annotated[float | None, typer.Option("--max-cost", help="Stop generating once this many USD are spent.", parser=number(0))] = None,
    concurrency: Annotated[int | None, typer.Option(help="Requests in flight at once.", parser=number(1, 10_000, integer=True))] = None,
    batch: Annotated[bool, typer.Option("--batch", help="Send each round of requests (generation, then the checks) through the provider's batch API (OpenAI, Anthropic): the batch price, results within 24 h each (docs/judge.md#batch).")] = False,
    batch_fallback: Annotated[str | None, typer.Option("--batch-fallback", help="none (default: a request the batch did not answer gives no candidate, with the provider's reason) or online (it is sent online).")] = None,
    no_wait: Annotated[bool, typer.Option("--no-wait", help="With --batch: submit the batch and exit 3; the same command run again collects it.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Generate questions, reference answers, negative answers and exact supporting spans from a
    corpus, run the filters (each prints what it removed and why) and store the kept samples as a
    dataset version. Calls are cached: a re-run or an interrupted run resumes for free."""
    from ragmeter.golden import generate

    shots: list[dict[str, str]] = []
    if examples is not None:
        from ragmeter.io import load

        shots = [{"question": s.question or "", "answer": s.reference or ""} for s in load(str(examples)).samples]
    opts: dict[str, Any] = {k: v for k, v in {"base_url": judge_base_url, "api_key_env": judge_api_key_env,
                                              "max_cost": max_cost, "concurrency": concurrency}.items()
                            if v is not None}
    from ragmeter.apps.cli.batches import batch_options
    from ragmeter.llm.batch import BatchPending

    opts.update(batch_options(batch, batch_fallback, no_wait, prefix=""))
    store = get_store(db)
    progress = None
    if not as_json and not dry_run:
        import contextlib

        from ragmeter.run.runner import _rich_progress

        stack = contextlib.ExitStack()
        progress = stack.enter_context(_rich_progress(True))
    try:
        res = generate(store, corpus=corpus, n=n, name=name, judge=judge, judge_options=opts, types=types,
                       chunker=chunker, chunk_size=chunk_size, complexity=complexity, style=style,
                       persona=persona, language=language, examples=shots, n_alternatives=references,
                       n_negatives=negatives, verify=verify, seed=seed, dry_run=dry_run, progress=progress,
                       tag=tag)
    except BatchPending as exc:  # --batch --no-wait: submitted and stored, not a failure
        err_console.print(f"judge batch {', '.join(exc.batch_ids)} submitted: `ragmeter batches` shows it; "
                          "this command run again collects it (exit 3)", style="yellow", markup=False,
                          highlight=False)
        raise typer.Exit(3) from None
    finally:
        if progress is not None:
            stack.close()
    if dry_run:
        if as_json:
            typer.echo(json.dumps(res.plan, default=str))
        else:
            p = res.plan or {}
            cost = p.get("est_cost_usd")
            cost_text = f"${cost:.4f}" if cost is not None else "cost unknown (no price for this model)"
            if p.get("est_batch_cost_usd") is not None:
                cost_text += f" online, ${p['est_batch_cost_usd']:.4f} with --batch"
            console.print(f"dry run: {p.get('planned_calls')} generation calls planned, about "
                          f"{p.get('est_input_tokens')} input and {p.get('est_output_tokens')} output tokens, "
                          f"{cost_text}; nothing called, nothing stored")
            if p.get("note"):
                console.print(p["note"])
        return
    if as_json:
        typer.echo(json.dumps({"dataset": res.dataset.ref if res.dataset else None, "generated": res.generated,
                               "kept": res.kept, "filters": res.reports, "judge": res.judge}, default=str))
    else:
        console.print(f"generated {res.generated} candidates with {res.judge.get('judge')} "
                      f"({res.judge.get('calls')} calls, {res.judge.get('cached')} from cache)")
        for r in res.reports:
            console.print(f"  {r['filter']:<15} checked {r['checked']:>4}  removed {r['removed']:>4}", highlight=False)
            for sid, why in list(r["reasons"].items())[:3]:
                console.print(f"      {sid}: {why}", highlight=False, soft_wrap=False)
            if r["removed"] > 3:
                console.print(f"      … {r['removed'] - 3} more (ragmeter dataset show {name} --filters)")
        if res.dataset is not None:
            console.print(f"kept {res.kept}: stored as {res.dataset.ref}")
    if res.dataset is None:
        err_console.print("no sample survived the filters: nothing stored")
        raise typer.Exit(3)


@dataset_app.command("list")
def dataset_list(db: Annotated[str | None, typer.Option(help=DB_HELP)] = None) -> None:
    """Every dataset version: samples (rejected ones excluded), status, tag, hash."""
    from ragmeter.io.stored import list_datasets

    rows = list_datasets(get_store(db, must_exist=True))
    if not rows:
        console.print("no dataset yet: ragmeter golden generate ... or ragmeter dataset import")
        return
    from rich import box
    from rich.table import Table

    # a table, not padded lines: at 80 columns a long NAME@VERSION or tag wraps in its cell (the
    # padded line was 82 characters and put the date on a line of its own)
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    # the reference (NAME@VERSION) is what a user types next: it gets the room the one-line columns
    # leave, less at most a third for the tags
    room = console.size.width - 41 - 2 * 6  # samples, status, hash, created and the gaps
    tags = max((len(v.tag or "") for v in rows), default=0)
    t.add_column("dataset", overflow="fold",
                 width=min(max(len(v.ref) for v in rows), max(12, room - min(tags, room // 3))))
    t.add_column("samples", justify="right", no_wrap=True)
    t.add_column("status", no_wrap=True)
    t.add_column("tag", overflow="fold")
    t.add_column("hash", no_wrap=True)
    t.add_column("created", no_wrap=True)
    for v in rows:
        t.add_row(v.ref, str(v.n_samples), v.status, v.tag or "", v.content_hash[:12], f"{v.created_at:%Y-%m-%d %H:%M}")
    console.print(t, highlight=False)


@dataset_app.command("import")
def dataset_import(
    data: Annotated[str, typer.Argument(help="A dataset file (.jsonl/.csv/.parquet) in any format `ragmeter eval` reads.")],
    name: Annotated[str, typer.Option("--name", help="Dataset name; a new version if it exists.")],
    source: Annotated[str, typer.Option(help="metadata.source of samples that have none: expert, real_log, synthetic ...")] = "expert",
    tag: Annotated[str | None, typer.Option(help="Tag the new version.")] = None,
    map_: Annotated[list[str] | None, typer.Option("--map", help="field=column for columns the aliases miss (repeatable).")] = None,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Store a hand-made (or exported) dataset as a versioned dataset, to review, diff and
    evaluate as dataset:NAME."""
    from ragmeter.golden.datasets import save_dataset
    from ragmeter.io import load

    ds = load(data, mapping=map_ or None)
    rows = []
    for s in ds.samples:
        d = s.model_dump(mode="json", exclude_none=True)
        d.setdefault("metadata", {}).setdefault("source", source)
        rows.append(d)
    v = save_dataset(get_store(db), name, rows, info={"imported_from": ds.source}, tag=tag)
    console.print(f"stored {count(len(rows), 'sample')} as {v.ref}")


@dataset_app.command("show")
def dataset_show(
    ref: Annotated[str, typer.Argument(help="NAME, NAME@VERSION or NAME@TAG.")],
    filters: Annotated[bool, typer.Option("--filters", help="Every removed sample with its reason.")] = False,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """A dataset version: how it was made, filter counts, samples per type and review state."""
    from collections import Counter

    from ragmeter.io.stored import resolve, samples_of

    store = get_store(db, must_exist=True)
    v = resolve(store, ref)
    rows = samples_of(store, v.ref, include_rejected=True)
    console.print(f"{v.ref} ({v.status}{', tag ' + v.tag if v.tag else ''}): {count(v.n_samples, 'sample')}, "
                  f"hash {v.content_hash[:16]}", highlight=False)
    gen = v.info.get("generator")
    if gen:
        console.print(f"generated by {gen.get('model')} (prompt {gen.get('prompt_version')}) from corpus "
                      f"{v.info.get('corpus')}: {v.info.get('generated')} candidates, {v.info.get('kept')} kept")
    for r in v.info.get("filters", []):
        console.print(f"  {r['filter']:<15} checked {r['checked']:>4}  removed {r['removed']:>4}", highlight=False)
        if filters:
            for sid, why in r["reasons"].items():
                console.print(f"      {sid}: {why}", highlight=False)
    types = Counter((d.get("metadata") or {}).get("type", "—") for d in rows if d["_review"] != "rejected")
    review = Counter(d["_review"] for d in rows)
    console.print("types: " + ", ".join(f"{k} {c}" for k, c in sorted(types.items())))
    console.print("review: " + ", ".join(f"{k} {c}" for k, c in sorted(review.items())))


@dataset_app.command("export")
def dataset_export(
    ref: Annotated[str, typer.Argument(help="NAME, NAME@VERSION or NAME@TAG.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="JSONL file to write.")],
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Write the samples (rejected ones left out) as JSONL: question, references,
    negative_references, relevant spans (source, start, end, text) and metadata."""
    from ragmeter.golden.datasets import export_jsonl

    check_output_name(output, "JSONL", (".jsonl", ".ndjson", ".json"), "--output")
    n = export_jsonl(get_store(db, must_exist=True), ref, output)
    console.print(f"wrote {count(n, 'sample')} to {output}")


@dataset_app.command("diff")
def dataset_diff(
    a: Annotated[str, typer.Argument(help="The older version (NAME@1).")],
    b: Annotated[str, typer.Argument(help="The newer version (NAME@2, or NAME for the newest).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Samples added, removed (rejected in review included) and changed between two versions."""
    from ragmeter.golden.datasets import diff

    d = diff(get_store(db, must_exist=True), a, b)
    if as_json:
        from ragmeter.core.terminal import json_for_terminal

        typer.echo(json_for_terminal(json.dumps(d, ensure_ascii=False, default=str)))
        return
    console.print(f"{d['a']} → {d['b']}: {len(d['added'])} added, {len(d['removed'])} removed, "
                  f"{len(d['changed'])} changed", highlight=False)
    for sid in d["added"]:
        console.print(f"  + {sid}", highlight=False)
    for sid in d["removed"]:
        console.print(f"  - {sid}" + ("  (rejected in review)" if sid in d["rejected"] else ""), highlight=False)
    for c in d["changed"]:
        what = ", ".join(c["fields"]) or "no field"
        rev = f"; review {c['review'][0]} → {c['review'][1]}" if c["review"] else ""
        console.print(f"  ~ {c['id']}: {what}{rev}", highlight=False)


@dataset_app.command("tag")
def dataset_tag(
    ref: Annotated[str, typer.Argument(help="NAME@VERSION (or NAME for the newest).")],
    tag: Annotated[str, typer.Argument(help="The tag, e.g. reviewed or v2026-11.")],
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Tag a dataset version (usable as NAME@TAG)."""
    from ragmeter.golden.datasets import tag_version

    v = tag_version(get_store(db, must_exist=True), ref, tag)
    console.print(f"{v.ref} tagged {v.tag}")


@dataset_app.command("finalise")
def dataset_finalise(
    name: Annotated[str, typer.Argument(help="The dataset whose review draft becomes final.")],
    tag: Annotated[str | None, typer.Option(help="Tag the final version.")] = None,
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Freeze the review draft as a final version (its content hash is recomputed)."""
    from ragmeter.golden.datasets import finalise

    v = finalise(get_store(db, must_exist=True), name, tag)
    console.print(f"{v.ref} final ({count(v.n_samples, 'sample')}, hash {v.content_hash[:12]})")


@dataset_app.command("review-export")
def dataset_review_export(
    name: Annotated[str, typer.Argument(help="The dataset to review.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="CSV file to write.")],
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """A review sheet: one row per sample, a `review` column to fill with accepted / rejected,
    editable question, references and spans (JSON)."""
    from ragmeter.golden.datasets import review_csv

    check_output_name(output, "CSV", (".csv", ".txt"), "--output",
                      "a spreadsheet opens the .csv as it is")
    output.write_text(review_csv(get_store(db, must_exist=True), name), encoding="utf-8")
    console.print(f"wrote {output}; fill the review column, edit cells, then: ragmeter dataset review-import {name} {output}")


@dataset_app.command("review-import")
def dataset_review_import(
    name: Annotated[str, typer.Argument(help="The dataset reviewed.")],
    sheet: Annotated[Path, typer.Argument(help="The filled-in review CSV.")],
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Apply a review sheet to the dataset's draft version."""
    from ragmeter.golden.datasets import apply_review_csv

    counts = apply_review_csv(get_store(db, must_exist=True), name, sheet)
    console.print(", ".join(f"{k} {v}" for k, v in counts.items()))
