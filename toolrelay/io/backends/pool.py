"""Several backends for one model: balancing, health and quality routing.

:class:`Fleet` keeps one :class:`~toolrelay.balance.Member` per backend (its
load and health, whichever models it serves), counts each backend's requests
and failures, and runs the active health checks. :class:`Pool` is one model's
backends: it picks one (:func:`toolrelay.balance.pick`) and hands out a
:class:`Lease` that counts the request in flight and reports how it ended.
The policy itself is pure and lives in :mod:`toolrelay.balance` and
:mod:`toolrelay.routing_quality`; docs/backends.md has the rules.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from toolrelay import balance
from toolrelay.balance import Backoff, Member
from toolrelay.io.backends.backend import Backend
from toolrelay.io.backends.errors import BackendError
from toolrelay.io.backends.probe import check_alive
from toolrelay.io.settings import Settings
from toolrelay.routing_quality import QualityWindow

if TYPE_CHECKING:
    from toolrelay.io.round.request import RoundRequest

log = logging.getLogger("toolrelay.backends")

# Outcomes remembered per backend for its error rate.
_ERROR_WINDOW = 100
# Seconds after which a verdict that still cuts a weight is told again (the
# Redis copies last an hour: toolrelay.io.shared.quality).
RETELL_SECONDS = 600.0
# An active check that takes longer than this has failed.
_CHECK_TIMEOUT = 2.0


def fails_backend(exc: BackendError) -> bool:
    """Whether ``exc`` says the backend failed (down, timed out, a 5xx, a broken
    stream), rather than the request being wrong (a 4xx, a refusal of tools)."""
    if exc.refuses_tools:
        return False
    return exc.upstream_status is None or exc.upstream_status >= 500


class Fleet:
    """Every backend's load and health, shared by the pools it is in."""

    def __init__(self, backends: list[Backend], settings: Settings) -> None:
        self.backends = backends
        self.backoff = Backoff(
            settings.backend_failures, settings.backend_backoff, settings.backend_backoff_max
        )
        self.members = {b.name: Member(b.name, b.config.weight) for b in backends}
        self.requests = dict.fromkeys(self.members, 0)
        self.failures = dict.fromkeys(self.members, 0)
        self._recent = {name: deque[bool](maxlen=_ERROR_WINDOW) for name in self.members}
        # Called with the backend when its health changed here (the Redis share).
        self.listeners: list[Callable[[Backend, Member], None]] = []
        # Backends the active check took out: only its success brings them back
        # early (a passive back-off runs its course: a server whose model list
        # answers may still fail every completion).
        self._checked_out: set[str] = set()
        # Quality routing's verdicts: told to (model, backend, factor) listeners
        # when one changes here; another replica's, by (model, base URL): (factor, until).
        self.verdict_listeners: list[Callable[[str, Backend, float], None]] = []
        self.shared_factors: dict[tuple[str, str], tuple[float, float]] = {}
        self._checks: asyncio.Task[None] | None = None

    def failed(self, backend: Backend, why: str) -> None:
        member = self.members[backend.name]
        self.failures[backend.name] += 1
        self._recent[backend.name].append(False)
        now = time.time()
        if balance.failed(member, now, self.backoff):
            log.warning(
                "backend %s at %s is out for %.1f s: %s",
                backend.name,
                backend.shown_url,
                member.out_until - now,
                why,
            )
        self._changed(backend, member)

    def succeeded(self, backend: Backend) -> None:
        member = self.members[backend.name]
        self._recent[backend.name].append(True)
        self._checked_out.discard(backend.name)
        # A member whose failures and time out are both 0 has nothing to reset, nor
        # to tell: balance's Python function is called only for one that has.
        if (member.failures != 0 or member.out_until != 0.0) and balance.succeeded(member):
            log.info("backend %s at %s answers: back in service", backend.name, backend.shown_url)
            self._changed(backend, member)

    def apply_shared(self, url: str, out_for: float, failures: int) -> None:
        """Another gateway replica's word on the backend at ``url``: out for
        ``out_for`` seconds (0: it answers again)."""
        now = time.time()
        for backend in self.backends:
            if backend.base_url != url:
                continue
            member = self.members[backend.name]
            if out_for <= 0:
                if member.is_out(now):
                    log.info(
                        "backend %s at %s answers again (another gateway replica's word)",
                        backend.name,
                        backend.shown_url,
                    )
                balance.succeeded(member)
                continue
            if not member.is_out(now):
                log.warning(
                    "backend %s at %s is out for %.1f s (another gateway replica's word)",
                    backend.name,
                    backend.shown_url,
                    out_for,
                )
            member.out_until = max(member.out_until, now + out_for)
            member.failures = max(member.failures, failures)

    def apply_shared_verdict(self, model: str, url: str, factor: float, seconds: float) -> None:
        """Another gateway replica's quality verdict on the backend at ``url`` for
        ``model``: its weight's factor, for ``seconds`` (1: lifted)."""
        if factor >= 1.0:
            self.shared_factors.pop((model, url), None)
        else:
            self.shared_factors[(model, url)] = (factor, time.time() + seconds)
        log.info(
            "quality routing, model %s: backend at %s: weight x%.2f (another gateway replica's "
            "verdict)",
            model,
            url,
            factor,
        )

    def _changed(self, backend: Backend, member: Member) -> None:
        for listener in self.listeners:
            listener(backend, member)

    def error_rate(self, name: str) -> float:
        recent = self._recent[name]
        return round(recent.count(False) / len(recent), 4) if recent else 0.0

    def state(self, name: str) -> dict[str, Any]:
        """What ``/health`` shows of one backend's balancing and health."""
        member = self.members[name]
        now = time.time()
        out = member.is_out(now)
        return {
            "state": "out" if out else "failing" if member.failures else "in",
            "out_for_seconds": round(member.out_until - now, 1) if out else 0.0,
            "weight": member.weight,
            "outstanding": member.outstanding,
            "requests": self.requests[name],
            "failures": self.failures[name],
            "error_rate": self.error_rate(name),
        }

    def start_checks(self, interval: float, backends: list[Backend]) -> None:
        """Check ``backends`` every ``interval`` seconds until :meth:`aclose`."""
        if interval > 0 and backends and self._checks is None:
            self._checks = asyncio.create_task(
                self._check_loop(interval, backends), name="toolrelay-backend-checks"
            )

    async def _check_loop(self, interval: float, backends: list[Backend]) -> None:
        while True:
            outcomes = await asyncio.gather(
                *(self._check(b) for b in backends), return_exceptions=True
            )
            for outcome in outcomes:
                if isinstance(outcome, Exception):
                    # A bug of ours must not end the checks for good.
                    log.error("backend health check failed", exc_info=outcome)
            await asyncio.sleep(interval)

    async def _check(self, backend: Backend) -> None:
        try:
            await asyncio.wait_for(
                check_alive(backend.client, backend.root_url, backend.base_url, backend.known_kind),
                _CHECK_TIMEOUT,
            )
        except BackendError as exc:
            self._checked_out.add(backend.name)
            self.failed(backend, f"health check: {exc.message}")
        except asyncio.TimeoutError:
            self._checked_out.add(backend.name)
            self.failed(backend, f"health check: no answer within {_CHECK_TIMEOUT} s")
        else:
            if backend.name in self._checked_out:
                self.succeeded(backend)

    async def aclose(self) -> None:
        if self._checks is not None:
            self._checks.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._checks
            self._checks = None


