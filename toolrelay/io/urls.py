"""Backend URLs: credentials taken out of them, secrets kept out of what is shown.

A backend URL may carry credentials, ``http://user:PASS@host/v1?key=K``: the
userinfo becomes the backend's Basic credentials (as curl takes it), the query
is sent on every request, and neither is ever shown in full (``/health``,
error messages, logs).
"""

from __future__ import annotations

import base64
import functools
import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

_HIDDEN = "***"
# Query parameter names that say their value is a credential.
_CREDENTIAL_NAME = re.compile(
    r"key|token|secret|passw|pwd|auth|sig|credential|session|jwt|bearer|cookie", re.IGNORECASE
)
# A value that is only a tool's {placeholder}: the model's argument, not a secret.
_PLACEHOLDER_ONLY = re.compile(r"\{[A-Za-z_][A-Za-z0-9_-]*\}")


@dataclass(frozen=True)
class BackendURL:
    """A backend URL taken apart.

    ``base`` has neither userinfo nor query; ``query`` goes on every request
    (without its ``?``); ``authorization`` is the Basic value of the userinfo.
    """

    base: str
    query: str
    authorization: str | None
    shown: str


def split_url(url: str) -> BackendURL:
    parts = urlsplit(url.strip())
    authorization = None
    if parts.username is not None or parts.password is not None:
        user = unquote(parts.username or "")
        password = unquote(parts.password or "")
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        authorization = "Basic " + token
    netloc = parts.hostname or ""
    if ":" in netloc:
        netloc = f"[{netloc}]"  # an IPv6 literal
    if parts.port is not None:
        netloc += f":{parts.port}"
    base = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
    return BackendURL(base, parts.query, authorization, redact_url(url))


def with_query(url: str, query: str) -> str:
    """``url`` with the backend's own query added to whatever query it has."""
    if not query:
        return url
    return url + ("&" if "?" in url else "?") + query


# Every request to a backend names its URL (for errors and logs): the few URLs a
# gateway calls are taken apart once each.
@functools.lru_cache(maxsize=256)
def redact_url(url: str) -> str:
    """``url`` as it may be shown: the password and every query value hidden."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return _HIDDEN  # not a URL we can take apart: show nothing of it
    netloc = parts.netloc
    if parts.password is not None or parts.username is not None:
        user = parts.username or ""
        shown_host = f"[{host}]" if host and ":" in host else (host or "")
        if port is not None:
            shown_host += f":{port}"
        netloc = (
            f"{user}:{_HIDDEN}@{shown_host}"
            if parts.password is not None
            else (f"{_HIDDEN}@{shown_host}")
        )
    query = urlencode(
        [(key, _HIDDEN) for key, _ in parse_qsl(parts.query, keep_blank_values=True)],
        safe="*",
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def redact_text(text: str, url: str) -> str:
    """``text`` (an exception's message, say) with ``url``'s secrets hidden."""
    parts = urlsplit(url)
    for secret in (parts.password, parts.query):
        if secret:
            text = text.replace(secret, _HIDDEN)
    return text


def redact_tool_url(url: str) -> str:
    """An HTTP tool's URL template as it may be shown: the userinfo's password
    and each query value whose name says it is a credential (``api_key``,
    ``token``, ``sig``…) hidden; placeholders and everything else as written."""
    head, mark, query = url.partition("?")
    scheme, sep, rest = head.partition("://")
    authority, slash, path = rest.partition("/")
    user, at, host = authority.rpartition("@")
    if at and ":" in user:
        authority = user.split(":", 1)[0] + ":" + _HIDDEN + "@" + host
    head = scheme + sep + authority + slash + path
    if not mark:
        return head
    query, hash_mark, fragment = query.partition("#")
    pairs = []
    for pair in query.split("&"):
        name, equals, value = pair.partition("=")
        hidden = equals and _CREDENTIAL_NAME.search(name) and not _PLACEHOLDER_ONLY.fullmatch(value)
        pairs.append(name + "=" + _HIDDEN if hidden else pair)
    return head + "?" + "&".join(pairs) + hash_mark + fragment
