"""The configured backends, and which one serves a model."""

from __future__ import annotations

from collections.abc import Iterator

from toolrelay.io.backends.backend import Backend
from toolrelay.io.backends.errors import BackendError
from toolrelay.io.backends.http import Limits
from toolrelay.io.backends.pool import Fleet, Pool
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
        self.fleet = Fleet(self._all, settings)
        self._pools: dict[str, Pool] = {}

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

    def pool_for(self, model: str) -> Pool:
        """The backends serving ``model`` (``Settings.backend_configs_for``)."""
        pool = self._pools.get(model)
        if pool is None:
            if not self._all:
                raise BackendError(503, NO_BACKEND)
            configs = self._settings.backend_configs_for(model)
            members = [self._by_name[c.name] for c in configs]
            pool = self._pools[model] = Pool(model, members, self.fleet, self._settings)
        return pool

    def pools(self) -> list[Pool]:
        """The pools of the models asked for so far."""
        return list(self._pools.values())

    def for_model(self, model: str) -> Backend:
        """One backend for a request to ``model``, balanced (no failover: the
        gateway's fronts go through the pool for that)."""
        backend = self.pool_for(model).choose()
        assert backend is not None
        return backend

    def start_checks(self) -> None:
        """Active health checks of the backends that share a model with another."""
        checked = [b for b in self._all if _pooled(b.name, self._settings)]
        self.fleet.start_checks(self._settings.health_interval, checked)

    async def aclose(self) -> None:
        await self.fleet.aclose()
        for backend in self._all:
            await backend.aclose()


def _models(settings: Settings) -> set[str]:
    """Every model a backend lists or an entry configures."""
    return {m for c in settings.backend_configs() for m in c.models} | set(settings.models)


def _pooled(name: str, settings: Settings) -> bool:
    """Whether backend ``name`` is one of several serving some model."""
    pools = [settings.backend_configs_for(m) for m in _models(settings)]
    generic = [c for c in settings.backend_configs() if not c.models]
    pools.append(generic)
    return any(len(p) > 1 and any(c.name == name for c in p) for p in pools)


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
