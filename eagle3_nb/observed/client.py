"""Measure a running engine server: send prompts, read back its speculative figures.

This is how a target too big for one machine is measured: the serving engine is the distributed
runtime, the kit only reads it. Standard library only (``urllib``); every request has an overall
deadline (its answer included), a size cap and a bounded number of retries, follows no redirect
off its own server, and the base URL is always given by the caller (no default host).
Which endpoints are asked, and how the answers are read, is the engine's own
(`eagle3_nb/engines/<engine>/observe.py`, the Engine record's `observe`).

Connection refused, timeouts, HTTP errors, oversized answers, redirects elsewhere and non-JSON
answers raise :class:`ServingError`, an :class:`~eagle3_nb.errors.Eagle3NbError`, naming the URL
(never a password it carried).
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from eagle3_nb.engines.registry import engine as registered, engines
from eagle3_nb.errors import Eagle3NbError, ServingError
from eagle3_nb.io.checkpoint import iter_jsonl
from eagle3_nb.observation import ObservedMetrics

__all__ = ["ServingError", "HttpClient", "measure_server", "read_prompt_file"]

_RETRY_STATUS = (502, 503, 504)
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
MAX_RESPONSE_BYTES = 32 << 20   # a /metrics page or a server-info answer is well under a MiB
MAX_TIMEOUT_S = 24 * 3600.0
_ERROR_EXCERPT_BYTES = 4096     # what an HTTP error's body may add to its message
_CHUNK = 64 << 10


@dataclass(frozen=True)
class ServerUrl:
    """The base URL with any user:password taken out: sent as Basic auth, never shown."""
    url: str
    user: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)

    def redact(self, text: str) -> str:
        if self.password:
            for secret in (f"{self.user}:{self.password}", self.password,
                           urllib.parse.quote(self.password, safe="")):
                text = text.replace(secret, "***")
        return text


def _check_base_url(base_url: str) -> ServerUrl:
    if not isinstance(base_url, str) or not base_url.strip():
        ports = " or ".join(f"http://HOST:{e.observe.PORT} for {e.title}"
                            for e in engines().values() if e.observe)
        raise ServingError("no server URL given", None,
                           f"pass the server's base URL, e.g. {ports}")
    parts = urllib.parse.urlsplit(base_url.strip().rstrip("/"))
    shown = _without_userinfo(parts)
    try:
        parts.port
    except ValueError:
        raise ServingError("the port is not a number", shown, "e.g. http://10.0.0.5:30000") \
            from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        shown = shown if parts.scheme in ("http", "https") else repr(shown)
        raise ServingError(f"server URL {shown} is not http(s)://HOST[:PORT]", None,
                           "give the scheme, host and port, e.g. http://10.0.0.5:30000")
    user = urllib.parse.unquote(parts.username) if parts.username is not None else None
    password = urllib.parse.unquote(parts.password) if parts.password is not None else None
    return ServerUrl(shown, user, password)


def _without_userinfo(parts: urllib.parse.SplitResult) -> str:
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


@dataclass
class HttpResponse:
    status: int
    body: bytes
    url: str

    def json(self) -> Any:
        try:
            return json.loads(self.body.decode("utf-8"))
        except (ValueError, RecursionError):
            excerpt = self.body[:200].decode("utf-8", errors="replace")
            raise ServingError(f"answer is not JSON: {excerpt!r}", self.url,
                               "is this the right server and port?") from None

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


class _Deadline:
    """One request's overall time limit: when it passes, the request's sockets are shut down,
    so a server that drips its answer cannot hold the client past it (a socket timeout alone
    bounds each read, not their sum)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> "_Deadline":
        self._timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._timer.cancel()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    try:  # the plain socket's shutdown, also under TLS: the reader then sees an end of stream
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass


class _Guard:
    """The deadline of the request in flight, for the connections the handlers open."""
    current: _Deadline | None = None

    def watch(self, sock: socket.socket) -> None:
        if self.current is not None:
            self.current.watch(sock)


