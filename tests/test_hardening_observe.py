"""`eagle3-nb observe` and what it writes, against servers that misbehave (issue 28).

Every server here is a real HTTP server on 127.0.0.1 (port 0) in a thread: one that drips its
answer a byte at a time, one whose answer never ends, one that redirects to another host, a
vLLM whose /metrics claims a draft position of 300 million, one that wants a password the URL
carries. Each must end in a clear ServingError (exit 2 from the CLI) within a bounded time, with
no traceback and no password in the message. A saved observe JSON that was edited is refused by
field; `observe --out` never replaces a file it did not write.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import SAMPLES
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.observed.client import HttpClient, ServingError, measure_server
from eagle3_nb.observed.metrics import parse_observed

REC = Path(__file__).parent / "recordings"
GENERATE = (REC / "sglang-0.5.23-generate.json").read_bytes()
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


class _Handler(BaseHTTPRequestHandler):
    """Hands the whole exchange to the server's `app(handler)`, which writes what it likes."""
    protocol_version = "HTTP/1.1"

    def _serve(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.body = self.rfile.read(n) if n else b""
        self.server.seen.append((self.command, self.path, dict(self.headers)))
        try:
            self.server.app(self)
        except (BrokenPipeError, ConnectionResetError):
            self.server.gave_up.set()   # the client hung up: what a bounded client does
        self.close_connection = True

    do_GET = do_POST = _serve  # noqa: N815

    def log_message(self, *args):
        pass


def reply(h: BaseHTTPRequestHandler, status: int, body: bytes, ctype="application/json",
          headers=()):
    h.send_response(status)
    h.send_header("Content-Type", ctype)
    h.send_header("Content-Length", str(len(body)))
    for k, v in headers:
        h.send_header(k, v)
    h.end_headers()
    h.wfile.write(body)


@pytest.fixture
def serve():
    """serve(app, host="127.0.0.1") -> (base URL, server); the server records what it saw."""
    started = []

    def start(app, host="127.0.0.1"):
        httpd = ThreadingHTTPServer((host, 0), _Handler)
        httpd.daemon_threads = True
        httpd.app, httpd.seen, httpd.gave_up = app, [], threading.Event()
        t = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                             daemon=True)
        t.start()
        started.append((httpd, t))
        return f"http://{host}:{httpd.server_address[1]}", httpd

    yield start
    for httpd, t in started:
        httpd.shutdown()
        httpd.server_close()
        t.join(timeout=5)


def drip(h: BaseHTTPRequestHandler, seconds: float = 20.0):
    """A complete, valid answer, sent one byte every half second (20 s in all at most)."""
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(GENERATE)))
    h.end_headers()
    end = time.monotonic() + seconds
    for i in range(len(GENERATE)):
        if time.monotonic() > end:
            return
        h.wfile.write(GENERATE[i:i + 1])
        h.wfile.flush()
        time.sleep(0.5)


# ----------------------------------------------------------------------------- the deadline

def test_a_dripping_answer_ends_at_the_deadline_not_never(serve):
    """A socket timeout of 2 s never fires on a byte every 0.5 s: the deadline must."""
    url, _ = serve(drip)
    t0 = time.monotonic()
    with pytest.raises(ServingError, match="no complete answer within 2 s") as e:
        measure_server("sglang", url, ["hi"], 8, timeout=2, retries=2, backoff=0.01)
    assert time.monotonic() - t0 < 6      # one attempt: an answer under way is not retried
    assert isinstance(e.value, Eagle3NbError)


def test_dripping_headers_are_cut_too(serve):
    def slow_headers(h):
        for ch in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 60:
            h.wfile.write(bytes([ch]))
            h.wfile.flush()
            time.sleep(0.5)

    url, _ = serve(slow_headers)
    t0 = time.monotonic()
    with pytest.raises(ServingError, match="timed out after 1.5 s"):
        measure_server("sglang", url, ["hi"], 8, timeout=1.5, retries=1, backoff=0.01)
    assert time.monotonic() - t0 < 6      # two attempts of 1.5 s


