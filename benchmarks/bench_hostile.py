"""Benchmark: hostile inputs cost what a healthy draft costs, not what they declare.

Each case is a draft directory (the bundled `good` draft's config) whose weight file is hostile,
run as `eagle3-nb inspect DIR --no-stats --json` in a fresh interpreter; its wall time and peak
RSS (wait4's ru_maxrss) are printed beside the same command on the healthy bundled draft,
measured in the same run. Cases:

- big header: a safetensors header declaring 1,000,000 tensors (refused from a count in the raw
  bytes before parsing);
- long name: one tensor named with 90 MB of characters (refused);
- zip bomb: pytorch_model.bin whose extra member deflates to 256 MiB (refused from the zip
  central directory before torch.load);
- sparse dump: a 3 GiB speculators hs_0.safetensors (sparse file, valid header) listed as a
  draft (headers only), and given to `accept --hidden-states` (refused from its header);
- 1 TiB checkpoint: a sparse model.safetensors declaring one 1 TiB tensor (the largest sparse
  file the file system here allows in comfort; a 1 PB file cannot be created on ext4, whose
  limit is 16 TiB): headers only, with `report`'s hashing budget covering the rest.

A second table (issue 28) runs `eagle3-nb observe` against servers in threads of this process,
beside the same command on a healthy fake SGLang: an answer dripped a byte every 0.5 s (the
deadline, --timeout 3, ends it), 1 GiB streamed without a length (cut at the size cap), 10 GiB
declared, a redirect to another host, a vLLM /metrics with position="300000000", and a URL
carrying a password to a closed port; then the preflight refusals: report with -p compare_to
the known-good draft and --out inside it, -p compare_to a missing folder, --observed a hand-edited
observe JSON, and `notebooks` into the kit's own package.

A third table (issue 28, bounds) runs `accept` with drafting settings it cannot afford (from the
flags, a launch command and an observe JSON), --temperature inf and a 6 GB --observed log, beside
a healthy one-prompt `accept`; `inspect` with a 6 GB --launch file and a rope_theta NaN; `log`
on a log mixing SGLang and vLLM lines and on a 6 GB log; and, with the SGLang side environment,
`probe` on a draft whose config declares vocab_size 12000000.

A script that prints a table, not a test.

    python benchmarks/bench_hostile.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GOOD = REPO / "data_samples" / "drafts" / "good"
PICKLE = REPO / "data_samples" / "drafts" / "pickle-bin"


def safetensors_header(entries: dict, pad_to: int = 8) -> bytes:
    raw = json.dumps(entries, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % pad_to)
    return struct.pack("<Q", len(raw)) + raw


def draft_dir(root: Path, name: str) -> Path:
    d = root / name
    d.mkdir()
    shutil.copy(GOOD / "config.json", d / "config.json")
    return d


def big_header(root: Path) -> Path:
    d = draft_dir(root, "big-header")
    entries = {f"t{i}": {"dtype": "BF16", "shape": [1], "data_offsets": [2 * i, 2 * i + 2]}
               for i in range(1_000_000)}
    (d / "model.safetensors").write_bytes(safetensors_header(entries) + b"\0" * 2_000_000)
    return d


def long_name(root: Path) -> Path:
    d = draft_dir(root, "long-name")
    entries = {"n" * (90 << 20): {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}}
    (d / "model.safetensors").write_bytes(safetensors_header(entries) + b"\0\0")
    return d


def zip_bomb(root: Path) -> Path:
    d = root / "zip-bomb"
    shutil.copytree(PICKLE, d)
    good = zipfile.ZipFile(PICKLE / "pytorch_model.bin")
    with zipfile.ZipFile(d / "pytorch_model.bin", "w") as out:
        for m in good.infolist():
            out.writestr(m.filename, good.read(m.filename))
        out.writestr("pytorch_model/data/999", b"\0" * (256 << 20), zipfile.ZIP_DEFLATED)
    return d


def sparse_file(path: Path, name: str, nbytes: int) -> None:
    shape = [nbytes // 2]
    header = safetensors_header({name: {"dtype": "BF16", "shape": shape,
                                        "data_offsets": [0, nbytes]}})
    with open(path, "wb") as f:
        f.write(header)
        f.truncate(len(header) + nbytes)


def sparse_dump(root: Path) -> Path:
    """hidden_states [seq, 4, 64] bf16 and token_ids [seq], 3 GiB in all, as vLLM writes them."""
    d = draft_dir(root, "sparse-dump")
    seq = (3 << 30) // (4 * 64 * 2 + 8)
    states = 4 * 64 * 2 * seq
    header = safetensors_header({
        "hidden_states": {"dtype": "BF16", "shape": [seq, 4, 64], "data_offsets": [0, states]},
        "token_ids": {"dtype": "I64", "shape": [seq], "data_offsets": [states, states + 8 * seq]}})
    with open(d / "hs_0.safetensors", "wb") as f:
        f.write(header)
        f.truncate(len(header) + states + 8 * seq)
    return d


def one_tib(root: Path) -> Path:
    d = draft_dir(root, "one-tib")
    sparse_file(d / "model.safetensors", "fc.weight", 1 << 40)
    return d


def command(name: str, path: Path) -> list[str]:
    if name.startswith("accept"):  # the dump as accept reads it, beside the good draft
        return ["accept", str(GOOD), "--hidden-states", str(path), "--target",
                str(GOOD.parent.parent / "target"), "--json"]
    return ["inspect", str(path), "--no-stats", "--json"]


def run_cli(args: list[str], python: str = sys.executable) -> tuple[float, float, int, str]:
    """(wall ms, peak RSS MB, exit code, first stderr line) of one fresh interpreter."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([python, "-m", "eagle3_nb.cli", *args], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = (time.perf_counter() - t0) * 1000
    err = proc.stderr.read().strip().splitlines()
    code = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024, code, (err[0] if err else "")


