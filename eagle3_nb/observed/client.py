"""Measure a running engine server: send prompts, read back its speculative figures.

This is how a target too big for one machine is measured: the serving engine is the distributed
runtime, the kit only reads it. Standard library only (``urllib``); every request has a timeout
and a bounded number of retries; the base URL is always given by the caller (no default host).
Which endpoints are asked, and how the answers are read, is the engine's own
(`eagle3_nb/engines/<engine>/observe.py`, the Engine record's `observe`).

Connection refused, timeouts, HTTP errors and non-JSON answers raise :class:`ServingError`, an
:class:`~eagle3_nb.errors.Eagle3NbError`, naming the URL.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from eagle3_nb.engines.registry import engine as registered, engines
from eagle3_nb.errors import Eagle3NbError, ServingError
from eagle3_nb.io.checkpoint import iter_jsonl
from eagle3_nb.observation import ObservedMetrics

__all__ = ["ServingError", "HttpClient", "measure_server", "read_prompt_file"]

_RETRY_STATUS = (502, 503, 504)
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _check_base_url(base_url: str) -> str:
    if not isinstance(base_url, str) or not base_url.strip():
        ports = " or ".join(f"http://HOST:{e.observe.PORT} for {e.title}"
                            for e in engines().values() if e.observe)
        raise ServingError("no server URL given", None,
                           f"pass the server's base URL, e.g. {ports}")
    url = base_url.strip().rstrip("/")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ServingError(f"server URL {base_url!r} is not http(s)://HOST[:PORT]", None,
                           "give the scheme, host and port, e.g. http://10.0.0.5:30000")
    return url


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


class HttpClient:
    """A tiny JSON-over-HTTP client with timeouts and bounded retries.

    Retries (``retries`` extra attempts, exponential ``backoff`` seconds) happen on connection
    errors, timeouts and HTTP 502/503/504; other HTTP errors fail at once. Loopback hosts are
    reached directly; other hosts follow the environment's proxy settings (urllib's default).
    """

    def __init__(self, base_url: str, *, timeout: float = 120.0, retries: int = 2,
                 backoff: float = 0.5, headers: dict[str, str] | None = None):
        self.base_url = _check_base_url(base_url)
        if timeout <= 0:
            raise ServingError(f"timeout must be positive, got {timeout}")
        self.timeout = float(timeout)
        self.retries = max(0, int(retries))
        self.backoff = max(0.0, float(backoff))
        self.headers = dict(headers or {})
        host = urllib.parse.urlsplit(self.base_url).hostname
        handlers = [urllib.request.ProxyHandler({})] if host in _LOOPBACK else []
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
                with self._opener.open(req, timeout=self.timeout) as resp:
                    return HttpResponse(resp.status, resp.read(), url)
            except urllib.error.HTTPError as e:
                body = b""
                try:
                    body = e.read()
                except Exception:  # noqa: BLE001 - the status is what matters
                    pass
                if e.code == 404 and ok_404:
                    return HttpResponse(404, body, url)
                excerpt = body[:300].decode("utf-8", errors="replace").strip()
                last = f"HTTP {e.code} {e.reason}" + (f": {excerpt}" if excerpt else "")
                if e.code in _RETRY_STATUS and attempt < self.retries:
                    continue
                raise ServingError(f"{method} answered {last}", url, _http_hint(e.code)) from None
            except urllib.error.URLError as e:
                reason = e.reason
                if isinstance(reason, ConnectionRefusedError):
                    last = "connection refused"
                elif isinstance(reason, (socket.timeout, TimeoutError)):
                    last = f"timed out after {self.timeout:g} s"
                elif isinstance(reason, socket.gaierror):
                    raise ServingError(f"cannot resolve the host ({reason})", url,
                                       "check the server URL") from None
                else:
                    last = f"cannot connect ({reason})"
            except (socket.timeout, TimeoutError):
                last = f"timed out after {self.timeout:g} s"
            except (ConnectionError, http.client.HTTPException, OSError) as e:
                last = f"connection failed ({type(e).__name__}: {e})"
        tries = self.retries + 1
        raise ServingError(f"{method} failed after {tries} attempt(s): {last}", url,
                           "is the server running and listening on that host and port?")

    def get_json(self, path: str) -> Any:
        return self.request("GET", path).json()

    def post_json(self, path: str, payload: Any) -> Any:
        return self.request("POST", path, payload).json()


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