def test_observe_cli_on_a_drip_is_exit_2_in_bounded_time(serve, tmp_path):
    url, _ = serve(drip)
    out = tmp_path / "obs.json"
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "eagle3_nb.cli", "observe", "sglang", url,
                        "--n-samples", "1", "--timeout", "2", "--out", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "no complete answer within 2 s" in r.stderr
    assert time.monotonic() - t0 < 20
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("timeout", ["nan", "inf", "-1", "0"])
def test_a_timeout_that_is_no_duration_is_refused(timeout, tmp_path):
    r = subprocess.run([sys.executable, "-m", "eagle3_nb.cli", "observe", "sglang",
                        "http://127.0.0.1:9", "--n-samples", "1", "--timeout", timeout],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--timeout" in r.stderr


# ----------------------------------------------------------------------------- the size cap

def test_an_answer_that_never_ends_is_cut_at_the_size_cap(serve):
    """No Content-Length, 256 MiB streamed: the client stops at its cap and hangs up."""
    sent = [0]

    def endless(h):
        h.protocol_version = "HTTP/1.0"   # close-delimited: only the end of the stream ends it
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.end_headers()
        chunk = b" " * (1 << 20)
        for _ in range(256):
            h.wfile.write(chunk)
            sent[0] += len(chunk)

    url, server = serve(endless)
    client = HttpClient(url, timeout=30, retries=0, max_bytes=4 << 20)
    with pytest.raises(ServingError, match="past the limit of 4194304 bytes"):
        client.request("GET", "/server_info")
    assert server.gave_up.wait(10) and sent[0] < 128 << 20


def test_a_declared_huge_answer_is_refused_before_reading_it(serve):
    def huge(h):
        h.send_response(200)
        h.send_header("Content-Length", str(10 << 30))
        h.end_headers()
        h.wfile.write(b"{")

    url, _ = serve(huge)
    t0 = time.monotonic()
    with pytest.raises(ServingError, match="declares 10737418240 bytes"):
        measure_server("sglang", url, ["hi"], 8, timeout=10, retries=0)
    assert time.monotonic() - t0 < 5


# ----------------------------------------------------------------------------- redirects

def test_a_redirect_to_another_host_is_not_followed(serve):
    other_url, other = serve(lambda h: reply(h, 200, GENERATE), host="127.0.0.2")

    def redirect(h):
        reply(h, 302, b"", headers=[("Location", f"{other_url}/generate")])

    url, _ = serve(redirect)
    with pytest.raises(ServingError, match="redirects .* not followed") as e:
        measure_server("sglang", url, ["hi"], 8, timeout=5, retries=0)
    assert "127.0.0.2" in str(e.value)
    assert other.seen == []                          # the other host was never asked


def test_a_redirect_to_another_scheme_is_not_followed(serve):
    url, _ = serve(lambda h: reply(h, 307, b"", headers=[("Location", "https://127.0.0.1:1/x")]))
    with pytest.raises(ServingError, match="not followed"):
        HttpClient(url, timeout=5, retries=0).request("GET", "/server_info")


def test_a_redirect_on_the_same_server_is_followed(serve):
    def app(h):
        if h.path == "/server_info":
            reply(h, 307, b"", headers=[("Location", "/server_info/")])
        else:
            reply(h, 200, b'{"ok": true}')

    url, server = serve(app)
    assert HttpClient(url, timeout=5, retries=0).get_json("/server_info") == {"ok": True}
    assert [p for _, p, _ in server.seen] == ["/server_info", "/server_info/"]


# ----------------------------------------------------------------------------- figures' bounds

def _vllm_with_position(position: str):
    lab = f'engine="0",model_name="{MODEL}"'
    metrics = "\n".join([
        "# TYPE vllm:spec_decode_num_drafts counter",
        f"vllm:spec_decode_num_drafts_total{{{lab}}} 10.0",
        f"vllm:spec_decode_num_draft_tokens_total{{{lab}}} 30.0",
        f"vllm:spec_decode_num_accepted_tokens_total{{{lab}}} 12.0",
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{lab},position="{position}"}} 5.0',
    ]) + "\n"
    models = json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]})
    completion = json.dumps({"choices": [{"text": "x"}], "usage": {"completion_tokens": 4}})

    def app(h):
        if h.path == "/v1/models":
            reply(h, 200, models.encode())
        elif h.path == "/metrics":
            reply(h, 200, metrics.encode(), "text/plain; version=0.0.4")
        elif h.path == "/v1/completions":
            reply(h, 200, completion.encode())
        else:
            reply(h, 404, b'{"detail":"Not Found"}')
    return app, metrics


