"""The local dashboard (``ragmeter serve``): a read-only FastAPI app over the results store."""

from ragmeter.apps.server.app import create_app

__all__ = ["create_app"]
