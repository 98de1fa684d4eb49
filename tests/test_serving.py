"""The serving client end to end against real local HTTP servers (127.0.0.1, port 0) started here.

A fake SGLang serves the recorded /generate and /get_server_info answers; a fake vLLM serves
/v1/models, /v1/completions and a /metrics whose spec-decode counters grow by fixed counts per
completion, so the client's before/after difference can be checked exactly.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

import pytest

from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.engines.sglang.metrics import RATE_SGLANG_REQUEST
from eagle3_nb.engines.vllm.metrics import RATE_VLLM
from eagle3_nb.observed.client import HttpClient, ServingError, measure_server

REC = Path(__file__).parent / "recordings"


def measure_sglang(url, prompts, max_new_tokens=64, **options):
    return measure_server("sglang", url, prompts, max_new_tokens, **options)


def measure_vllm(url, prompts, max_tokens=64, **options):
    return measure_server("vllm", url, prompts, max_tokens, **options)
MODEL = "meta-llama/Llama-3.1-8B-Instruct"

App = Callable[[str, str, bytes], tuple[int, str, bytes]]


def rec_json(name: str):
    return json.loads((REC / name).read_text())


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _serve(self, method: str):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        status, ctype, payload = self.server.app(method, self.path, body)
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (the timeout test)

    def do_GET(self):  # noqa: N802
        self._serve("GET")

    def do_POST(self):  # noqa: N802
        self._serve("POST")

    def log_message(self, *args):  # keep pytest output clean
        pass


@pytest.fixture
def serve():
    """serve(app) -> base URL of a ThreadingHTTPServer on 127.0.0.1 running app."""
    started = []

    def start(app: App) -> str:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        httpd.daemon_threads = True
        httpd.app = app
        t = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                             daemon=True)
        t.start()
        started.append((httpd, t))
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    yield start
    for httpd, t in started:
        httpd.shutdown()
        httpd.server_close()
        t.join(timeout=5)


def _json(status: int, obj) -> tuple[int, str, bytes]:
    return status, "application/json", json.dumps(obj).encode()


NOT_FOUND = (404, "application/json", b'{"detail":"Not Found"}')


class FakeSGLang:
    def __init__(self, generate: str, info_path: str | None = "/server_info",
                 info: str = "sglang-0.5.23-server_info.json"):
        self.response = rec_json(generate)
        self.info_path = info_path
        self.info = rec_json(info)
        self.bodies: list[dict] = []
        self.paths: list[str] = []

    def __call__(self, method, path, body):
        self.paths.append(path)
        if method == "POST" and path == "/generate":
            self.bodies.append(json.loads(body))
            return _json(200, self.response)
        if method == "GET" and path == self.info_path:
            return _json(200, self.info)
        return NOT_FOUND


PER_REQUEST = {"drafts": 20, "draft_tokens": 60, "accepted": 33, "per_pos": [15, 11, 7]}


class FakeVLLM:
    """Counters start at the recording's lifetime totals and grow per completion."""

    def __init__(self, spec: bool = True, lag_scrapes: int = 0, models=(MODEL,),
                 server_info: str | None = None):
        self.server_info = server_info   # a recording served at /server_info (dev mode)
        self.c = {"drafts": 612, "draft_tokens": 1836, "accepted": 1003, "per_pos": [478, 337, 188]}
        self.spec = spec
        self.pending = 0
        self.lag = lag_scrapes
        self.models = list(models)
        self.bodies: list[dict] = []
        self.scrapes = 0

    def metrics_text(self) -> str:
        lab = f'engine="0",model_name="{MODEL}"'
        out = ["# HELP vllm:num_requests_running Number of requests in model execution batches.",
               "# TYPE vllm:num_requests_running gauge",
               f"vllm:num_requests_running{{{lab}}} 0.0"]
        if self.spec:
            for base, key in (("num_drafts", "drafts"), ("num_draft_tokens", "draft_tokens"),
                              ("num_accepted_tokens", "accepted")):
                out += [f"# TYPE vllm:spec_decode_{base} counter",
                        f"vllm:spec_decode_{base}_total{{{lab}}} {float(self.c[key])}",
                        f"vllm:spec_decode_{base}_created{{{lab}}} 1.7629416e+09"]
            out.append("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter")
            for i, v in enumerate(self.c["per_pos"]):
                out.append(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{lab},'
                           f'position="{i}"}} {float(v)}')
        return "\n".join(out) + "\n"

    def _apply(self):
        for _ in range(self.pending):
            for k in ("drafts", "draft_tokens", "accepted"):
                self.c[k] += PER_REQUEST[k]
            self.c["per_pos"] = [a + b for a, b in zip(self.c["per_pos"], PER_REQUEST["per_pos"])]
        self.pending = 0

    def __call__(self, method, path, body):
        if method == "GET" and path == "/v1/models":
            data = rec_json("vllm-0.33-models.json")
            data["data"] = [dict(data["data"][0], id=m) for m in self.models]
            return _json(200, data)
        if method == "GET" and path == "/server_info?config_format=json" and self.server_info:
            return _json(200, rec_json(self.server_info))
        if method == "POST" and path == "/v1/completions":
            self.bodies.append(json.loads(body))
            self.pending += 1
            return _json(200, rec_json("vllm-0.33-completion.json"))
        if method == "GET" and path == "/metrics":
            self.scrapes += 1
            if self.lag > 0 and self.pending:
                self.lag -= 1  # counters not updated yet on this scrape
            else:
                self._apply()
            return 200, "text/plain; version=0.0.4; charset=utf-8", self.metrics_text().encode()
        return NOT_FOUND