def _watched(base: type, guard: _Guard) -> type:
    """BASE whose sockets the guard's deadline can shut: the plain one from its creation (a
    proxy tunnel is set up on it), the one it reads from (TLS wraps it) once connected."""
    class Watched(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            create = self._create_connection

            def watched_create(*a: Any, **k: Any) -> socket.socket:
                sock = create(*a, **k)
                guard.watch(sock)
                return sock
            self._create_connection = watched_create

        def connect(self) -> None:
            super().connect()
            guard.watch(self.sock)
    return Watched


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, guard: _Guard):
        super().__init__()
        self.connection = _watched(http.client.HTTPConnection, guard)

    def http_open(self, req):
        return self.do_open(self.connection, req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, guard: _Guard):
        super().__init__()
        self.connection = _watched(http.client.HTTPSConnection, guard)

    def https_open(self, req):
        return self.do_open(self.connection, req, context=self._context)


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is followed only to the same scheme, host and port; any other is refused
    (the Authorization header would follow it, and the figures would be another server's)."""

    def __init__(self, server: ServerUrl):
        super().__init__()
        self.server = server

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        old, new = urllib.parse.urlsplit(req.full_url), urllib.parse.urlsplit(newurl)
        same = (new.scheme, new.hostname, new.port) == (old.scheme, old.hostname, old.port)
        if not same or new.username is not None or new.password is not None:
            fp.close()
            shown = self.server.redact(_without_userinfo(new))[:200]
            raise ServingError(f"the server redirects (HTTP {code}) to {shown}: a redirect to "
                               "another host or scheme is not followed",
                               self.server.redact(req.full_url),
                               "give the URL the engine itself listens on")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class HttpClient:
    """A tiny JSON-over-HTTP client with an overall deadline per request, a cap on the answer's
    size, and bounded retries.

    Each attempt must be answered in full within ``timeout`` seconds (not only each read) and
    with at most ``max_bytes`` bytes; redirects are followed only to the same scheme, host and
    port. Retries (``retries`` extra attempts, exponential ``backoff`` seconds) happen on
    connection errors, timeouts and HTTP 502/503/504; other HTTP errors, and an answer still
    arriving at the deadline, fail at once. A ``user:password@`` in the URL is sent as Basic
    auth and never shown. Loopback hosts are reached directly; other hosts follow the
    environment's proxy settings (urllib's default).
    """

    def __init__(self, base_url: str, *, timeout: float = 120.0, retries: int = 2,
                 backoff: float = 0.5, headers: dict[str, str] | None = None,
                 max_bytes: int = MAX_RESPONSE_BYTES):
        self.server = _check_base_url(base_url)
        self.base_url = self.server.url
        self.timeout = _seconds(timeout)
        self.retries = max(0, int(retries))
        self.backoff = max(0.0, float(backoff))
        self.max_bytes = int(max_bytes)
        self.headers = dict(headers or {})
        if self.server.user is not None and "Authorization" not in self.headers:
            pair = f"{self.server.user}:{self.server.password or ''}".encode("utf-8")
            self.headers["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
        self._guard = _Guard()
        host = urllib.parse.urlsplit(self.base_url).hostname
        handlers = [_HTTPHandler(self._guard), _HTTPSHandler(self._guard),
                    _SameOriginRedirects(self.server)]
        if host in _LOOPBACK:
            handlers.append(urllib.request.ProxyHandler({}))
        self._opener = urllib.request.build_opener(*handlers)

    def url(self, path: str) -> str:
        return self.base_url + "/" + path.lstrip("/")

    def request(self, method: str, path: str, payload: Any = None, *,
                ok_404: bool = False) -> HttpResponse:
        url = self.url(path)
        data = None
        headers = {"Accept": "application/json, text/plain;q=0.9", **self.headers}
        if payload is not None:
            data = json.dumps(payload).encode("utf-8")
            headers["Content-Type"] = "application/json"
        last: str = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * (2 ** (attempt - 1)))
            req = urllib.request.Request(url, data=data, headers=headers, method=method)
            try:
                with _Deadline(self.timeout) as deadline:
                    self._guard.current = deadline
                    try:
                        return self._attempt(req, url, method, ok_404, deadline)
                    finally:
                        self._guard.current = None
            except _Retry as e:
                last = self.server.redact(str(e))
        tries = self.retries + 1
        raise ServingError(f"{method} failed after {tries} attempt(s): {last}", url,
                           "is the server running and listening on that host and port?")

    def _attempt(self, req: urllib.request.Request, url: str, method: str, ok_404: bool,
                 deadline: _Deadline) -> HttpResponse:
        """One attempt: the answer, a ServingError (final), or _Retry (worth another)."""
        received = [-1]    # body bytes; -1 until the status line and headers are in
        try:
            try:
                with self._opener.open(req, timeout=self.timeout) as resp:
                    received[0] = 0
                    body = _read_capped(resp, self.max_bytes, url, received)
                    status = resp.status
            finally:
                if deadline.expired:
                    raise _Overdue()
            return HttpResponse(status, body, url)
        except _Overdue:
            if received[0] < 0:  # not even the headers: the same as a read timing out
                raise _Retry(f"timed out after {self.timeout:g} s") from None
            raise ServingError(f"{method} got no complete answer within {self.timeout:g} s "
                               f"({received[0]} bytes of it had arrived): the server is too "
                               "slow or never finishes its answer", url,
                               "raise --timeout if the server is only slow") from None
        except urllib.error.HTTPError as e:
            if e.code == 404 and ok_404:
                return HttpResponse(404, _excerpt(e), url)
            excerpt = _excerpt(e)[:300].decode("utf-8", errors="replace").strip()
            text = f"HTTP {e.code} {e.reason}" + (f": {excerpt}" if excerpt else "")
            if e.code in _RETRY_STATUS:
                raise _Retry(text) from None
            raise ServingError(f"{method} answered {self.server.redact(text)}", url,
                               _http_hint(e.code)) from None
        except urllib.error.URLError as e:
            reason = e.reason
            if isinstance(reason, ConnectionRefusedError):
                raise _Retry("connection refused") from None
            if isinstance(reason, (socket.timeout, TimeoutError)):
                raise _Retry(f"timed out after {self.timeout:g} s") from None
            if isinstance(reason, socket.gaierror):
                raise ServingError(f"cannot resolve the host ({self.server.redact(str(reason))})",
                                   url, "check the server URL") from None
            raise _Retry(f"cannot connect ({reason})") from None
        except (socket.timeout, TimeoutError):
            raise _Retry(f"timed out after {self.timeout:g} s") from None
        except (ConnectionError, http.client.HTTPException, OSError) as e:
            raise _Retry(f"connection failed ({type(e).__name__}: {e})") from None

    def get_json(self, path: str) -> Any:
        return self.request("GET", path).json()

    def post_json(self, path: str, payload: Any) -> Any:
        return self.request("POST", path, payload).json()


class _Retry(Exception):
    """An attempt that failed in a way another attempt may not (its text says how)."""


class _Overdue(Exception):
    """The request's deadline passed while it was in flight."""


def _seconds(timeout: Any) -> float:
    ok = isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and \
        math.isfinite(timeout) and 0 < timeout <= MAX_TIMEOUT_S
    if not ok:
        raise ServingError(f"timeout must be a number of seconds above 0 and at most "
                           f"{MAX_TIMEOUT_S:g}, got {timeout!r}", "--timeout")
    return float(timeout)


def _read_capped(resp: Any, cap: int, url: str, received: list[int]) -> bytes:
    """The body, refused past CAP bytes (from Content-Length when it says so, else as it
    streams in)."""
    declared = resp.headers.get("Content-Length", "")
    if declared.strip().isdigit() and int(declared) > cap:
        raise ServingError(f"the answer declares {int(declared)} bytes, over the limit of {cap}",
                           url, "is this the engine's own endpoint?")
    read = getattr(resp, "read1", resp.read)
    chunks: list[bytes] = []
    while True:
        chunk = read(_CHUNK)
        if not chunk:
            return b"".join(chunks)
        received[0] += len(chunk)
        if received[0] > cap:
            raise ServingError(f"the answer goes on past the limit of {cap} bytes", url,
                               "is this the engine's own endpoint?")
        chunks.append(chunk)


def _excerpt(error: urllib.error.HTTPError) -> bytes:
    try:
        return error.read(_ERROR_EXCERPT_BYTES) or b""
    except Exception:  # noqa: BLE001 - the status is what matters
        return b""


def _http_hint(code: int) -> str:
    if code == 404:
        return "wrong endpoint: is this a server of the engine you named?"
    if code in (401, 403):
        return "the server wants an API key (api_key=)"
    if code == 400:
        return "the server rejected the request; check the model name and prompt"
    return "see the server's log"


def _prompt_list(prompts: Any) -> list[str | list[int]]:
    if isinstance(prompts, (str, bytes)):
        prompts = [prompts]
    out = list(prompts)
    if not out:
        raise ServingError("no prompts to send")
    for i, p in enumerate(out):
        ok = isinstance(p, str) or (isinstance(p, list) and p and all(
            isinstance(t, int) and not isinstance(t, bool) for t in p))
        if not ok:
            raise ServingError(f"prompt {i} is {type(p).__name__}: expected a string or a "
                               "non-empty list of token ids")
    return out


def read_prompt_file(path: str | Path, limit: int | None = None) -> list[str | list[int]]:
    """JSON Lines, one prompt per line: {"prompt": str} is sent as text, {"input_ids": [...]}
    as token ids (the server's tokenizer must be the one they came from)."""
    out: list[str | list[int]] = []
    for n, row in iter_jsonl(path):
        if isinstance(row.get("prompt"), str):
            out.append(row["prompt"])
        elif isinstance(row.get("input_ids"), list):
            out.append(row["input_ids"])
        else:
            raise ServingError(f"line {n} has neither prompt nor input_ids", str(path),
                               "one JSON object per line")
        if limit and len(out) >= limit:
            break
    return _prompt_list(out)


def _check_max_tokens(n: int, name: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ServingError(f"{name} must be a positive integer, got {n!r}")
    return n


def measure_server(engine: str, base_url: str, prompts: Sequence[str | list[int]],
                   max_new_tokens: int = 64, *, timeout: float = 120.0, retries: int = 2,
                   backoff: float = 0.5, api_key: str | None = None,
                   **options: Any) -> ObservedMetrics:
    """Send the prompts to ENGINE's server at BASE_URL (greedy, MAX_NEW_TOKENS each) and read back
    its speculative figures, the server's own arguments in ``details`` where it shows them.
    OPTIONS go to the engine's `measure` (e.g. SGLang ``version``, vLLM ``model``)."""
    found = registered(engine, where="engine")
    if found.observe is None:
        raise ServingError(f"the kit cannot measure a running {found.title} server yet", None,
                           "pass its log or metrics text to --observed instead")
    max_new_tokens = _check_max_tokens(max_new_tokens, "max_new_tokens")
    plist = _prompt_list(prompts)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    client = HttpClient(base_url, timeout=timeout, retries=retries, backoff=backoff,
                        headers=headers)
    obs, args = found.observe.measure(client, plist, max_new_tokens, **options)
    if args is not None:
        record_server_args(obs, args)
    return obs


# ------------------------------------------------------------------------------------------------
# The server's own view of its arguments

def record_server_args(obs: ObservedMetrics, args: dict[str, Any]) -> None:
    """The server's own arguments into details (server_args; settings for simulations), and the
    launch checks of engines/launch.py run on them (launch_findings: the same findings as
    inspect --launch). Kept inside details so that --out stays readable by --observed."""
    obs.details["server_args"] = args
    obs.details["settings"] = {k: args.get(k) for k in ("num_steps", "topk", "num_draft_tokens")}
    findings = server_launch_findings(args)
    obs.details["launch_findings"] = [f.to_json() for f in findings]
    obs.notes.extend(f"{f.severity}: {f.message}" for f in findings)


def server_launch_findings(args: dict[str, Any]) -> list:
    """engines/launch.py's checks on the server's own arguments, for the release it reports
    (else the engine's newest). The draft's own config is not at hand here, so the MLA check
    assumes a non-MLA draft only when it can read the draft path as a local directory."""
    from eagle3_nb.engines import newest_profiles, resolve_engine
    from eagle3_nb.engines.launch import launch_findings, launch_from_args

    launch = launch_from_args(args)
    version = args.get("version")
    profiles = ([resolve_engine(f"{launch.engine}=={version}")] if version else
                [p for p in newest_profiles() if p.name == launch.engine])
    return launch_findings(launch, _local_draft_config(launch.draft), profiles)


def _local_draft_config(draft: str | None):
    if not draft or not Path(draft).is_dir():
        return None
    from eagle3_nb.io.checkpoint import Checkpoint
    try:
        return Checkpoint.open(draft).config
    except Eagle3NbError:
        return None
