"""Sending HTTP tools' requests: one pooled client, one timeout per request.

The response body is read only as far as the result can use: past the limit
for the truncated text, the connection is dropped rather than drained, so a
tool that answers with gigabytes costs a few kilobytes.

Redirects are not followed: a definition's headers (an ``X-Api-Key``, say)
are meant for its own server, and a redirect could carry them, the method
and the body anywhere. With ``follow_redirects`` they are followed within
the definition's origin only (scheme, host and port), at most
:data:`MAX_REDIRECTS` times; a redirect elsewhere is an error result.
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
from toolrelay.io.urls import redact_text, redact_url

MAX_REDIRECTS = 5
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


class HttpToolClient:
    """The connection pool every HTTP tool of a process shares."""

    def __init__(
        self, timeout: float = 15.0, max_connections: int = 100, follow_redirects: bool = False
    ) -> None:
        self.timeout = timeout
        self.follow_redirects = follow_redirects
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
        try:
            # One timeout for the request and the redirects it follows.
            return await asyncio.wait_for(self._exchange(request, max_chars), self.timeout)
        except asyncio.TimeoutError:
            return ToolOutput(results.request_failed(f"no answer within {self.timeout:g} s"), True)
        except aiohttp.ClientError as exc:
            return ToolOutput(results.request_failed(_shown(_reason(exc), request)), True)
        except ValueError as exc:
            # yarl and aiohttp refuse some URLs and header values before sending.
            reason = str(exc) or type(exc).__name__
            return ToolOutput(results.request_failed(_shown(reason, request)), True)

    async def _exchange(self, request: HttpRequest, max_chars: int) -> ToolOutput:
        limit = results.read_limit(max_chars)
        # Sent exactly as built: parsing it again would decode the arguments'
        # %2E%2E and resolve it as a path step.
        url = URL(request.url, encoded=True)
        method, body = request.method, request.body
        for _ in range(MAX_REDIRECTS + 1):
            async with self._get_session().request(
                method,
                url,
                headers=list(request.headers),
                data=body,
                allow_redirects=False,
            ) as response:
                location = response.headers.get("Location")
                if response.status in _REDIRECTS and location is not None:
                    target = url.join(URL(location))
                    refused = self._refused_redirect(url, target, response.status)
                    if refused is not None:
                        return ToolOutput(refused, True)
                    if _turns_into_get(response.status, method):
                        method, body = "GET", None
                    url = target
                    continue
                text = _decode(await _read_bounded(response, limit), response.charset)
                status = response.status
            if not 200 <= status < 300:
                return ToolOutput(results.http_status(status, text), True)
            if not text:
                return ToolOutput(f"HTTP {_status_line(status)} (empty body)")
            return ToolOutput(text)
        return ToolOutput(results.request_failed(f"more than {MAX_REDIRECTS} redirects"), True)

    def _refused_redirect(self, source: URL, target: URL, status: int) -> str | None:
        shown = redact_url(str(target))
        if not self.follow_redirects:
            return results.request_failed(
                f"HTTP {status} redirect to {shown} not followed (tool_follow_redirects is off)"
            )
        if _origin(target) != _origin(source):
            return results.request_failed(
                f"HTTP {status} redirect to {shown} not followed: it leaves the tool's origin "
                f"{_origin(source)}"
            )
        return None

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


def _shown(reason: str, request: HttpRequest) -> str:
    """An error's text without the URL's password or query (which may hold a key)."""
    return redact_text(reason, request.url)


def _turns_into_get(status: int, method: str) -> bool:
    # What browsers and curl do: 303 always, 301 and 302 for a POST.
    return status == 303 or (status in (301, 302) and method == "POST")


def _origin(url: URL) -> str:
    return f"{url.scheme}://{url.host}:{url.port}"


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
