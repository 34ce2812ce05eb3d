"""Render the report and the dashboard pages with jinja2 (autoescaping every value).

The one-file report inlines its CSS, its small table script and plotly.js (the cartesian partial
bundle, :data:`PLOTLY_PARTIAL`), and carries a
Content-Security-Policy that allows only those exact scripts (by hash) and no network at all; the
data behind the charts travels in ``<script type="application/json">`` blocks whose text is
escaped so that evaluated text such as ``</script>`` cannot end the block.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from markupsafe import Markup

from ragmeter._version import __version__
from ragmeter.apps.report.bands import BANDS
from ragmeter.store import Store

TEMPLATES = Path(__file__).parent / "templates"
#: ``ragmeter report --max-samples 0`` ("all") shows at most this many rows per table unless
#: ``--all-rows``: beyond it the one-file page grows past what a browser opens comfortably.
MAX_ALL_ROWS = 20_000
#: escapes that keep JSON inert inside an HTML ``<script>`` element (and valid JavaScript).
_SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
                   "\u2029": "\\u2029"}
_SCRIPT_ESCAPE_TABLE = str.maketrans(_SCRIPT_ESCAPES)


def json_for_script(obj: Any) -> Markup:
    """``obj`` as JSON safe to place between ``<script>`` tags.

    ``<``, ``>``, ``&``, U+2028 and U+2029 become ``\\u`` escapes (only ever inside JSON
    strings, so the value is unchanged once parsed); NaN/Infinity become ``null`` so the text is
    strict JSON.

    >>> str(json_for_script({"a": "</script>"}))
    '{"a": "\\\\u003c/script\\\\u003e"}'
    """
    text = json.dumps(_finite(obj), ensure_ascii=False, allow_nan=False, default=str)
    return Markup(text.translate(_SCRIPT_ESCAPE_TABLE))


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def fmt_num(value: Any, digits: int = 3) -> str:
    """A score for display: ``—`` for no value, else ``digits`` decimals."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return "—"
        return f"{value:.{digits}f}"
    return str(value)


def fmt_signed(value: Any, digits: int = 3) -> str:
    """A difference with its sign (``+0.120``); no sign when it rounds to zero."""
    if value is None:
        return "—"
    text = f"{value:+.{digits}f}"
    return text[1:] if float(text) == 0 else text


def fmt_json(value: Any) -> str:
    """Pretty JSON for ``<pre>`` blocks (escaped by the template like any other text)."""
    return json.dumps(_finite(value), indent=2, ensure_ascii=False, default=str)


def _data_value(value: Any) -> str:
    """A sort key for ``data-value`` attributes: the number, or empty for no value."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    return repr(float(value))


@functools.lru_cache(maxsize=4)
def environment(*extra_dirs: str) -> Any:
    """The jinja2 environment of the report templates (plus ``extra_dirs``, searched first)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([*extra_dirs, str(TEMPLATES)]),
        autoescape=True,  # every {{ value }} is HTML-escaped, whatever the template's extension
        undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True,
        bytecode_cache=_bytecode_cache(jinja2),
    )
    env.filters.update(num=fmt_num, signed=fmt_signed, pretty=fmt_json, dv=_data_value,
                       tojson_script=json_for_script)
    env.globals.update(bands=[b[0] for b in BANDS], version=__version__)
    return env


def _bytecode_cache(jinja2: Any) -> Any:
    """jinja2's ``FileSystemBytecodeCache`` in ``$RAGMETER_CACHE_DIR/jinja`` (default
    ``~/.cache/ragmeter/jinja``): compiling the report templates takes most of a second, and a
    compiled template is reused until its source changes (jinja2 keys it by name and source
    checksum, and by Python version). ``None`` (compile every time) when the folder cannot be made."""
    root = os.environ.get("RAGMETER_CACHE_DIR") or Path.home() / ".cache" / "ragmeter"
    folder = Path(root) / "jinja"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return jinja2.FileSystemBytecodeCache(str(folder))


@functools.cache
def asset(name: str) -> str:
    """The text of a bundled asset (``report.css``, ``report.js``)."""
    return (TEMPLATES / name).read_text(encoding="utf-8")


#: plotly.js's official "cartesian" partial bundle (npm ``plotly.js-cartesian-dist-min``, MIT; the
#: scatter, bar, histogram, box, heatmap and contour traces: every chart ragmeter draws), 1.5 MB
#: where the full bundle inside the ``plotly`` package is 4.6 MB
PLOTLY_PARTIAL = TEMPLATES / "plotly-cartesian.min.js"


@functools.lru_cache(maxsize=1)
def plotly_js() -> str:
    """plotly.js for the pages (no network): the cartesian partial bundle shipped with ragmeter
    when it is the version the ``plotly`` package draws for, else the full bundle of that package."""
    if PLOTLY_PARTIAL.is_file():
        text = PLOTLY_PARTIAL.read_text(encoding="utf-8")
        if f" v{plotly_version()}\n" in text[:200]:
            return text
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode()