CASES = {"healthy (bundled good draft)": None, "big header (1e6 tensors)": big_header,
         "long name (90 MB)": long_name, "zip bomb (256 MiB inflated)": zip_bomb,
         "sparse dump (3 GiB)": sparse_dump, "accept on that dump": sparse_dump,
         "sparse checkpoint (1 TiB)": one_tib}


def build_cases(root: Path) -> None:
    for make in dict.fromkeys(CASES.values()):
        if make:
            make(root)


def fastest(runs: dict[str, tuple], repeat: int) -> dict[str, tuple]:
    """Each case's fastest of `repeat` interleaved rounds; runs: name -> run_cli's arguments."""
    best: dict[str, tuple] = {}
    for _ in range(repeat):
        for name, arguments in runs.items():
            run = run_cli(*arguments)
            if name not in best or run[0] < best[name][0]:
                best[name] = run
    return best


def print_table(title: str, best: dict[str, tuple], healthy: str, quiet: str,
                shown=lambda line: line) -> None:
    """Wall time and peak memory of each case beside the healthy run's, its exit code and the
    first line it answered (QUIET when it printed none)."""
    base_ms, base_mb = best[healthy][:2]
    print(f"{title:<30} {'wall ms':>8} {'x healthy':>9} {'peak MB':>8} {'x healthy':>9} "
          f"{'exit':>4}  answer")
    for name, (ms, mb, code, line) in best.items():
        print(f"{name:<30} {ms:>8.0f} {ms / base_ms:>9.2f} {mb:>8.0f} {mb / base_mb:>9.2f} "
              f"{code:>4}  {shown(line)[:90] or quiet}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--build", metavar="DIR", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.build:
        build_cases(Path(args.build))
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as tmp:
        root = Path(tmp)
        # built in another interpreter: a child forked from a parent that held the big headers
        # would report the parent's memory as its own peak
        subprocess.run([sys.executable, __file__, "--build", str(root)], check=True)
        paths = {name: (root / make.__name__.replace("_", "-") if make else GOOD)
                 for name, make in CASES.items()}
        best = fastest({name: (command(name, path),) for name, path in paths.items()},
                       args.repeat)
    print_table("case", best, "healthy (bundled good draft)", "ok (listed)")
    print()
    served_table(args.repeat)
    print()
    bounds_table(args.repeat)
    return 0


# ----------------------------------------------------------------------------- issue 28 rows

def reply(h, status: int, body: bytes, ctype: str = "application/json", headers=()) -> None:
    h.send_response(status)
    h.send_header("Content-Type", ctype)
    h.send_header("Content-Length", str(len(body)))
    for k, v in headers:
        h.send_header(k, v)
    h.end_headers()
    h.wfile.write(body)


GENERATE = json.dumps({"text": "x", "meta_info": {
    "id": "1", "finish_reason": {"type": "length", "length": 64}, "prompt_tokens": 27,
    "completion_tokens": 64, "spec_verify_ct": 23, "spec_accept_length": 64 / 23,
    "spec_num_correct_drafts": 40, "spec_num_proposed_drafts": 69,
    "spec_correct_drafts_histogram": [3, 6, 8, 6]}}).encode()


def healthy(h) -> None:
    if h.path == "/generate":
        reply(h, 200, GENERATE)
    else:
        reply(h, 404, b"{}")


def drip(h) -> None:
    h.send_response(200)
    h.send_header("Content-Length", str(len(GENERATE)))
    h.end_headers()
    for i in range(40):                      # 20 s at most
        h.wfile.write(GENERATE[i:i + 1])
        h.wfile.flush()
        time.sleep(0.5)


def endless(h) -> None:
    h.protocol_version = "HTTP/1.0"          # no length: only the end of the stream ends it
    h.send_response(200)
    h.end_headers()
    chunk = b" " * (1 << 20)
    for _ in range(1024):
        h.wfile.write(chunk)


def declared(h) -> None:
    h.send_response(200)
    h.send_header("Content-Length", str(10 << 30))
    h.end_headers()
    h.wfile.write(b"{")


def redirect(h) -> None:
    reply(h, 302, b"", headers=[("Location", "http://127.0.0.2:9/generate")])


def deep_position(h) -> None:
    if h.path == "/v1/models":
        reply(h, 200, b'{"data": [{"id": "m"}]}')
    elif h.path == "/metrics":
        lab = 'model_name="m"'
        text = "\n".join([f"vllm:spec_decode_num_drafts_total{{{lab}}} 10",
                          f"vllm:spec_decode_num_draft_tokens_total{{{lab}}} 30",
                          f"vllm:spec_decode_num_accepted_tokens_total{{{lab}}} 12",
                          "vllm:spec_decode_num_accepted_tokens_per_pos_total"
                          f'{{{lab},position="300000000"}} 5']) + "\n"
        reply(h, 200, text.encode(), "text/plain")
    else:
        reply(h, 404, b"{}")


def serve(app) -> str:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self):
            n = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(n)
            try:
                app(self)
            except OSError:                  # the client hung up: what a bounded client does
                pass
            self.close_connection = True

        do_GET = do_POST = _serve  # noqa: N815

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{httpd.server_address[1]}"


