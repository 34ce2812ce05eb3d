"""``ragmeter trec``: trec_eval-compatible evaluation of a TREC run against TREC qrels."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from ragmeter.apps.cli._params import number


def register(app: typer.Typer) -> None:
    app.command("trec", context_settings={"help_option_names": ["-h", "--help"]})(trec_cmd)


def trec_cmd(
    qrels: Annotated[Path, typer.Argument(help="Qrels file: 'qid iter docid rel' lines.")],
    run: Annotated[Path, typer.Argument(help="Run file: 'qid Q0 docid rank score tag' lines.")],
    measure: Annotated[list[str] | None, typer.Option(
        "--measure", "-m",
        help="Measure (repeatable): map, P_5 or P.5,10, recall_100, ndcg_cut_10, ndcg, recip_rank, "
             "Rprec, success_1, map_cut_10, bpref, gm_map, iprec_at_recall, num_ret, num_rel, "
             "num_rel_ret, set_P, set_recall, set_F, num_nonrel_judged_ret, or 'official' (default).")] = None,
    query: Annotated[bool, typer.Option("--query_eval_wanted", "-q",
                                        help="Also print every query's values.")] = False,
    level: Annotated[int, typer.Option("--level_for_rel", "-l",
                                       help="Minimum relevance grade of a relevant document.", parser=number(-2**31, 2**31 - 1, integer=True))] = 1,
    complete: Annotated[bool, typer.Option(
        "--complete_rel_info_wanted", "-c",
        help="Average over every qrels query; queries without results score 0 and, with -q, get their own lines (as trec_eval 10.0).")] = False,
    max_docs: Annotated[int | None, typer.Option(
        "--Max_retrieved_per_topic", "-M", help="Evaluate only the top N documents of each query.", parser=number(0, 2**31 - 1, integer=True))] = None,
    no_summary: Annotated[bool, typer.Option("--nosummary", "-n", help="Do not print the 'all' lines.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead.")] = False,
) -> None:
    """Evaluate RUN against QRELS exactly as trec_eval 9.0 does, with the same output format.

    Documents are ranked by score (ties: docid descending), grades >= the level are relevant,
    unjudged documents are non-relevant, queries missing from either file are skipped (see -c).
    """
    import os

    if "pyarrow" not in sys.modules and "ARROW_DEFAULT_MEMORY_POOL" not in os.environ:
        # pyarrow's default allocator (mimalloc) keeps ~50 MB of segments around; this command's
        # buffers are few and large, which the system allocator serves as well (same speed,
        # measured). Only in a process of its own: a host that loaded pyarrow keeps its pool.
        import pyarrow as pa

        pa.set_memory_pool(pa.system_memory_pool())
    from ragmeter.apps.trec import evaluate

    result = evaluate(qrels, run, measure or ["official"], relevance_level=level, complete=complete,
                      max_docs=max_docs)
    if as_json:
        payload = result.to_dict(per_query=query)
        payload.update({"qrels": str(qrels), "run": str(run), "measures": list(result.summary)})
        typer.echo(json.dumps(payload))
        return
    # written in pieces of thousands of queries, each formatted column-wise in one go
    from ragmeter.core.terminal import escape_controls

    for text in result.text(per_query=query, summary=not no_summary):
        sys.stdout.write(escape_controls(text))  # ids are the files' words: shown, never obeyed
    sys.stdout.flush()
