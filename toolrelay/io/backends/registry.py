"""The configured backends, and which one serves a model."""

from __future__ import annotations

from collections.abc import Iterator

from toolrelay.io.backends.backend import Backend
from toolrelay.io.backends.errors import BackendError
from toolrelay.io.backends.http import Limits
from toolrelay.io.settings import Settings

NO_BACKEND = "no model server is configured (--backend or TOOLRELAY_BACKEND): the LLM is disabled"


class Backends:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._all = [
            Backend(
                config,
                capability_ttl=settings.capability_ttl,
                limits=limits_of(settings),
                learn_facts=settings.learn_facts,
                recheck_requests=settings.fact_recheck_requests,
                recheck_seconds=settings.fact_recheck_seconds,
            )
            for config in settings.backend_configs()
        ]
        self._by_name = {backend.name: backend for backend in self._all}

    @property
    def configured(self) -> bool:
        """False when no model server is configured: the LLM is disabled."""
        return bool(self._all)

    @property
    def default(self) -> Backend:
        if not self._all:
            raise BackendError(503, NO_BACKEND)
        return self._all[0]

    def __iter__(self) -> Iterator[Backend]:
        return iter(self._all)

    def for_model(self, model: str) -> Backend:
        """The per-model override's backend, else the one listing the model, else the default."""
        config = self._settings.backend_config_for(model)
        return self._by_name[config.name] if config is not None else self.default

    async def aclose(self) -> None:
        for backend in self._all:
            await backend.aclose()


def limits_of(settings: Settings) -> Limits:
    return Limits(
        timeout=settings.timeout,
        total_timeout=settings.total_timeout,
        connect_timeout=settings.connect_timeout,
        max_response_bytes=settings.max_response_bytes,
        max_line_bytes=settings.max_line_bytes,
        follow_redirects=settings.follow_redirects,
        pool_size=settings.pool_size,
        pool_queue=settings.pool_queue,
        pool_timeout=settings.pool_timeout,
    )