def test_a_position_label_of_300_million_is_refused_not_allocated(serve):
    app, metrics = _vllm_with_position("300000000")
    url, _ = serve(app)
    t0 = time.monotonic()
    with pytest.raises(ServingError, match="position label is 300000000"):
        measure_server("vllm", url, ["hi"], 8, timeout=10, retries=0)
    assert time.monotonic() - t0 < 5
    with pytest.raises(Eagle3NbError, match="no draft reaches that deep"):
        parse_observed(metrics)                  # the same text given as --observed
    obs = parse_observed(_vllm_with_position("2")[1])   # a real position still reads
    assert obs.per_position_acceptance == [0.0, 0.0, 0.5]


def test_per_position_lists_longer_than_a_draft_are_refused():
    line = ("SpecDecoding metrics: Mean acceptance length: 2.0, Accepted: 10 tokens, Drafted: 30 "
            "tokens, Per-position acceptance rate: " + ", ".join(["0.5"] * 1000)
            + ", Avg Draft acceptance rate: 33.3%")
    with pytest.raises(Eagle3NbError, match="1000 entries"):
        parse_observed(line)
    meta = json.loads(GENERATE)
    meta["meta_info"]["spec_correct_drafts_histogram"] = [1] * 100000
    with pytest.raises(Eagle3NbError, match="100000 entries"):
        parse_observed(meta)


# ----------------------------------------------------------------------------- credentials

SECRET = "s3cr3t-Pw"


def test_a_password_in_the_url_is_sent_as_basic_auth_and_never_shown(serve):
    def guarded(h):
        if h.headers.get("Authorization") != "Basic " + base64.b64encode(
                f"alice:{SECRET}".encode()).decode():
            reply(h, 401, b"unauthorized")
        else:
            reply(h, 500, f"boom near {h.path}".encode(), "text/plain")

    url, server = serve(guarded)
    with_password = url.replace("http://", f"http://alice:{SECRET}@")
    with pytest.raises(ServingError, match="HTTP 500") as e:
        measure_server("sglang", with_password, ["hi"], 8, timeout=5, retries=0)
    assert SECRET not in str(e.value) and "alice" not in str(e.value)
    assert server.seen and all(SECRET not in p for _, p, _ in server.seen)
    wrong = url.replace("http://", f"http://alice:{SECRET}x@")
    with pytest.raises(ServingError, match="HTTP 401") as e:
        measure_server("sglang", wrong, ["hi"], 8, timeout=5, retries=0)
    assert SECRET not in str(e.value)