def closed_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def observe(engine: str, url: str) -> list[str]:
    return ["observe", engine, url, "--n-samples", "1", "--max-new-tokens", "8", "--timeout", "3"]


def served_rows(root: Path) -> dict[str, list[str]]:
    good = root / "known-good"
    shutil.copytree(GOOD, good)
    edited = root / "observed.json"
    edited.write_text(json.dumps({"kind": "eagle3-nb observe", "engine": "sglang",
                                  "source": "x", "mean_accept_length": 2.5,
                                  "accept_rate_convention": None, "details": "oops"}))
    import eagle3_nb
    package = Path(eagle3_nb.__file__).parent
    nan_head = GOOD.parent / "nan-head"
    return {
        "observe, healthy fake SGLang": observe("sglang", serve(healthy)),
        "drip, 1 byte / 0.5 s": observe("sglang", serve(drip)),
        "1 GiB body, no length": observe("sglang", serve(endless)),
        "10 GiB body declared": observe("sglang", serve(declared)),
        "redirect to another host": observe("sglang", serve(redirect)),
        "vLLM position=300000000": observe("vllm", serve(deep_position)),
        "password in URL, port closed": observe(
            "sglang", f"http://u:pw-secret@127.0.0.1:{closed_port()}"),
        "report --out in compare_to": ["report", str(nan_head), "-p", "compare_to", str(good),
                                       "--out", str(good / "rep")],
        "report compare_to missing": ["report", str(nan_head), "-p", "compare_to",
                                      str(root / "missing"), "--out", str(root / "rep")],
        "report --observed edited": ["report", str(GOOD), "--observed", str(edited),
                                     "--out", str(root / "rep")],
        "notebooks into the package": ["notebooks", str(package / "bench-notebooks")],
    }