# ------------------------------------------------------------------------------------------------
# SGLang


def test_sglang_0523_end_to_end(serve):
    app = FakeSGLang("sglang-0.5.23-generate.json")
    url = serve(app)
    obs = measure_sglang(url, ["What is the capital of France?", [1, 2, 3]], max_new_tokens=64)
    # the request bodies follow the documented recipe
    assert app.bodies[0] == {"text": "What is the capital of France?",
                             "sampling_params": {"temperature": 0, "max_new_tokens": 64}}
    assert app.bodies[1]["input_ids"] == [1, 2, 3]
    # two copies of the recorded request: 23 verify steps, 64 tokens, 40 of 69 drafts each
    assert obs.engine == "sglang" and obs.n_requests == 2 and obs.version_detected == "0.5.23"
    assert obs.mean_accept_length == pytest.approx(128 / 46)
    assert obs.mean_acceptance_length == pytest.approx(1 + 80 / 46)
    assert obs.accept_rate == pytest.approx(80 / 138)
    assert obs.accept_rate_convention == RATE_SGLANG_REQUEST
    assert obs.per_position_acceptance == pytest.approx([20 / 23, 14 / 23, 6 / 23])
    assert [r["prompt_index"] for r in obs.per_request] == [0, 1]
    assert obs.per_request[0]["num_correct_drafts"] == 40
    # server info read from /get_server_info, kept apart from the request figures
    assert obs.details["server_info_path"] == "/server_info"  # the canonical route, asked first
    assert obs.details["server_avg_spec_accept_length"] == pytest.approx(2.7431)
    assert obs.details["server"]["speculative_num_draft_tokens"] == 4
    json.loads(obs.to_json())


@pytest.mark.parametrize("recording, version, expected_len, expected_vllm", [
    ("sglang-0.5.16-generate.json", "0.5.16", 48 / 20, 1 + 27 / 20),
    ("sglang-0.5.9-generate.json", "0.5.9", 64 / 30, 1 + 33 / 30),
    ("sglang-0.4.10-generate.json", "0.4.10", 64 / 34, None),
])
def test_sglang_each_version_and_server_info_fallback(serve, recording, version, expected_len,
                                                      expected_vllm):
    app = FakeSGLang(recording, info_path="/get_server_info",
                     info="sglang-server_info-eagle-algo.json")
    obs = measure_server("sglang", serve(app), ["hi"], 32)
    assert obs.version_detected == version
    assert obs.mean_accept_length == pytest.approx(expected_len)
    if expected_vllm is None:
        assert obs.mean_acceptance_length is None
    else:
        assert obs.mean_acceptance_length == pytest.approx(expected_vllm)
    assert app.paths == ["/generate", "/server_info", "/get_server_info"]
    assert obs.details["server_info_path"] == "/get_server_info"
    assert any("not EAGLE3" in n for n in obs.notes)


