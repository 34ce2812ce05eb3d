"""Reading a text file a person named (a ratings CSV, a review sheet, a rubric, a config): every
way it can fail -- missing, a folder, unreadable, not UTF-8, a CSV field past the size limit --
is a :class:`~ragmeter.core.errors.DatasetError` that names the file (exit status 2), never a traceback.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from ragmeter.core.errors import DatasetError


def read_text(path: str | Path, what: str = "file") -> str:
    """The UTF-8 text of ``path`` (a byte-order mark is dropped).

    Args:
        path: the file.
        what: what the file is, for the messages (``"ratings file"``, ``"rubric"`` ...).

    Raises:
        DatasetError: naming the file and what is wrong with it.
    """
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise DatasetError(f"cannot read the {what}: no such file", file=str(p)) from None
    except IsADirectoryError:
        raise DatasetError(f"cannot read the {what}: it is a folder", file=str(p)) from None
    except UnicodeDecodeError as exc:
        raise DatasetError(f"cannot read the {what}: not UTF-8 text ({exc.reason} at byte {exc.start}); "
                           "save it as UTF-8", file=str(p)) from None
    except OSError as exc:
        raise DatasetError(f"cannot read the {what}: {exc.strerror or exc}", file=str(p)) from None


def csv_delimiter(text: str, default: str = ",") -> str:
    """The delimiter of a CSV text: ``default``, or ``;`` when the header line has no comma but has
    a semicolon -- Excel saves "CSV" with semicolons where the decimal separator is a comma (German,
    French, Italian ... settings), and such a header read with commas is one column named
    ``id;review;question``.

    >>> csv_delimiter("question;answer\nQ;A\n"), csv_delimiter("question,answer\n")
    (';', ',')
    """
    end = text.find("\n")
    first = text[:end] if end >= 0 else text
    return ";" if default == "," and "," not in first and ";" in first else default


def csv_rows(text: str, source: str | Path) -> Iterator[list[str]]:
    """The rows of a CSV text (comma- or, from Excel in some locales, semicolon-delimited:
    :func:`csv_delimiter`); a malformed row (a field past the csv module's size limit, a stray
    quote in strict files) is a :class:`DatasetError` naming the file and line."""
    reader = csv.reader(text.splitlines(), delimiter=csv_delimiter(text))
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise DatasetError(f"not a CSV file ({exc})", file=str(source), line=reader.line_num) from None
        yield row


def csv_dicts(text: str, source: str | Path) -> Iterator[dict[str, str]]:
    """:func:`csv_rows` as dicts keyed by the header row (missing cells are ``""``)."""
    rows = csv_rows(text, source)
    header = next(rows, None)
    if header is None:
        return
    for row in rows:
        yield {h: (row[i] if i < len(row) else "") for i, h in enumerate(header)}
