"""Output files a command writes in one format: a name whose suffix says another format (JSONL text
in ``rows.parquet``, CSV in ``review.xlsx``) makes a file every reader of that format refuses, so
it is a usage error before anything is written."""

from __future__ import annotations

from pathlib import Path

import typer

#: suffixes that name a file format, and the format's name for messages
FORMAT_SUFFIXES = {".csv": "CSV", ".tsv": "TSV", ".parquet": "Parquet", ".pq": "Parquet", ".jsonl": "JSONL",
                   ".ndjson": "JSONL", ".json": "JSON", ".xlsx": "Excel", ".xls": "Excel", ".html": "HTML", ".htm": "HTML",
                   ".pdf": "PDF", ".png": "PNG", ".svg": "SVG", ".md": "Markdown", ".xml": "XML",
                   ".yaml": "YAML", ".yml": "YAML"}


def check_output_name(path: Path | None, writes: str, accepts: tuple[str, ...], option: str,
                      instead: str = "") -> None:
    """Stop with a usage error (exit 2) when ``path``'s suffix names a format other than the one the
    command ``writes`` (any suffix in ``accepts``, or one that names no format, is fine).

    Args:
        path: the output file (``None``: none asked for).
        writes: the format written, for the message ("JSONL").
        accepts: the suffixes of that format (".jsonl", ".ndjson").
        option: the option that named the file ("--out").
        instead: a note in brackets after the message (how to get the other format).
    """
    if path is None:
        return
    suffix = path.suffix.lower()
    if suffix in accepts or suffix not in FORMAT_SUFFIXES:
        return
    raise typer.BadParameter(f"{option} writes {writes}, not {FORMAT_SUFFIXES[suffix]}: name it "
                             f"{path.stem}{accepts[0]}" + (f" ({instead})" if instead else ""),
                             param_hint=f"'{option}'")