def served_table(repeat: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-hostile-served-") as tmp:
        rows = served_rows(Path(tmp))
        best = fastest({name: (argv,) for name, argv in rows.items()}, repeat)
    print_table("observe / preflight case", best, "observe, healthy fake SGLang", "ok",
                lambda line: line.replace("pw-secret", "<PASSWORD SHOWN>"))


# ----------------------------------------------------------------------------- issue 28: bounds

TARGET = REPO / "data_samples" / "target"
RECORDINGS = REPO / "tests" / "recordings"
SGLANG = ("python -m sglang.launch_server --model-path m --speculative-algorithm EAGLE3 "
          "--speculative-draft-model-path d ")
SIDE_SGLANG = REPO / ".cache" / "engines" / "sglang-0.5.23" / "bin" / "python"


def accept(*flags: str) -> list[str]:
    return ["accept", str(GOOD), "--target", str(TARGET), "--n-samples", "1",
            "--max-new-tokens", "4", *flags]


def sparse_text(path: Path, head: bytes, tail: bytes = b"", size: int = 6 << 30) -> Path:
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)
        f.seek(size - len(tail))
        f.write(tail)
    return path


def edited_draft(root: Path, name: str, **config) -> Path:
    d = root / name
    shutil.copytree(GOOD, d)
    raw = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**raw, **config}))
    return d


def bounds_rows(root: Path) -> dict[str, tuple[list[str], str]]:
    """name -> (argv, python): drafting settings, non-finite numbers, a mixed log, 6 GB inputs
    and the probe's size check, beside a healthy one-prompt simulation."""
    sglang_log = (RECORDINGS / "sglang-0.5.23-decode.log").read_bytes()
    mixed = root / "mixed.log"
    mixed.write_bytes(sglang_log + (RECORDINGS / "vllm-0.33-specdecode.log").read_bytes())
    observed = root / "observed-tree.json"
    observed.write_text(json.dumps({"engine": "sglang", "source": "x", "mean_accept_length": 2.5,
                                    "accept_rate_convention": None, "details": {"settings": {
                                        "num_steps": 4, "topk": 200, "num_draft_tokens": None}}}))
    py = sys.executable
    rows = {
        "accept, healthy chain": (accept(), py),
        "accept --num-steps 1000000": (accept("--num-steps", "1000000"), py),
        "accept --topk 200": (accept("--topk", "200"), py),
        "accept --topk 100000": (accept("--topk", "100000"), py),
        "accept --launch topk 200": (accept("--launch", SGLANG + "--speculative-eagle-topk 200"),
                                     py),
        "accept --observed topk 200": (accept("--observed", str(observed)), py),
        "accept --temperature inf": (accept("--temperature", "inf"), py),
        "accept --observed 6 GB log": (accept("--observed", str(sparse_text(
            root / "big-observed.log", sglang_log, sglang_log))), py),
        "inspect --launch 6 GB file": (["inspect", str(GOOD), "--no-stats", "--launch", str(
            sparse_text(root / "big-serve.sh", SGLANG.encode()))], py),
        "inspect rope_theta NaN": (["inspect", str(edited_draft(root, "nan-rope",
                                                                 rope_theta=float("nan"))),
                                    "--no-stats"], py),
        "log, SGLang + vLLM mixed": (["log", str(mixed)], py),
        "log, 6 GB": (["log", str(sparse_text(root / "big.log", sglang_log, sglang_log))], py),
    }
    if SIDE_SGLANG.exists():
        rows["probe vocab_size 12000000"] = (["probe", str(edited_draft(
            root, "huge-vocab", vocab_size=12_000_000)), "--engine", "sglang"], str(SIDE_SGLANG))
    return rows


def bounds_table(repeat: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-hostile-bounds-") as tmp:
        rows = bounds_rows(Path(tmp))
        best = fastest(rows, repeat)
    print_table("bounds case", best, "accept, healthy chain", "ok")


if __name__ == "__main__":
    sys.exit(main())