def test_a_password_in_a_failing_url_is_never_echoed(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://bob:{SECRET}@127.0.0.1:{port}"
    with pytest.raises(ServingError, match="connection refused") as e:
        measure_server("vllm", url, ["hi"], 8, timeout=2, retries=0, model=MODEL)
    assert SECRET not in str(e.value)
    r = subprocess.run([sys.executable, "-m", "eagle3_nb.cli", "observe", "sglang", url,
                        "--n-samples", "1", "--timeout", "2"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert SECRET not in r.stderr + r.stdout and "127.0.0.1" in r.stderr
    bad_port = f"http://bob:{SECRET}@127.0.0.1:port"
    with pytest.raises(ServingError) as e:
        HttpClient(bad_port)
    assert SECRET not in str(e.value)


# ----------------------------------------------------------------------------- saved JSON

def _saved(tmp_path: Path, **changes) -> Path:
    data = {"engine": "sglang", "source": "SGLang /generate at http://x", "mean_accept_length":
            2.5, "accept_rate_convention": None, "details": {"settings": {
                "num_steps": 3, "topk": 1, "num_draft_tokens": 4}}}
    for key, value in changes.items():
        if key.startswith("settings_"):
            data["details"]["settings"][key[len("settings_"):]] = value
        else:
            data[key] = value
    path = tmp_path / "observed.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("change, field", [
    ({"details": "oops"}, "details"),
    ({"settings_num_steps": "abc"}, "num_steps"),
    ({"settings_num_steps": 10 ** 6}, "num_steps"),
    ({"settings_topk": True}, "topk"),
    ({"notes": "a note"}, "notes"),
    ({"engine": 3}, "engine"),
    ({"per_position_acceptance": "x"}, "per_position_acceptance"),
    ({"per_position_acceptance": [0.5] * 300}, "per_position_acceptance"),
    ({"accept_length_histogram": [1, 2]}, "accept_length_histogram"),
    ({"n_drafts": "many"}, "n_drafts"),
    ({"per_request": {"a": 1}}, "per_request"),
    ({"draft_tokens_per_step": 10 ** 9}, "draft_tokens_per_step"),
])
def test_an_edited_saved_observation_is_refused_by_field(tmp_path, change, field):
    path = _saved(tmp_path, **change)
    with pytest.raises(Eagle3NbError, match=field):
        parse_observed(path)


def test_a_sound_saved_observation_still_reads(tmp_path):
    obs = parse_observed(_saved(tmp_path, n_drafts=3.0))
    assert obs.details["settings"]["num_steps"] == 3 and obs.n_drafts == 3


def test_accept_with_an_edited_observation_is_exit_2_without_traceback(tmp_path):
    path = _saved(tmp_path, settings_num_steps="abc")
    r = subprocess.run([sys.executable, "-m", "eagle3_nb.cli", "accept",
                        str(SAMPLES / "drafts" / "good"), "--target", str(SAMPLES / "target"),
                        "--observed", str(path), "--n-samples", "1", "--max-new-tokens", "2"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "num_steps" in r.stderr


# ----------------------------------------------------------------------------- observe --out

def _observe(url: str, out: Path, *extra: str):
    return subprocess.run([sys.executable, "-m", "eagle3_nb.cli", "observe", "sglang", url,
                           "--n-samples", "1", "--max-new-tokens", "4", "--out", str(out),
                           *extra], capture_output=True, text=True, timeout=120)


def _sglang(h):
    if h.path == "/generate":
        reply(h, 200, GENERATE)
    else:
        reply(h, 404, b'{"detail":"Not Found"}')


def test_observe_out_refuses_a_file_it_did_not_write(serve, tmp_path):
    url, server = serve(_sglang)
    mine = tmp_path / "notes.json"
    mine.write_text('{"my": "data"}')
    for extra in ((), ("--overwrite",)):
        r = _observe(url, mine, *extra)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert mine.read_text() == '{"my": "data"}'
    assert server.seen == []                         # refused before the server was asked
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.json"]


def test_observe_out_never_replaces_a_symlink(serve, tmp_path):
    url, _ = serve(_sglang)
    target = tmp_path / "elsewhere.json"
    target.write_text("precious")
    link = tmp_path / "obs.json"
    link.symlink_to(target)
    for extra in ((), ("--overwrite",)):
        r = _observe(url, link, *extra)
        assert r.returncode == 2 and "symbolic link" in r.stderr, r.stderr
        assert link.is_symlink() and target.read_text() == "precious"


def test_observe_out_replaces_its_own_output_only_with_overwrite(serve, tmp_path):
    url, _ = serve(_sglang)
    out = tmp_path / "obs.json"
    r = _observe(url, out)
    assert r.returncode == 0, r.stderr
    first = json.loads(out.read_text())
    assert first["kind"] == "eagle3-nb observe"
    assert parse_observed(out).mean_accept_length == pytest.approx(first["mean_accept_length"])
    before = out.stat().st_mtime_ns
    r = _observe(url, out)
    assert r.returncode == 2 and "--overwrite" in r.stderr and out.stat().st_mtime_ns == before
    os.utime(out, ns=(before - 10 ** 9, before - 10 ** 9))
    r = _observe(url, out, "--overwrite")
    assert r.returncode == 0, r.stderr
    assert out.stat().st_mtime_ns != before - 10 ** 9
    assert sorted(p.name for p in tmp_path.iterdir()) == ["obs.json"]   # no temp file left