def test_sglang_without_server_info_still_measures(serve):
    app = FakeSGLang("sglang-0.5.23-generate.json", info_path=None)
    obs = measure_sglang(serve(app), ["hi"])
    assert obs.mean_accept_length == pytest.approx(64 / 23)
    assert any("neither /get_server_info nor /server_info" in n for n in obs.notes)


def test_sglang_spec_off_is_an_error(serve):
    app = FakeSGLang("sglang-spec-off-generate.json")
    with pytest.raises(ServingError, match="speculative decoding looks off") as e:
        measure_sglang(serve(app), ["hi"])
    assert "/generate" in str(e.value)


# ------------------------------------------------------------------------------------------------
# vLLM


def test_vllm_end_to_end_counter_difference(serve):
    app = FakeVLLM()
    url = serve(app)
    obs = measure_vllm(url, ["a", "b", [5, 6, 7]], max_tokens=64, settle_polls=0)
    assert [b["model"] for b in app.bodies] == [MODEL] * 3  # from /v1/models
    assert app.bodies[0] == {"model": MODEL, "prompt": "a", "max_tokens": 64, "temperature": 0}
    assert app.bodies[2]["prompt"] == [5, 6, 7]
    # only these 3 requests count: 60 drafts, 180 draft tokens, 99 accepted, per pos 45/33/21
    assert (obs.n_drafts, obs.n_drafted, obs.n_accepted) == (60, 180, 99)
    assert obs.mean_acceptance_length == pytest.approx(1 + 99 / 60)
    assert obs.mean_accept_length == pytest.approx(2.65)
    assert obs.accept_rate == pytest.approx(0.55) and obs.accept_rate_convention == RATE_VLLM
    assert obs.per_position_acceptance == pytest.approx([0.75, 0.55, 0.35])
    # the lifetime totals (612 + 60 drafts ...) would give another figure
    lifetime = 1 + (1003 + 99) / (612 + 60)
    assert abs(obs.mean_accept_length - lifetime) > 0.01
    assert obs.n_requests == 3 and obs.details["completion_tokens"] == 3 * 64
    assert app.scrapes == 2


def test_vllm_counters_that_lag_are_polled_a_bounded_number_of_times(serve):
    app = FakeVLLM(lag_scrapes=1)
    obs = measure_vllm(serve(app), ["a"], model=MODEL, settle_polls=2, settle_s=0.01)
    assert obs.mean_accept_length == pytest.approx(1 + 33 / 20)
    assert app.scrapes == 3


def test_vllm_no_drafts_counted_is_an_error(serve):
    app = FakeVLLM(lag_scrapes=10)  # counters never move while we look
    with pytest.raises(ServingError, match="no draft token counted"):
        measure_vllm(serve(app), ["a"], model=MODEL, settle_polls=2, settle_s=0.01)
    assert app.scrapes == 4  # before + 1 + 2 polls, then give up


def test_vllm_spec_off_is_an_error(serve):
    with pytest.raises(ServingError, match="speculative decoding looks off"):
        measure_vllm(serve(FakeVLLM(spec=False)), ["a"], settle_polls=0)


def test_vllm_several_models_need_a_choice(serve):
    with pytest.raises(ServingError, match="several models"):
        measure_vllm(serve(FakeVLLM(models=(MODEL, "other"))), ["a"])


# ------------------------------------------------------------------------------------------------
# transport errors


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_connection_refused():
    url = f"http://127.0.0.1:{_free_port()}"
    t0 = time.monotonic()
    with pytest.raises(ServingError, match="connection refused") as e:
        measure_sglang(url, ["hi"], retries=1, backoff=0.01, timeout=2)
    assert "2 attempt(s)" in str(e.value) and isinstance(e.value, Eagle3NbError)
    with pytest.raises(ServingError, match="connection refused"):
        measure_vllm(url, ["hi"], model=MODEL, retries=0, timeout=2)
    assert time.monotonic() - t0 < 5


