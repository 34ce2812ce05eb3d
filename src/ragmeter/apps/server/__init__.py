"""The local dashboard (``ragmeter serve``): a read-only FastAPI app over the results store."""

from __future__ import annotations

from typing import Any

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    # the app module imports FastAPI: loaded on first use, so ``ragmeter serve`` can listen first
    if name == "create_app":
        from ragmeter.apps.server.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