def file_csp(scripts: Sequence[str], sources: Sequence[str] = ()) -> str:
    """The report's Content-Security-Policy: only these inline scripts (and the plotly.js
    ``sources`` of ``--plotly cdn|file``) run, nothing else is fetched."""
    hashes = " ".join([f"'{_sha256(s)}'" for s in scripts] + list(sources))
    return ("default-src 'none'; " f"script-src {hashes}; " "style-src 'unsafe-inline'; "
            "img-src data: blob:; font-src data:; base-uri 'none'; form-action 'none'")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


PLOTLY_MODES = ("inline", "cdn", "file")


def plotly_version() -> str:
    from plotly.offline import get_plotlyjs_version

    return get_plotlyjs_version()


def plotly_src(plotly: str) -> str | None:
    """Where the report loads plotly.js from: ``None`` (inlined), the plotly CDN, or a file
    ``plotly-VERSION.min.js`` next to the report."""
    if plotly not in PLOTLY_MODES:
        from ragmeter.core.errors import ConfigError

        raise ConfigError(f"--plotly must be one of {', '.join(PLOTLY_MODES)}, not {plotly!r}")
    if plotly == "cdn":
        return f"https://cdn.plot.ly/plotly-{plotly_version()}.min.js"
    if plotly == "file":
        return f"plotly-{plotly_version()}.min.js"
    return None


def render_page(template: str, *, mode: str, figures: Mapping[str, Any] | None = None,
                env: Any = None, plotly: str = "inline", **context: Any) -> str:
    """Render ``template`` for the dashboard (``mode="server"``) or as one file (``"file"``);
    ``plotly`` = ``inline`` (default, self-contained), ``cdn`` or ``file`` (see :func:`plotly_src`)."""
    env = env or environment()
    ctx: dict[str, Any] = {"mode": mode, "figures_json": json_for_script(dict(figures or {})),
                           "generated_at": _now(), "refresh": None, **context}
    if mode == "file":
        js = asset("report.js")
        src = plotly_src(plotly)
        if src is None:
            pjs = plotly_js()
            ctx.update(plotly_js=Markup(pjs), plotly_src=None, csp=file_csp([pjs, js]))
        else:
            # a relative file: 'self' covers http(s) hosting, file: a report opened from disk
            sources = [src] if plotly == "cdn" else ["'self'", "file:"]
            ctx.update(plotly_src=src, csp=file_csp([js], sources))
        ctx.update(css=Markup(asset("report.css")), app_js=Markup(js))
    else:
        ctx.setdefault("csp", None)
    return env.get_template(template).render(**ctx)


def build_report(store: Store, refs: Sequence[str], *, max_samples: int | None = 1000,
                 title: str | None = None, plotly: str = "inline") -> str:
    """The HTML of a one-file report of one run, or of several runs compared.

    Args:
        store: the results store.
        refs: run ids (or prefixes, names, ``latest``); with two or more, the report opens with
            their comparison (the first run is the baseline) and then shows each run.
        max_samples: rows of each per-sample table (the worst ones); ``None`` for all.
        title: the page title (default: from the run names).
        plotly: ``inline`` (plotly.js inside the file, ~1.5 MB, opens offline), ``cdn`` (loaded
            from cdn.plot.ly) or ``file`` (``plotly-VERSION.min.js`` written next to the report).

    Raises:
        StoreError: a run does not exist.
    """
    from ragmeter.apps.report import data, figures

    if not refs:
        raise ValueError("build_report needs at least one run")
    ids: list[str] = []
    for r in refs:
        rid = store.resolve_run(r)
        if rid not in ids:
            ids.append(rid)
    figs: dict[str, Any] = {}
    runs = []
    for i, rid in enumerate(ids):
        view = data.run_view(store, rid, max_samples=max_samples, with_details=True)
        view["prefix"] = f"r{i}"
        figs.update(figures.run_figures(view, view["prefix"]))
        runs.append(view)
    compare = None
    if len(ids) > 1:
        compare = data.compare_view(store, ids, max_samples=max_samples)
        compare["prefix"] = "cmp"
        figs.update(figures.compare_figures(compare, "cmp"))
    if title is None:
        labels = [v["run"]["label"] for v in runs]
        title = ("ragmeter report — " + labels[0] if len(labels) == 1
                 else "ragmeter comparison — " + " vs ".join(labels))
    return render_page("report.html.j2", mode="file", figures=figs, title=title, runs=runs,
                       compare=compare, plotly=plotly)


def write_report(store: Store, refs: Sequence[str], path: str | Path, **kwargs: Any) -> Path:
    """Write :func:`build_report`'s HTML to ``path`` (UTF-8) and return the path."""
    html = build_report(store, refs, **kwargs)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if kwargs.get("plotly") == "file":
        (path.parent / plotly_src("file")).write_text(plotly_js(), encoding="utf-8")  # type: ignore[operator]
    path.write_text(html, encoding="utf-8")
    return path