def test_http_500_fails_at_once(serve):
    calls = []

    def app(method, path, body):
        calls.append(path)
        return 500, "text/plain", b"Internal Server Error: CUDA out of memory"

    with pytest.raises(ServingError, match="HTTP 500.*CUDA out of memory"):
        measure_sglang(serve(app), ["hi"], retries=3, backoff=0.01)
    assert calls == ["/generate"]  # a 500 is not retried


def test_http_503_is_retried_then_succeeds(serve):
    state = {"n": 0}
    good = FakeSGLang("sglang-0.5.23-generate.json")

    def app(method, path, body):
        if path == "/generate" and state["n"] < 2:
            state["n"] += 1
            return 503, "text/plain", b"busy"
        return good(method, path, body)

    obs = measure_sglang(serve(app), ["hi"], retries=2, backoff=0.01)
    assert obs.mean_accept_length == pytest.approx(64 / 23)
    with pytest.raises(ServingError, match="HTTP 503"):
        state["n"] = 0
        measure_sglang(serve(app), ["hi"], retries=1, backoff=0.01)


def test_non_json_answer(serve):
    def app(method, path, body):
        return 200, "text/html", b"<html><body>nginx welcome</body></html>"

    with pytest.raises(ServingError, match="not JSON"):
        measure_sglang(serve(app), ["hi"], retries=0)
    with pytest.raises(ServingError, match="/metrics is not Prometheus text"):
        measure_vllm(serve(app), ["hi"], model=MODEL, retries=0)

    def other(method, path, body):  # Prometheus text, but no vllm:* metric at all
        return 200, "text/plain", b"process_cpu_seconds_total 1.5\n"

    with pytest.raises(ServingError, match="not a vLLM server"):
        measure_vllm(serve(other), ["hi"], model=MODEL, retries=0)


def test_not_an_sglang_answer(serve):
    with pytest.raises(ServingError, match="no meta_info"):
        measure_sglang(serve(lambda m, p, b: _json(200, {"text": "x"})), ["hi"], retries=0)


def test_timeout(serve):
    def app(method, path, body):
        time.sleep(0.6)
        return _json(200, {})

    with pytest.raises(ServingError, match="timed out"):
        measure_sglang(serve(app), ["hi"], timeout=0.2, retries=0)


def test_base_url_and_arguments_are_checked():
    for bad in ("", "   ", "localhost:30000", "ftp://x"):
        with pytest.raises(ServingError):
            HttpClient(bad)
    with pytest.raises(ServingError, match="no prompts"):
        measure_sglang("http://127.0.0.1:9", [])
    with pytest.raises(ServingError, match="max_new_tokens"):
        measure_sglang("http://127.0.0.1:9", ["a"], max_new_tokens=0)
    with pytest.raises(Eagle3NbError, match="no engine called 'tgi'"):
        measure_server("tgi", "http://127.0.0.1:9", ["a"])
    assert HttpClient("http://127.0.0.1:30000/").url("/generate") == \
        "http://127.0.0.1:30000/generate"


# ------------------------------------------------------------------------------------------------
# the CLI: eagle3-nb observe, and its figures fed back as --observed


