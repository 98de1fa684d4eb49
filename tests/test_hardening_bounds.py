"""Hardening, third round (#28): what a flag, a launch command, a server or a file claims is bounded
before anything runs. Drafting depth and tree size; non-finite numbers; a log mixing two engines'
lines; inputs of any size read bounded; the probe's build sized from config.json first, and an
out-of-memory never reported as the engine disagreeing."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eagle3_nb.checks.drafting import RunLimits, resolve_drafting, run_limits
from eagle3_nb.engines.launch import read_launch
from eagle3_nb.engines.registry import engines
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.observation import ObservedMetrics
from eagle3_nb.observed.metrics import parse_observed

ROOT = Path(__file__).resolve().parent.parent
DRAFTS = ROOT / "data_samples" / "drafts"
TARGET = ROOT / "data_samples" / "target"
RECORDINGS = Path(__file__).parent / "recordings"
SGLANG_LOG = RECORDINGS / "sglang-0.5.23-decode.log"
VLLM_LOG = RECORDINGS / "vllm-0.33-specdecode.log"
SGLANG = ("python -m sglang.launch_server --model-path m --speculative-algorithm EAGLE3 "
          "--speculative-draft-model-path d ")
SIX_GB = 6 << 30


def cli(*args, timeout=120, limit_memory=False, python=sys.executable, cwd=ROOT):
    """`eagle3-nb ARGS` in a child Python: (returncode, stdout, stderr, seconds). LIMIT_MEMORY:
    2 GB of address space, so reading a 6 GB file whole is a MemoryError, not a swap storm."""
    start = time.monotonic()
    proc = subprocess.run([str(python), "-m", "eagle3_nb.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          preexec_fn=_two_gb if limit_memory else None,
                          env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start


def _two_gb():
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def refused(rc, out, err, *words):
    """Exit 2, one line on stderr naming every word, no traceback, nothing on stdout."""
    assert rc == 2, (rc, out[-500:], err[-2000:])
    assert err.startswith("eagle3-nb") and "Traceback" not in err, err[-2000:]
    assert not out.strip(), out[-500:]
    for word in words:
        assert word in err, (word, err)


def draft_copy(tmp_path: Path, name: str = "good", **config) -> Path:
    dst = tmp_path / f"{name}-edited"
    shutil.copytree(DRAFTS / name, dst)
    raw = json.loads((dst / "config.json").read_text())
    raw.update(config)
    (dst / "config.json").write_text(json.dumps(raw, indent=2))
    return dst


def sparse_file(path: Path, head: bytes = b"", tail: bytes = b"", size: int = SIX_GB) -> Path:
    """SIZE bytes on paper, HEAD and TAIL written, holes between (no real disk use)."""
    with path.open("wb") as handle:
        handle.write(head)
        handle.truncate(size)
        handle.seek(size - len(tail))
        handle.write(tail)
    return path


# ----------------------------------------------------------------------------- drafting settings

@pytest.mark.parametrize("flags, words", [
    (["--num-steps", str(10 ** 6)], ["--num-steps", "num_steps 1000000", "limit of 64"]),
    (["--topk", "200"], ["--topk", "verifying 120201 tokens", "GiB"]),  # was a 14.5 GB tree
    (["--topk", "100000"], ["--topk", "vocabulary"]),                 # was a traceback
    (["--num-steps", "8", "--topk", "16"], ["--num-draft-tokens", "verifying 1809 tokens"]),
])
def test_accept_refuses_drafting_it_cannot_afford_before_loading_anything(flags, words):
    rc, out, err, seconds = cli("accept", DRAFTS / "good", "--target", TARGET, *flags,
                                "--n-samples", "1", "--max-new-tokens", "4", timeout=90)
    refused(rc, out, err, *words)
    assert seconds < 30


def test_a_wide_tree_capped_by_its_draft_tokens_is_still_simulated():
    d = resolve_drafting(num_steps=8, topk=16, num_draft_tokens=64)
    assert (d.num_steps, d.topk, d.num_draft_tokens) == (8, 16, 64)
    for shape in [(3, 1, 4), (5, 4, 8), (8, 8, None)]:   # engines' defaults and a wide tree
        d = resolve_drafting(*shape, limits=run_limits(DRAFTS / "good"))
        assert (d.num_steps, d.topk) == shape[:2]


def test_a_launch_command_with_absurd_drafting_is_refused_naming_its_flag(tmp_path):
    with pytest.raises(Eagle3NbError, match="--speculative-num-steps 1000000 is outside 1 to 64"):
        read_launch(SGLANG + "--speculative-num-steps 1000000")
    launch = read_launch(SGLANG + "--speculative-num-steps 4 --speculative-eagle-topk 200")
    with pytest.raises(Eagle3NbError) as caught:
        resolve_drafting(launch=launch)
    assert "--launch (--speculative-num-steps" in caught.value.one_line()
    assert "120201 tokens" in caught.value.one_line()
    command = tmp_path / "serve.sh"
    command.write_text(SGLANG + "--speculative-num-steps 1000000\n")
    refused(*cli("inspect", DRAFTS / "good", "--no-stats", "--launch", command)[:3],
            "--speculative-num-steps 1000000")


def test_report_refuses_a_launch_commands_absurd_tree_before_any_notebook(tmp_path):
    """What notebook 04 would copy from --launch is bounded in the report's preflight: exit 2,
    nothing written, instead of a failed notebook."""
    out = tmp_path / "report"
    rc, stdout, err, _ = cli("report", DRAFTS / "good", "--target", TARGET, "--out", out,
                             "--launch", SGLANG + "--speculative-num-steps 4 "
                             "--speculative-eagle-topk 200", timeout=120)
    refused(rc, stdout, err, "--launch (--speculative-num-steps", "120201 tokens")
    assert not out.exists()


def test_an_observe_files_server_arguments_are_bounded_naming_the_file(tmp_path):
    saved = ObservedMetrics("sglang", "http://127.0.0.1:30000", mean_accept_length=2.5,
                            accept_rate_convention="sglang",
                            details={"settings": {"num_steps": 4, "topk": 200,
                                                  "num_draft_tokens": None}})
    path = tmp_path / "observed.json"
    path.write_text(json.dumps(saved.to_dict()))
    with pytest.raises(Eagle3NbError) as caught:
        resolve_drafting(observed=parse_observed(path))
    line = caught.value.one_line()
    assert line.startswith("--observed: the server's own arguments (details.settings)"), line


def test_a_servers_meta_info_cannot_claim_an_absurd_draft_depth():
    answer = json.loads((RECORDINGS / "sglang-0.5.23-generate.json").read_text())
    answer["meta_info"]["spec_num_proposed_drafts"] = 23 * 200   # 200 drafts per verify step
    observed = parse_observed(json.dumps(answer))
    with pytest.raises(Eagle3NbError, match="num_steps 200 is over"):
        resolve_drafting(observed=observed)
    with pytest.raises(Eagle3NbError, match="not a whole number"):
        resolve_drafting(observed=ObservedMetrics("sglang", "x.json", 2.0,
                                                  details={"settings": {"num_steps": "abc"}}))


def test_positions_past_the_drafts_max_position_embeddings_are_refused(tmp_path):
    short = draft_copy(tmp_path, max_position_embeddings=32)
    with pytest.raises(Eagle3NbError, match="max_position_embeddings 32"):
        resolve_drafting(limits=run_limits(short, max_new_tokens=48))
    assert resolve_drafting(limits=run_limits(short, max_new_tokens=16)).num_steps == 4
    # with the prompts read: the longest prompt counts too (the bundled draft of 512 positions)
    rc, out, err, _ = cli("accept", DRAFTS / "short-context", "--target", TARGET,
                          "--max-new-tokens", "500", "--n-samples", "2", timeout=300)
    refused(rc, out, err, "max_position_embeddings 512")


# ----------------------------------------------------------------------------- non-finite numbers

def test_non_finite_flags_are_refused():
    with pytest.raises(Eagle3NbError, match="temperature inf"):
        resolve_drafting(temperature=float("inf"))
    rc, out, err, _ = cli("accept", DRAFTS / "good", "--target", TARGET, "--temperature", "inf")
    assert rc == 2 and "--temperature" in err and "Traceback" not in err
    rc, out, err, _ = cli("observe", "sglang", "http://127.0.0.1:9", "--timeout", "nan")
    assert rc == 2 and "--timeout: 'nan'" in err and "Traceback" not in err


@pytest.mark.parametrize("edit, key", [
    ({"rope_theta": float("nan")}, "rope_theta"),
    ({"rope_scaling": {"rope_type": "linear", "factor": float("inf")}}, "rope_scaling.factor"),
    ({"rope_theta": "fast"}, "rope_theta"),
])
def test_non_finite_rope_settings_in_a_config_are_refused(tmp_path, edit, key):
    draft = draft_copy(tmp_path, **edit)
    refused(*cli("inspect", draft, "--no-stats")[:3], key)
    target = tmp_path / "target.json"
    raw = json.loads((TARGET / "config.json").read_text())
    target.write_text(json.dumps({**raw, **edit}))
    refused(*cli("inspect", DRAFTS / "good", "--no-stats", "--target-config", target)[:3], key)


@pytest.mark.parametrize("value", ["Infinity", "NaN", "1e999"])
def test_non_finite_counts_in_a_launch_json_are_refused(value):
    command = ("vllm serve m --speculative-config '{\"method\": \"eagle3\", \"model\": \"d\", "
               f"\"num_speculative_tokens\": {value}}}'")
    with pytest.raises(Eagle3NbError, match="num_speculative_tokens has"):
        read_launch(command)
    with pytest.raises(Eagle3NbError, match="--speculative-num-steps has 'inf'"):
        read_launch(SGLANG + "--speculative-num-steps inf")
    with pytest.raises(Eagle3NbError, match="--speculative-eagle-topk has no value"):
        read_launch(SGLANG + "--speculative-eagle-topk")


def test_a_servers_infinite_argument_is_not_a_traceback():
    from eagle3_nb.engines.sglang.observe import server_args

    info = json.loads((RECORDINGS / "sglang-0.5.23-server_info-args.json").read_text())
    info["speculative_num_steps"] = float("inf")
    assert server_args(info)["num_steps"] is None


# ----------------------------------------------------------------------------- a mixed log

def test_a_log_mixing_two_engines_is_refused_unless_one_is_named(tmp_path):
    mixed = tmp_path / "server.log"
    mixed.write_text(SGLANG_LOG.read_text() + VLLM_LOG.read_text())
    titles = [engines()[name].title for name in ("sglang", "vllm")]   # the two in the log
    refused(*cli("log", mixed)[:3], "more than one engine", *titles)
    for name, alone in (("sglang", SGLANG_LOG), ("vllm", VLLM_LOG)):
        rc, out, err, _ = cli("log", mixed, "--engine", name, "--json")
        own = json.loads(cli("log", alone, "--engine", name, "--json")[1])
        data = json.loads(out)
        assert data["engine"] == name
        assert data["acceptance"]["mean_accept_length"] == \
            own["acceptance"]["mean_accept_length"], name


def test_an_engines_traceback_through_another_engines_library_is_still_its_own(tmp_path):
    from eagle3_nb.checks.log import check_log_text

    sglang_frames = SGLANG_LOG.read_text() + (
        "Traceback (most recent call last):\n"
        '  File "/x/sglang/srt/managers/scheduler.py", line 10, in run_scheduler_process\n'
        '  File "/x/sglang/srt/layers/activation.py", line 20, in <module>\n'
        '  File "/x/vllm/model_executor/layers/activation.py", line 30, in <module>\n'
        "ImportError: cannot import name 'x' from 'vllm._custom_ops'\n")
    assert check_log_text(sglang_frames).engine == "sglang"


# ----------------------------------------------------------------------------- bounded reading

def test_a_6_gb_launch_file_is_refused_without_reading_it(tmp_path):
    big = sparse_file(tmp_path / "serve.sh", head=SGLANG.encode() + b"\n")
    rc, out, err, seconds = cli("inspect", DRAFTS / "good", "--no-stats", "--launch", big,
                                limit_memory=True)
    refused(rc, out, err, "over 64 KiB")
    assert seconds < 30


def test_a_6_gb_observed_log_is_read_as_its_head_and_tail(tmp_path):
    lines = SGLANG_LOG.read_bytes()
    big = sparse_file(tmp_path / "server.log", head=lines, tail=b"\n" + lines)
    script = ("import sys, json; from pathlib import Path\n"
              "from eagle3_nb.observed.metrics import parse_observed\n"
              "o = parse_observed(Path(sys.argv[1]))\n"
              "print(json.dumps([o.engine, o.mean_accept_length, o.notes]))\n")
    proc = subprocess.run([sys.executable, "-c", script, str(big)], capture_output=True,
                          text=True, timeout=120, preexec_fn=_two_gb,
                          env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    engine, accept, notes = json.loads(proc.stdout)
    assert engine == "sglang"
    assert accept == pytest.approx(parse_observed(SGLANG_LOG).mean_accept_length)
    assert any("bytes between them skipped" in n for n in notes), notes
    giant_json = sparse_file(tmp_path / "observed.json", head=b'{"engine": "sglang", ')
    with pytest.raises(Eagle3NbError, match="too large to read whole"):
        parse_observed(giant_json)


def test_a_6_gb_log_is_read_bounded(tmp_path):
    big = sparse_file(tmp_path / "server.log", head=SGLANG_LOG.read_bytes(),
                      tail=SGLANG_LOG.read_bytes())
    rc, out, err, _ = cli("log", big, "--json", limit_memory=True)
    assert rc in (0, 1), err[-2000:]
    assert json.loads(out)["engine"] == "sglang"


# ----------------------------------------------------------------------------- the probe

def test_the_probe_sizes_the_declared_model_before_building_it(tmp_path):
    from eagle3_nb.io.checkpoint import Checkpoint
    from eagle3_nb.probe.budget import ProbeBudgetError, check_build_size

    good = Checkpoint.open(DRAFTS / "good")
    assert 0 < check_build_size(good) < 1 << 30
    huge = Checkpoint.open(draft_copy(tmp_path, vocab_size=12_000_000))   # a 200-byte edit
    with pytest.raises(ProbeBudgetError, match="vocab_size 12000000"):
        check_build_size(huge)
    with pytest.raises(ProbeBudgetError, match="this machine has free"):
        check_build_size(good, available=1 << 16)


def test_running_out_of_memory_while_loading_is_not_a_finding():
    torch = pytest.importorskip("torch")
    from eagle3_nb.probe.budget import ProbeOutOfMemory
    from eagle3_nb.probe.record import observe_load

    model = torch.nn.Linear(2, 2)

    def load(weights):
        list(weights)
        raise MemoryError()
    with pytest.raises(ProbeOutOfMemory):
        observe_load(model, load, [("weight", torch.zeros(2, 2))])


def test_running_out_of_memory_while_building_is_not_engine_disagrees(tmp_path):
    """The engine's build raising out of memory: a clear error, no ProbeResult with a build
    error (which would be ENGINE_DISAGREES). Run in a child Python: the probe installs stubs."""
    script = (
        "import sys\n"
        "import eagle3_nb.engines.probing as probing\n"
        "import eagle3_nb.engines.sglang.probe as adapter\n"
        "probing.engine_version = lambda engine: '0.5.23'\n"
        "def build(*a):\n"
        "    try:\n"
        "        raise RuntimeError('[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: "
        "can\\'t allocate memory: you tried to allocate 6144000000 bytes')\n"
        "    except RuntimeError as exc:\n"
        "        raise probing.BuildError('LlamaForCausalLMEagle3(config): RuntimeError') from exc\n"
        "adapter.build = build\n"
        "from eagle3_nb.probe import probe_checkpoint\n"
        "from eagle3_nb.errors import Eagle3NbError\n"
        "try:\n"
        "    result = probe_checkpoint(sys.argv[1], 'sglang')\n"
        "except Eagle3NbError as exc:\n"
        "    print('REFUSED', exc.one_line())\n"
        "else:\n"
        "    print('RESULT', [f.code for f in result.findings])\n")
    proc = subprocess.run([sys.executable, "-c", script, str(DRAFTS / "good")],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.stdout.startswith("REFUSED"), proc.stdout + proc.stderr[-2000:]
    assert "ran out of memory" in proc.stdout and "ENGINE_DISAGREES" not in proc.stdout


def side_env(engine: str, version: str) -> Path:
    """The engine's side environment, where tests/test_probe.py finds it, or a skip."""
    env = ROOT / ".cache" / "engines" / f"{engine}-{version}"
    if not (env / ".ready").exists():
        pytest.skip(f"no {engine} side environment (make engine-env ENGINE={engine} "
                    f"VERSION={version} sets it up)")
    return env / "bin" / "python"


@pytest.mark.parametrize("engine, version", [("sglang", "0.5.23"), ("vllm", "0.34.0")])
def test_the_probe_refuses_a_huge_declared_model_with_the_engine_installed(tmp_path, engine,
                                                                           version):
    python = side_env(engine, version)
    huge = draft_copy(tmp_path, vocab_size=12_000_000)
    rc, out, err, seconds = cli("probe", huge, "--engine", engine, python=python, cwd=tmp_path,
                                timeout=300)
    refused(rc, out, err, "vocab_size 12000000", "not asked to allocate")
    assert "ENGINE_DISAGREES" not in out + err and seconds < 120
