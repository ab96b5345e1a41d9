"""Sending HTTP tools' requests: one pooled client, one timeout per request.

The response body is read only as far as the result can use: past the limit
for the truncated text, the connection is dropped rather than drained, so a
tool that answers with gigabytes costs a few kilobytes.
"""

from __future__ import annotations

import asyncio
import codecs
from http import HTTPStatus

import aiohttp
from yarl import URL

from toolrelay.io.tools import results
from toolrelay.io.tools.request import HttpRequest
from toolrelay.io.tools.results import ToolOutput


class HttpToolClient:
    """The connection pool every HTTP tool of a process shares."""

    def __init__(self, timeout: float = 15.0, max_connections: int = 100) -> None:
        self.timeout = timeout
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        # Created lazily: aiohttp wants a running event loop.
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._max_connections, ttl_dns_cache=300),
                # Tool responses are read as bytes and decoded here, whatever they claim.
                auto_decompress=True,
            )
        return self._session

    async def send(self, request: HttpRequest, max_chars: int) -> ToolOutput:
        """The tool's answer as text: the body on a 2xx, an error text otherwise.

        The text may exceed ``max_chars`` (it is cut by the caller, which adds
        the truncation mark); the body read stops at :func:`results.read_limit`.
        """
        limit = results.read_limit(max_chars)
        try:
            async with self._get_session().request(
                request.method,
                # Sent exactly as built: parsing it again would decode the
                # arguments' %2E%2E and resolve it as a path step.
                URL(request.url, encoded=True),
                headers=list(request.headers),
                data=request.body,
                timeout=aiohttp.ClientTimeout(total=self.timeout),
            ) as response:
                body = await _read_bounded(response, limit)
                text = _decode(body, response.charset)
                status = response.status
        except asyncio.TimeoutError:
            return ToolOutput(results.request_failed(f"no answer within {self.timeout:g} s"), True)
        except aiohttp.ClientError as exc:
            return ToolOutput(results.request_failed(_reason(exc)), True)
        except ValueError as exc:
            # yarl and aiohttp refuse some URLs and header values before sending.
            return ToolOutput(results.request_failed(str(exc) or type(exc).__name__), True)
        if not 200 <= status < 300:
            return ToolOutput(results.http_status(status, text), True)
        if not text:
            return ToolOutput(f"HTTP {_status_line(status)} (empty body)")
        return ToolOutput(text)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


async def _read_bounded(response: aiohttp.ClientResponse, limit: int) -> bytes:
    chunks = []
    size = 0
    async for chunk in response.content.iter_any():
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit:
            # The rest would be cut anyway: drop the connection instead of draining it.
            response.close()
            break
    return b"".join(chunks)[:limit]


def _decode(body: bytes, charset: str | None) -> str:
    try:
        encoding = codecs.lookup(charset).name if charset else "utf-8"
    except LookupError:
        encoding = "utf-8"  # a charset Python does not know: read it as UTF-8
    return body.decode(encoding, "replace")


def _status_line(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return str(status)


def _reason(exc: aiohttp.ClientError) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
