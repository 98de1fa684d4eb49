"""Measure a running SGLang or vLLM server: send prompts, read back its speculative figures.

This is how a target too big for one machine is measured: the serving engine is the distributed
runtime, the kit only reads it. Standard library only (``urllib``); every request has a timeout
and a bounded number of retries; the base URL is always given by the caller (no default host).

* SGLang: ``POST /generate`` with ``{"text": ..., "sampling_params": {"temperature": 0,
  "max_new_tokens": N}}`` per prompt; each response's ``meta_info`` is read with
  :func:`eagle3_nb.observed.metrics.parse_sglang_meta_info` (every documented version's names); then
  ``GET /get_server_info`` (falling back to ``/server_info``) for the server's settings and
  lifetime ``avg_spec_accept_length`` (kept in ``details``, not mixed into your figures).
* vLLM: ``GET /metrics`` before, OpenAI ``POST /v1/completions`` (temperature 0, ``max_tokens``)
  per prompt, ``GET /metrics`` after; the figures come from the **difference** of the spec-decode
  counters, so only these requests count (unless other clients use the server at the same time).

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
from typing import Any, Iterable, Sequence

from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.io.checkpoint import iter_jsonl
from eagle3_nb.observed.metrics import (MetricsFormatError, ObservedMetrics, VLLMSpecCounters,
                                        parse_prometheus, parse_sglang_meta_info,
                                        parse_sglang_server_info, summarize_sglang_requests,
                                        vllm_spec_counters)

__all__ = ["ServingError", "HttpClient", "measure_sglang", "measure_vllm", "measure_server",
           "sglang_server_info", "read_prompt_file"]

_RETRY_STATUS = (502, 503, 504)
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


class ServingError(Eagle3NbError):
    """The server could not be reached or answered something the kit cannot use."""


def _check_base_url(base_url: str) -> str:
    if not isinstance(base_url, str) or not base_url.strip():
        raise ServingError("no server URL given", None,
                           "pass the server's base URL, e.g. http://HOST:30000 for SGLang or "
                           "http://HOST:8000 for vLLM")
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
        return "wrong endpoint: is this an SGLang (/generate) or vLLM (/v1/completions) server?"
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


# ------------------------------------------------------------------------------------------------
# SGLang


def sglang_server_info(client: HttpClient) -> tuple[dict[str, Any] | None, str | None]:
    """``GET /server_info``, else ``/get_server_info``. Returns (JSON, path) or (None, None) when
    neither endpoint exists. Both routes answer in every release read (0.5.7-0.5.23,
    python/sglang/srt/entrypoints/http_server.py); /get_server_info is the deprecated alias that
    logs a warning on the server, so it is asked only when /server_info is absent."""
    for path in ("/server_info", "/get_server_info"):
        resp = client.request("GET", path, ok_404=True)
        if resp.status == 404:
            continue
        data = resp.json()
        if not isinstance(data, dict):
            raise ServingError(f"{path} answered {type(data).__name__}, expected an object",
                               resp.url)
        return data, path
    return None, None


def measure_sglang(base_url: str, prompts: Iterable[str | list[int]], max_new_tokens: int = 64,
                   *, version: str | None = None, timeout: float = 120.0, retries: int = 2,
                   backoff: float = 0.5, sampling_params: dict[str, Any] | None = None,
                   server_info: bool = True, api_key: str | None = None) -> ObservedMetrics:
    """Send each prompt to SGLang's native ``/generate`` (greedy) and pool the ``meta_info``
    figures. A prompt may be a string (``text``) or a list of token ids (``input_ids``).

    Returns :class:`~eagle3_nb.observed.metrics.ObservedMetrics` with ``per_request`` filled (one
    :class:`~eagle3_nb.observed.metrics.RequestSpecStats` dict per prompt, plus its ``prompt_index``).
    """
    max_new_tokens = _check_max_tokens(max_new_tokens, "max_new_tokens")
    plist = _prompt_list(prompts)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    client = HttpClient(base_url, timeout=timeout, retries=retries, backoff=backoff,
                        headers=headers)
    params = {"temperature": 0, "max_new_tokens": max_new_tokens, **(sampling_params or {})}
    stats = []
    for i, prompt in enumerate(plist):
        body = {"sampling_params": params}
        body["input_ids" if isinstance(prompt, list) else "text"] = prompt
        data = client.post_json("/generate", body)
        where = f"{client.url('/generate')} (prompt {i})"
        if isinstance(data, list) and len(data) == 1:
            data = data[0]
        if not isinstance(data, dict) or "meta_info" not in data:
            keys = sorted(data)[:10] if isinstance(data, dict) else type(data).__name__
            raise ServingError(f"answer has no meta_info ({keys}): not an SGLang /generate "
                               "response", where, "is this an SGLang server?")
        try:
            stats.append(parse_sglang_meta_info(data, version))
        except MetricsFormatError as e:
            raise ServingError(e.what, where, e.todo) from None
    obs = summarize_sglang_requests(stats, source=f"SGLang /generate at {client.base_url}")
    for i, rec in enumerate(obs.per_request or []):
        rec["prompt_index"] = i
    obs.details["max_new_tokens"] = max_new_tokens
    if server_info:
        info, path = sglang_server_info(client)
        if info is None:
            obs.notes.append("neither /get_server_info nor /server_info exists on this server")
        else:
            obs.details["server_info_path"] = path
            try:
                srv = parse_sglang_server_info(info, f"SGLang {path}")
                obs.details["server"] = srv.details.get("server", {})
                obs.details["server_avg_spec_accept_length"] = srv.mean_accept_length
                obs.notes.append(f"server lifetime avg_spec_accept_length "
                                 f"{srv.mean_accept_length:.3f} (all requests since start) is in "
                                 "details; the headline figures are your requests only")
                obs.notes.extend(n for n in srv.notes if "EAGLE3" in n)
                if srv.version_detected:
                    obs.details["server_version"] = srv.version_detected
            except MetricsFormatError as e:
                obs.notes.append(f"server info not usable: {e.what}")
            record_server_args(obs, sglang_server_args(info))
    return obs


# ------------------------------------------------------------------------------------------------
# vLLM


def _vllm_model(client: HttpClient) -> str:
    data = client.get_json("/v1/models")
    models = [m.get("id") for m in (data.get("data") or [])] if isinstance(data, dict) else []
    models = [m for m in models if isinstance(m, str)]
    if len(models) == 1:
        return models[0]
    if not models:
        raise ServingError("/v1/models lists no model", client.url("/v1/models"),
                           "pass model= explicitly")
    raise ServingError(f"the server serves several models {models}", client.url("/v1/models"),
                       "pass model= to choose one")


def _scrape(client: HttpClient, model: str | None) -> VLLMSpecCounters | None:
    resp = client.request("GET", "/metrics")
    try:
        samples = parse_prometheus(resp.text())
    except MetricsFormatError as e:
        raise ServingError(f"/metrics is not Prometheus text: {e.one_line()}", resp.url) from None
    if not any(s.name.startswith("vllm:spec_decode_") for s in samples):
        if not any(s.name.startswith("vllm:") for s in samples):
            raise ServingError("/metrics has no vllm:* metric: not a vLLM server (or metrics "
                               "are disabled)", resp.url)
        return None
    try:
        return vllm_spec_counters(samples, model)
    except MetricsFormatError as e:
        raise ServingError(e.what, resp.url, e.todo) from None


def measure_vllm(base_url: str, prompts: Iterable[str | list[int]], max_tokens: int = 64, *,
                 model: str | None = None, api_key: str | None = None, timeout: float = 120.0,
                 retries: int = 2, backoff: float = 0.5, settle_polls: int = 3,
                 settle_s: float = 0.5, num_speculative_tokens: int | None = None
                 ) -> ObservedMetrics:
    """Scrape ``/metrics``, send each prompt to ``/v1/completions`` (temperature 0), scrape again,
    and compute the figures from the counter difference. If the counters have not moved yet the
    scrape is retried ``settle_polls`` times, ``settle_s`` apart; still nothing raises (no draft
    counted: speculative decoding looks off). ``model`` defaults to the only model of
    ``/v1/models``."""
    max_tokens = _check_max_tokens(max_tokens, "max_tokens")
    plist = _prompt_list(prompts)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    client = HttpClient(base_url, timeout=timeout, retries=retries, backoff=backoff,
                        headers=headers)
    if model is None:
        model = _vllm_model(client)
    server_args = vllm_server_args(client)
    before = _scrape(client, model)
    completion_tokens = 0
    for i, prompt in enumerate(plist):
        data = client.post_json("/v1/completions", {"model": model, "prompt": prompt,
                                                    "max_tokens": max_tokens, "temperature": 0})
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
            raise ServingError("answer has no choices: not an OpenAI completions response",
                               f"{client.url('/v1/completions')} (prompt {i})")
        usage = data.get("usage") or {}
        if isinstance(usage.get("completion_tokens"), int):
            completion_tokens += usage["completion_tokens"]
    after = None
    diff = None
    for poll in range(max(0, int(settle_polls)) + 1):
        if poll:
            time.sleep(settle_s)
        after = _scrape(client, model)
        if after is None:
            continue
        base = before or VLLMSpecCounters(0.0 if after.num_drafts is not None else None, 0.0, 0.0,
                                          [0.0] * len(after.accepted_per_pos or []),
                                          after.model_name, after.legacy_v0)
        try:
            diff = after.minus(base)
        except MetricsFormatError as e:
            raise ServingError(e.what, client.url("/metrics"), e.todo) from None
        if diff.num_draft_tokens > 0:
            break
    murl = client.url("/metrics")
    if after is None:
        raise ServingError("/metrics has no vllm:spec_decode_* counter after the requests: "
                           "speculative decoding looks off", murl,
                           "start vLLM with --speculative-config")
    assert diff is not None
    if diff.num_draft_tokens <= 0:
        raise ServingError(f"no draft token counted for these {len(plist)} request(s): "
                           "speculative decoding looks off", murl,
                           "check --speculative-config and that the draft loaded")
    try:
        obs = diff.to_observed(f"vLLM /v1/completions + /metrics difference at {client.base_url}",
                               num_speculative_tokens)
    except MetricsFormatError as e:
        raise ServingError(e.what, murl, e.todo) from None
    obs.n_requests = len(plist)
    obs.details.update({"model": model, "max_tokens": max_tokens,
                        "completion_tokens": completion_tokens})
    if before is None:
        obs.notes.append("no spec counters before the requests; counted from zero")
    obs.notes.append("counts are the /metrics difference around these requests; other clients "
                     "using the server at the same time would be counted too")
    record_server_args(obs, server_args)
    return obs


def measure_server(engine: str, base_url: str, prompts: Sequence[str | list[int]],
                   max_new_tokens: int = 64, **kwargs: Any) -> ObservedMetrics:
    """``engine`` = ``"sglang"`` or ``"vllm"``; the rest goes to :func:`measure_sglang` /
    :func:`measure_vllm` (``max_new_tokens`` is vLLM's ``max_tokens``)."""
    e = str(engine).lower()
    if e == "sglang":
        return measure_sglang(base_url, prompts, max_new_tokens, **kwargs)
    if e == "vllm":
        return measure_vllm(base_url, prompts, max_new_tokens, **kwargs)
    raise ServingError(f"engine {engine!r} is not one of sglang, vllm")


# ------------------------------------------------------------------------------------------------
# The server's own view of its arguments

def sglang_server_args(info: dict[str, Any]) -> dict[str, Any]:
    """The speculative settings of an SGLang server-info answer. Its top level is the server's
    arguments, flat: dataclasses.asdict(server_args) in 0.5.7-0.5.16 (http_server.py
    server_info), server_args.resolved_dict() plus launch_command in 0.5.23 (utils/common.py
    build_server_info); the field names are server_args.py's (from 0.5.19
    arg_groups/fields/{spec,exec_,parallel}.py)."""
    return {"engine": "sglang", "version": _str(info.get("version")),
            "model": _str(info.get("model_path")),
            "draft": _str(info.get("speculative_draft_model_path")),
            "method": _str(info.get("speculative_algorithm")),
            "num_steps": _int_or_none(info.get("speculative_num_steps")),
            "topk": _int_or_none(info.get("speculative_eagle_topk")),
            "num_draft_tokens": _int_or_none(info.get("speculative_num_draft_tokens")),
            "tensor_parallel": _int_or_none(info.get("tp_size")),
            "cuda_graphs": not info.get("disable_cuda_graph", False),
            "attention_backend": _str(info.get("attention_backend")),
            "draft_attention_backend": _str(info.get("speculative_draft_attention_backend")),
            "launch_command": _str(info.get("launch_command")),
            "source": "SGLang server info"}


VLLM_SERVER_INFO = "/server_info?config_format=json"


def vllm_server_args(client: HttpClient) -> dict[str, Any] | None:
    """vLLM answers /server_info only with VLLM_SERVER_DEV_MODE=1 (0.11.0
    entrypoints/openai/api_server.py show_server_info; from 0.18
    entrypoints/serve/dev/server_info/api_router.py): {"vllm_config": VllmConfig dumped as JSON
    with config_format=json, "vllm_env", "system_env"}. Otherwise a 404: None."""
    try:
        resp = client.request("GET", VLLM_SERVER_INFO, ok_404=True)
        data = None if resp.status == 404 else resp.json()
    except ServingError:       # optional: the measurement itself says what is wrong
        return None
    config = data.get("vllm_config") if isinstance(data, dict) else None
    if not isinstance(config, dict):
        return None
    spec = _section(config, "speculative_config")
    model = _section(config, "model_config")
    return {"engine": "vllm", "version": None, "model": _str(model.get("model")),
            "draft": _str(spec.get("model")), "method": _str(spec.get("method")),
            "num_steps": _int_or_none(spec.get("num_speculative_tokens")), "topk": None,
            "num_draft_tokens": None,
            "tensor_parallel": _int_or_none(_section(config, "parallel_config")
                                            .get("tensor_parallel_size")),
            "cuda_graphs": not model.get("enforce_eager", False),
            "attention_backend": _str(spec.get("attention_backend")),
            "draft_attention_backend": None, "max_model_len":
                _int_or_none(model.get("max_model_len")),
            "source": f"vLLM {VLLM_SERVER_INFO}"}


def _section(config: dict[str, Any], name: str) -> dict[str, Any]:
    value = config.get(name)
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return None if value is None else str(value)[:500]


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def record_server_args(obs: ObservedMetrics, args: dict[str, Any] | None) -> None:
    """The server's own arguments into details (server_args; settings for simulations), and the
    launch checks of engines/launch.py run on them (launch_findings: the same findings as
    inspect --launch). Kept inside details so that --out stays readable by --observed."""
    if args is None:
        obs.notes.append("the server does not show its arguments (vLLM: only with "
                         "VLLM_SERVER_DEV_MODE=1); pass the serving command to inspect --launch")
        return
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
    from eagle3_nb.engines.launch import LaunchSettings, launch_findings

    fields = {k: args.get(k) for k in LaunchSettings.__dataclass_fields__
              if k not in ("flags",) and k in args}
    launch = LaunchSettings(**fields)
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
