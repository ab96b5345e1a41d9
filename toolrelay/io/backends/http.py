"""The HTTP client to model servers: JSON in and out, SSE streams as dicts.

aiohttp rather than httpx: on this machine class it adds less latency per
request and per streamed line (``bench/gateway_bench.py`` measures both).
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any

import aiohttp
import orjson

from toolrelay.io.backends.errors import BackendError, BackendTimeout, BackendUnreachable


class ChunkStream:
    """An opened SSE stream: iterate for batches of decoded ``data:`` payloads.

    Each batch holds the chunks that one read brought (at least one), so that
    a relay can forward them in one write: under load that amortises the
    wake-up and the system calls over many chunks. ``[DONE]`` ends the
    iteration; a payload with a non-empty top-level ``error`` raises
    :class:`BackendError`, as the openai SDK does.
    """

    def __init__(self, response: aiohttp.ClientResponse, url: str) -> None:
        self._response = response
        self._url = url
        self._pending = b""
        self._done = False

    def __aiter__(self) -> ChunkStream:
        return self

    async def __anext__(self) -> list[dict[str, Any]]:
        while not self._done:
            try:
                data = await self._response.content.readany()
            except asyncio.TimeoutError as exc:
                await self.aclose()
                raise BackendTimeout(f"backend stream from {self._url} went silent") from exc
            except aiohttp.ClientError as exc:
                await self.aclose()
                raise BackendUnreachable(f"backend stream from {self._url} broke: {exc}") from exc
            if not data:
                self._done = True
                data = b"\n"  # flush a last line that had no newline
            lines = (self._pending + data).split(b"\n")
            self._pending = lines.pop()
            batch = await self._decode(lines)
            if batch:
                return batch
        await self.aclose()
        raise StopAsyncIteration

    async def _decode(self, lines: list[bytes]) -> list[dict[str, Any]]:
        batch = []
        for line in lines:
            if not line.startswith(b"data:"):
                continue  # blank separators, comments, event: lines
            payload = line[5:].strip()
            if payload == b"[DONE]":
                self._done = True
                break
            try:
                chunk = orjson.loads(payload)
            except orjson.JSONDecodeError:
                continue  # a server's stray non-JSON line; clients skip it too
            if not isinstance(chunk, dict):
                continue
            if chunk.get("error"):  # as the SDK checks it: a null or empty error is none
                await self.aclose()
                raise BackendError(502, error_message(chunk, ""), upstream_status=200)
            batch.append(chunk)
        return batch

    async def aclose(self) -> None:
        if self._done:
            self._response.release()
        else:
            # Stopped early (the client left, or an error): closing the
            # connection tells the server to stop generating.
            self._response.close()

    async def __aenter__(self) -> ChunkStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class HttpClient:
    """One connection pool to one model server."""

    def __init__(
        self, *, api_key: str | None = None, timeout: float = 600.0, connect_timeout: float = 10.0
    ) -> None:
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=connect_timeout, sock_read=timeout
        )
        self._session: aiohttp.ClientSession | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        # Created lazily: aiohttp wants a running event loop.
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers=self._headers,
                timeout=self._timeout,
                connector=aiohttp.TCPConnector(limit=256, ttl_dns_cache=300),
                json_serialize=lambda obj: orjson.dumps(obj).decode(),
            )
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request_json(
        self, method: str, url: str, body: Any = None, auth: str | None = None
    ) -> Any:
        """Send a request and decode its JSON answer; non-2xx raises BackendError.

        ``auth`` is an ``Authorization`` value for this request only."""
        data = None if body is None else orjson.dumps(body)
        try:
            async with self._get_session().request(
                method, url, data=data, headers=_headers(data is not None, auth)
            ) as response:
                raw = await response.read()
                if response.status >= 400:
                    raise _status_error(response.status, raw, url)
        except asyncio.TimeoutError as exc:
            raise BackendTimeout(f"backend at {url} did not answer in time") from exc
        except aiohttp.ClientError as exc:
            raise BackendUnreachable(f"backend at {url} is unreachable: {exc}") from exc
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise BackendError(502, f"backend at {url} sent invalid JSON: {exc}") from exc

    async def open_stream(self, url: str, body: Any, auth: str | None = None) -> ChunkStream:
        """POST and wait for the answer's headers; an error status raises here,
        before the caller has committed to a streamed reply."""
        try:
            response = await self._get_session().post(
                url, data=orjson.dumps(body), headers=_headers(True, auth)
            )
        except asyncio.TimeoutError as exc:
            raise BackendTimeout(f"backend at {url} did not answer in time") from exc
        except aiohttp.ClientError as exc:
            raise BackendUnreachable(f"backend at {url} is unreachable: {exc}") from exc
        if response.status >= 400:
            try:
                raw = await response.read()
            except (aiohttp.ClientError, asyncio.TimeoutError):
                raw = b""
            response.release()
            raise _status_error(response.status, raw, url)
        if response.content_type == "application/json":
            # Some servers report errors this way, with a 200, even when asked to stream.
            raw = await response.read()
            response.release()
            try:
                message = error_message(orjson.loads(raw), "")
            except orjson.JSONDecodeError:
                message = ""
            raise BackendError(
                502,
                f"backend answered a streamed request without streaming: {message or raw[:200]!r}",
                upstream_status=response.status,
            )
        return ChunkStream(response, url)


_JSON_HEADERS = {"Content-Type": "application/json"}


def _headers(json_body: bool, auth: str | None) -> dict[str, str] | None:
    if auth is None:
        return _JSON_HEADERS if json_body else None
    headers = {"Authorization": auth}
    if json_body:
        headers.update(_JSON_HEADERS)
    return headers


def error_message(body: Any, fallback: str) -> str:
    """The human message in an error body, whatever shape the server uses."""
    if isinstance(body, dict):
        error = body.get("error", body.get("detail", body.get("message")))
        if isinstance(error, dict):
            error = error.get("message", error)
        if isinstance(error, str):
            return error
        if error is not None:
            return orjson.dumps(error).decode()
    return fallback


def _status_error(status: int, raw: bytes, url: str) -> BackendError:
    text = raw.decode("utf-8", "replace").strip()
    try:
        message = error_message(orjson.loads(raw), text)
    except orjson.JSONDecodeError:
        message = text
    message = message or f"HTTP {status}"
    # The backend's own 4xx goes back to the client as is; its failures are a bad gateway.
    return BackendError(
        status if status < 500 else 502, f"backend: {message}", upstream_status=status
    )
