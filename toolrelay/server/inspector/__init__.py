"""The request inspector (``serve --inspector``): recent requests in memory and
the page and API at ``/ui`` that show them (docs/inspector.md)."""

from toolrelay.server.inspector.api import InspectorApi, model_pages
from toolrelay.server.inspector.ring import Inspector

__all__ = ["Inspector", "InspectorApi", "model_pages"]