class Lease:
    """One request in flight on a backend: counted until :meth:`end`."""

    def __init__(self, fleet: Fleet, backend: Backend) -> None:
        self.backend = backend
        self._fleet = fleet
        self._member = fleet.members[backend.name]
        self._member.outstanding += 1
        fleet.requests[backend.name] += 1
        self._open = True

    def end(self, error: BaseException | None = None) -> None:
        """The request ended: well (None), with ``error``; a second call does nothing.
        Only a :class:`BackendError` that :func:`fails_backend` counts against it;
        anything else (the client left, say) says nothing of the backend."""
        if not self._open:
            return
        self._open = False
        self._member.outstanding -= 1
        if error is None:
            self._fleet.succeeded(self.backend)
        elif isinstance(error, BackendError) and fails_backend(error):
            self._fleet.failed(self.backend, error.message)


class Pool:
    """The backends that serve one model."""

    def __init__(
        self,
        model: str,
        backends: list[Backend],
        fleet: Fleet,
        settings: Settings,
    ) -> None:
        self.model = model
        self.backends = backends
        self._fleet = fleet
        self._settings = settings
        self._members = [fleet.members[b.name] for b in backends]
        # None: quality routing is off (nothing is recorded).
        self._quality = QualityWindow() if settings.quality_routing else None
        self._factors = [1.0] * len(backends)
        # When each backend's verdict was last told to the listeners (time.monotonic()).
        self._told: dict[str, float] = {}
        # Per backend: the options it sets otherwise than the first, (first's, its own).
        self._own_options: dict[str, dict[str, tuple[Any, Any]]] = {}

    def choose(self, affinity: str | None = None, exclude: Backend | None = None) -> Backend | None:
        """The backend for the next request; None when ``exclude`` was the only one."""
        if len(self.backends) == 1:
            return None if exclude is not None else self.backends[0]
        all_factors = self._with_shared() if self._fleet.shared_factors else self._factors
        if exclude is None:
            candidates, members, factors = self.backends, self._members, all_factors
        else:
            kept = [i for i, b in enumerate(self.backends) if b is not exclude]
            candidates = [self.backends[i] for i in kept]
            members = [self._members[i] for i in kept]
            factors = [all_factors[i] for i in kept]
        return candidates[balance.pick(members, time.time(), affinity, factors)]

    def _with_shared(self) -> list[float]:
        """The factors with the other replicas' verdicts in force (the lower wins)."""
        if self._quality is None:
            return self._factors
        now = time.time()
        shared = self._fleet.shared_factors
        out = []
        for backend, own in zip(self.backends, self._factors, strict=True):
            theirs, until = shared.get((self.model, backend.base_url), (1.0, 0.0))
            out.append(min(own, theirs) if until > now else own)
        return out

    def lease(self, backend: Backend) -> Lease:
        return Lease(self._fleet, backend)

    def round_for(self, req: RoundRequest, backend: Backend) -> RoundRequest:
        """``req`` with ``backend``'s own format and profile where the request
        took the pool's first backend's (a model's own setting wins over both)."""
        if backend is self.backends[0]:
            return req
        own = self._own_options.get(backend.name)
        if own is None:
            first = self._settings.round_options(self.model, self.backends[0].config)
            mine = self._settings.round_options(self.model, backend.config)
            own = self._own_options[backend.name] = {
                key: (first[key], mine[key])
                for key in ("format", "profile")
                if mine[key] != first[key]
            }
        changes = {key: mine for key, (first, mine) in own.items() if getattr(req, key) == first}
        return replace(req, **changes) if changes else req

    def record_quality(self, backend: Backend, bad: bool) -> None:
        """One finished round with tools on ``backend``: did its calls come out bad?"""
        if self._quality is None or not self.judges_quality:
            return
        self._quality.record(backend.name, bad)
        verdicts = self._quality.verdicts(b.name for b in self.backends)
        now = time.monotonic()
        for i, other in enumerate(self.backends):
            verdict = verdicts[other.name]
            changed = verdict.factor != self._factors[i]
            if changed:
                log.warning(
                    "quality routing, model %s: backend %s: %s",
                    self.model,
                    other.name,
                    verdict.reason(),
                )
                self._factors[i] = verdict.factor
            # A cut that holds is told again now and then: the others' copies expire.
            due = verdict.factor < 1.0 and now - self._told.get(other.name, now) > RETELL_SECONDS
            if changed or due:
                self._told[other.name] = now
                for listener in self._fleet.verdict_listeners:
                    listener(self.model, other, verdict.factor)

    @property
    def judges_quality(self) -> bool:
        return self._quality is not None and len(self.backends) > 1

    def factors(self) -> dict[str, float]:
        """Each backend's factor in force (this replica's verdict or another's)."""
        return {b.name: f for b, f in zip(self.backends, self._with_shared(), strict=True)}