def test_observe_cli_measures_writes_and_is_read_back(serve, tmp_path, capsys):
    from conftest import SAMPLES
    from eagle3_nb.cli import main
    from eagle3_nb.observed.metrics import parse_observed

    app = FakeSGLang("sglang-0.5.23-generate.json")
    url = serve(app)
    out = tmp_path / "observed.json"
    assert main(["observe", "sglang", url, "--n-samples", "3", "--max-new-tokens", "16",
                 "--out", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    prompts = [json.loads(line)["prompt"] for line in
               (SAMPLES / "prompts.jsonl").read_text().splitlines()[:3]]
    assert [b["text"] for b in app.bodies] == prompts  # the bundled prompts, three of them
    assert app.bodies[0]["sampling_params"] == {"temperature": 0, "max_new_tokens": 16}
    assert printed["n_requests"] == 3 and printed["version_detected"] == "0.5.23"
    back = parse_observed(out)
    assert back.mean_accept_length == pytest.approx(printed["mean_accept_length"])
    assert back.accept_rate_convention == RATE_SGLANG_REQUEST
    assert any("written by eagle3-nb observe" in n for n in back.notes)


def test_observe_cli_bad_server_is_exit_2_with_nothing_written(tmp_path, capsys):
    from eagle3_nb.cli import main

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "observed.json"
    assert main(["observe", "vllm", f"http://127.0.0.1:{port}", "--timeout", "2",
                 "--out", str(out)]) == 2
    assert "eagle3-nb: error:" in capsys.readouterr().err and not out.exists()


# ------------------------------------------------------------------------------------------------
# The server's own view of its arguments. The recordings follow the engines' code (each names
# its source in "_recording"): SGLang's /server_info top level is its flat ServerArgs fields
# (0.5.7-0.5.16 dataclasses.asdict, 0.5.23 resolved_dict plus launch_command); vLLM's
# /server_info?config_format=json is {"vllm_config": VllmConfig as JSON, ...}, dev mode only.


def test_sglang_server_args_give_settings_and_launch_findings(serve, tmp_path):
    import shutil
    draft = tmp_path / "draft"
    shutil.copytree(Path(__file__).parents[1] / "data_samples" / "drafts" / "good", draft)
    app = FakeSGLang("sglang-0.5.23-generate.json", info="sglang-0.5.23-server_info-args.json")
    app.info["speculative_draft_model_path"] = str(draft)   # a draft the kit can read
    obs = measure_sglang(serve(app), ["hi"], max_new_tokens=8)
    args = obs.details["server_args"]
    assert args["method"] == "EAGLE3" and args["tensor_parallel"] == 8
    assert args["attention_backend"] == "trtllm_mla" and args["cuda_graphs"] is True
    assert obs.details["settings"] == {"num_steps": 3, "topk": 1, "num_draft_tokens": 4}
    found = obs.details["launch_findings"]
    assert [f["code"] for f in found] == ["LAUNCH_SETTING", "LAUNCH_SETTING"]
    assert "trtllm_mla" in found[0]["message"] and found[0]["engine"] == "sglang==0.5.23"
    # the bundled draft's 4 heads cannot be sharded over the server's TP 8
    assert "sharded 8 ways" in found[1]["message"] and found[1]["severity"] == "error"
    assert any("MLA backend" in n for n in obs.notes)
    json.loads(obs.to_json())   # --out stays readable


def test_sglang_eagle_algorithm_from_server_args(serve):
    app = FakeSGLang("sglang-0.5.9-generate.json", info="sglang-server_info-eagle-algo.json")
    obs = measure_sglang(serve(app), ["hi"], max_new_tokens=8, version="0.5.9")
    errors = [f for f in obs.details["launch_findings"] if f["severity"] == "error"]
    assert any("--speculative-algorithm is EAGLE" in f["message"] for f in errors)


def test_vllm_server_info_in_dev_mode(serve):
    obs = measure_vllm(serve(FakeVLLM(server_info="vllm-0.33-server_info.json")), ["hi"],
                       max_tokens=8, settle_polls=0)
    args = obs.details["server_args"]
    assert args["method"] == "eagle" and args["num_steps"] == 3 and args["max_model_len"] == 131072
    assert obs.details["settings"] == {"num_steps": 3, "topk": None, "num_draft_tokens": None}
    assert any(f["severity"] == "error" and "eagle3" in f["message"].lower()
               for f in obs.details["launch_findings"])


def test_vllm_without_dev_mode_says_where_the_settings_are(serve):
    obs = measure_vllm(serve(FakeVLLM()), ["hi"], max_tokens=8, settle_polls=0)
    assert "server_args" not in obs.details
    assert any("VLLM_SERVER_DEV_MODE=1" in n for n in obs.notes)


def test_observe_out_with_server_args_is_read_back_by_observed(serve, tmp_path):
    from eagle3_nb.observed.metrics import parse_observed
    app = FakeSGLang("sglang-0.5.23-generate.json", info="sglang-0.5.23-server_info-args.json")
    obs = measure_sglang(serve(app), ["hi"], max_new_tokens=8)
    out = tmp_path / "obs.json"
    out.write_text(obs.to_json())
    again = parse_observed(out)
    assert again.details["settings"]["num_draft_tokens"] == 4
