"""The ASGI gateway: an OpenAI-compatible proxy in front of any model server."""

from toolrelay.server.app import create_app

__all__ = ["create_app"]
