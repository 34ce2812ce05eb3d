"""The layout of the CLI's help: ``ragmeter --help`` lists every command under one of its sections,
and an example block in any command's help (a YAML suite, a command line) keeps its lines."""

from __future__ import annotations

import re

import click
import typer

from ragmeter.apps.cli import SECTIONS, app


def _root() -> click.Group:
    return typer.main.get_command(app)


def _walk(cmd: click.Command, path: tuple[str, ...]):
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name, sub in cmd.commands.items():
            yield from _walk(sub, (*path, name))


def _help(cmd: click.Command, path: tuple[str, ...], width: int = 80) -> str:
    ctx = click.Context(cmd, info_name=" ".join(path), terminal_width=width, max_content_width=width)
    return cmd.get_help(ctx)


def test_every_command_is_in_a_section_once() -> None:
    root = _root()
    names = {n for n, c in root.commands.items() if not c.hidden}
    listed = [n for _, ns in SECTIONS for n in ns]
    assert len(listed) == len(set(listed)), "a command listed in two sections"
    assert names - set(listed) == set(), "commands missing from SECTIONS (they show under 'Other commands')"
    assert set(listed) - names == set(), "SECTIONS names commands that do not exist"


def test_top_level_help_shows_the_sections_in_order_and_fits_80_columns() -> None:
    text = _help(_root(), ("ragmeter",))
    heads = [line[:-1] for line in text.splitlines() if line and not line.startswith(" ") and line.endswith(":")]
    assert heads == ["Options", *(t for t, _ in SECTIONS)]
    assert "Other commands" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    for _, ns in SECTIONS:
        for n in ns:
            assert f"\n  {n} " in text
    # one name column for every section: each description starts at the same column
    names = set(_root().commands)
    starts = {m.end(2) for line in text.splitlines()
              if (m := re.match(r"  (\S+)(\s+)\S", line)) and m.group(1) in names}
    assert len(starts) == 1


def _indented_paragraphs(text: str):
    for para in text.split("\n\n"):
        lines = para.strip("\n").split("\n")
        if len(lines) > 1 and any(line.startswith("    ") for line in lines):
            yield lines


def test_example_blocks_in_help_are_not_rewrapped() -> None:
    """click re-wraps a paragraph into running text unless it starts with ``\\b``: a block with
    indented lines (a YAML example, commands) must start with it, in every command's help."""
    bad = []
    for path, cmd in _walk(_root(), ("ragmeter",)):
        for attr in ("help", "epilog"):
            for lines in _indented_paragraphs(getattr(cmd, attr) or ""):
                if not lines[0].startswith("\b"):
                    bad.append(f"{' '.join(path)} ({attr}): {lines[0].strip()[:60]}")
    assert bad == []


def test_the_suite_example_keeps_its_lines() -> None:
    root = _root()
    text = _help(root.commands["test"], ("ragmeter", "test"))
    assert text.splitlines()[2].strip().startswith("Run a test suite")
    assert "      dataset: example\n      metrics: [token_f1, mrr]\n" in text
