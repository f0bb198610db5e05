"""The one HTTP client of the provider: `requests` with retries on idempotent requests, timeouts, and
credentials kept out of every error message.

The standalone master's ``/json/`` and log pages, YARN's ResourceManager REST API and the Spark UI are
all reached through :func:`send` / :func:`get_json`.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from airflow_provider_finegrained.secrets import REDACTED, redact_url, url_secrets

__all__ = [
    "ACCEPT_JSON",
    "HttpRequest",
    "HttpRequestError",
    "HttpResponse",
    "get_json",
    "redact_url",
    "send",
]

DEFAULT_TIMEOUT_S: Final = 10.0
DEFAULT_RETRIES: Final = 2
IDEMPOTENT_METHODS: Final = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"})
RETRY_STATUSES: Final = frozenset({502, 503, 504})
"""Answers of a proxy or a server starting up: worth one more try for an idempotent request."""
ACCEPT_JSON: Final = {"Accept": "application/json"}


@dataclass(frozen=True)
class HttpRequest:
    """One HTTP request: `body` is sent as UTF-8 (None sends none)."""

    method: str
    url: str
    body: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "headers", dict(self.headers))


@dataclass(frozen=True)
class HttpResponse:
    """Status code, headers (lower-case names) and body text of an answer, errors included."""

    status: int
    body: str
    headers: Mapping[str, str] = field(default_factory=dict)

    def json(self) -> Any:
        return json.loads(self.body)


class HttpRequestError(RuntimeError):
    """The server could not be reached, answered an error status, or sent no JSON where JSON was due.

    The message never holds the URL's password. `reason` is the short cause without the request (the
    innermost OS error such as ``[Errno 111] Connection refused`` or ``timed out``, ``HTTP 404``, ...),
    for messages that name the service their own way; it defaults to the whole message.
    """

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = message if reason is None else reason


def _scrub(text: str, url: str) -> str:
    """`text` with every secret of the URL removed wherever it appears (exception messages quote URLs)."""
    text = text.replace(url, redact_url(url))
    for secret in url_secrets(url):
        text = text.replace(secret, REDACTED)
    return text


def _root_cause(exc: BaseException) -> str:
    """The text of the innermost exception behind `exc` (requests wraps urllib3, which wraps the OS error)."""
    seen = {id(exc)}
    while (inner := exc.__cause__ or exc.__context__) is not None and id(inner) not in seen:
        seen.add(id(inner))
        exc = inner
    return str(exc) or type(exc).__name__


def _is_loopback(url: str) -> bool:
    try:
        host = urllib.parse.urlsplit(url).hostname or ""
    except ValueError:
        return False
    return host in ("localhost", "::1") or host.startswith("127.")


def _session(url: str, retries: int) -> requests.Session:
    session = requests.Session()
    # A proxy from the environment must not intercept loopback services (a local cluster, a test server).
    session.trust_env = not _is_loopback(url)
    retry = Retry(
        total=retries,
        connect=retries,
        read=retries,
        status=retries,
        backoff_factor=0.2,
        allowed_methods=IDEMPOTENT_METHODS,
        status_forcelist=RETRY_STATUSES,
        raise_on_status=False,  # the last answer comes back as a response, as any other status does
        respect_retry_after_header=False,
    )
    adapter = HTTPAdapter(max_retries=retry)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def send(request: HttpRequest, timeout_s: float = DEFAULT_TIMEOUT_S, retries: int = DEFAULT_RETRIES) -> HttpResponse:
    """Perform `request`; HTTP error statuses come back as responses, unreachable servers raise.

    Idempotent methods are retried (`retries` times, short backoff) on connection errors, read errors
    and 502/503/504; POST and PATCH never are, since a lost answer does not mean the server did nothing.
    """
    method = request.method.upper()
    data = None if request.body is None else request.body.encode("utf-8")
    try:
        with _session(request.url, retries) as session:
            answer = session.request(
                method, request.url, data=data, headers=dict(request.headers), timeout=timeout_s, allow_redirects=True
            )
            headers = {k.lower(): v for k, v in answer.headers.items()}
            return HttpResponse(answer.status_code, answer.content.decode("utf-8", errors="replace"), headers)
    except requests.RequestException as exc:
        # Not chained: the original exception's message and attributes quote the full URL.
        raise HttpRequestError(
            _scrub(f"{method} {request.url} failed: {type(exc).__name__}: {exc}", request.url),
            _scrub(_root_cause(exc), request.url),
        ) from None


def get_json(
    url: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    headers: Mapping[str, str] | None = None,
    retries: int = DEFAULT_RETRIES,
) -> Any:
    """GET `url` and decode its JSON body; HttpRequestError on a non-2xx status or a body that is not JSON."""
    response = send(HttpRequest("GET", url, headers={**ACCEPT_JSON, **(headers or {})}), timeout_s, retries)
    if not 200 <= response.status < 300:
        raise HttpRequestError(
            _scrub(f"GET {url} answered HTTP {response.status}: {response.body[:300]}", url), f"HTTP {response.status}"
        )
    try:
        return response.json()
    except ValueError as exc:
        raise HttpRequestError(
            _scrub(f"GET {url} answered no JSON ({exc}): {response.body[:200]!r}", url), f"no JSON ({exc})"
        ) from None
