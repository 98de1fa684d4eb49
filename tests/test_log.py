"""eagle3-nb log: the engine's own words, read within bounds, explained by signatures that are
data in the engines' folders, or said to be unknown.

The engine texts here are the engines' own: the vLLM ones were raised by vLLM 0.34.0's loader
under eagle3-nb probe (the test at the end re-raises them live when the side environment is
there), the SGLang one is the ValueError of llama_eagle3.py LlamaModel.__init__ (0.4.4.post2 to
0.5.11) inside the scheduler traceback SGLang prints.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eagle3_nb.checks.load import inspect_checkpoint
from eagle3_nb.checks.log import check_log, check_log_text
from eagle3_nb.cli import main
from eagle3_nb.io.logs import HEAD_BYTES, TAIL_BYTES, raised_errors, read_log

ROOT = Path(__file__).resolve().parent.parent
DRAFTS = ROOT / "data_samples" / "drafts"
TARGET_CONFIG = ROOT / "data_samples" / "target" / "config.json"

SGLANG_CRASH = """\
[2026-12-01 10:00:00] server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', \
tp_size=8, speculative_algorithm='EAGLE3', speculative_draft_model_path='/ckpt/draft', \
speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4, \
attention_backend='fa3', disable_cuda_graph=False, served_model_name=<object at 0x7f>)
[2026-12-01 10:00:05 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/usr/lib/python3/dist-packages/sglang/srt/managers/scheduler.py", line 2650, in run_scheduler_process
    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)
  File "/usr/lib/python3/dist-packages/sglang/srt/models/llama_eagle3.py", line 120, in __init__
    raise ValueError("EAGLE3 currently only supports 1 layer")
ValueError: EAGLE3 currently only supports 1 layer

[2026-12-01 10:00:06] Received sigquit from a child process. It usually means the child failed.
"""

VLLM_UNKNOWN_KEY = (
    "ValueError: There is no module or parameter named 'draft_model' in Eagle3LlamaForCausalLM. "
    "The available parameters belonging to  (Eagle3LlamaForCausalLM) are: "
    "{'model.layers.0.hidden_norm.weight', 'lm_head.weight'}")
VLLM_FC_SHAPE = ("AssertionError: Tried to load weights of size torch.Size([64, 256])to a "
                 "parameter of size torch.Size([64, 192])")


def vllm_log(raised: str, version: str = "0.34.0") -> str:
    return (f"INFO 12-01 10:00:00 [api_server.py:1] vLLM API server version {version}\n"
            "INFO 12-01 10:00:00 [utils.py:1] non-default args: {'model': 'meta-llama/"
            "Llama-3.1-8B-Instruct', 'speculative_config': {'method': 'eagle3', 'model': "
            "'/ckpt/draft', 'num_speculative_tokens': 3}, 'tensor_parallel_size': 8}\n"
            "ERROR 12-01 10:00:09 [core.py:1] EngineCore failed to start.\n"
            "Traceback (most recent call last):\n"
            '  File "/x/vllm/v1/engine/core.py", line 10, in run_engine_core\n'
            "    engine_core = EngineCoreProc(*args, **kwargs)\n"
            '  File "/x/vllm/model_executor/models/llama_eagle3.py", line 433, in load_weights\n'
            "    loader.load_weights(weights)\n"
            f"{raised}\n")


# ----------------------------------------------------------------------------- the text


def test_tracebacks_give_their_exception_and_frames_and_logged_errors_count_too():
    text = SGLANG_CRASH + "ERROR 12-01 [core.py:1] KeyError: 'layers.1.mlp.up_proj.weight'\n"
    errors = raised_errors(text)
    assert [e.type for e in errors] == ["ValueError", "KeyError"]
    assert errors[0].message == "EAGLE3 currently only supports 1 layer"
    assert errors[0].frames[-1].function == "__init__" and errors[0].frames[-1].line == 120
    assert errors[1].frames == [] and "layers.1" in errors[1].message


def test_a_message_over_several_lines_and_colours_and_carriage_returns():
    text = ("\x1b[31mTraceback (most recent call last):\r\n"
            '  File "/x/vllm/config/speculative.py", line 9, in __post_init__\r\n'
            "    raise ValueError(msg)\r\n"
            "ValueError: Speculators verifier must name a remote model repository.\r\n"
            "Select local verifiers explicitly with --model and --speculative-config\r\n"
            "\r\n")
    (error,) = raised_errors(text)
    assert error.message.endswith("--speculative-config") and "\x1b" not in error.message


def test_a_huge_log_is_read_as_its_head_and_tail(tmp_path):
    path = tmp_path / "huge.log"
    with path.open("wb") as handle:
        handle.write(b"vLLM API server version 0.34.0\n")
        line = b"INFO 12-01 10:00:00 [loggers.py:1] Engine 000: Avg prompt throughput: 1.0\n"
        handle.write(line * ((HEAD_BYTES + TAIL_BYTES) // len(line) + 50_000))
        handle.write(VLLM_FC_SHAPE.encode() + b"\n")
    started = time.perf_counter()
    text = read_log(path)
    assert time.perf_counter() - started < 5
    assert text.skipped > 0 and len(text.text) < HEAD_BYTES + TAIL_BYTES + 100
    reading = check_log(path)
    assert reading.engine == "vllm" and reading.version == "0.34.0"
    assert "skipped" in reading.note and any(f.code == "LOAD_ERROR" for f in reading.findings)


def test_a_missing_log_is_bad_input(tmp_path, capsys):
    assert main(["log", str(tmp_path / "nope.log")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("eagle3-nb: error:") and "Traceback" not in err


# ----------------------------------------------------------------------------- what it means


def test_sglang_one_layer_crash_is_named_with_its_arguments():
    reading = check_log_text(SGLANG_CRASH, "sglang==0.5.9")
    (finding,) = [f for f in reading.findings if f.code == "LOAD_ERROR"]
    assert finding.engine == "sglang==0.5.9" and finding.severity == "error"
    assert finding.evidence["signature"] == "sglang-one-layer"
    assert "0.5.12" in finding.evidence["next_step"]
    args = reading.server_args
    assert args["draft"] == "/ckpt/draft" and args["tensor_parallel"] == 8
    assert (args["num_steps"], args["topk"], args["num_draft_tokens"]) == (3, 1, 4)


def test_the_release_decides_which_texts_can_be_explained():
    unknown = check_log_text(SGLANG_CRASH)
    assert unknown.version is None and "pass --engine sglang==VERSION" in unknown.version_source
    assert [f.code for f in unknown.findings] == ["LOAD_ERROR"]  # every release's signatures
    later = check_log_text(SGLANG_CRASH, "sglang==0.5.16")
    (finding,) = later.findings
    assert finding.code == "LOG_UNRECOGNISED" and "0.4.4.post2 to 0.5.11" in finding.message


def test_an_exception_no_signature_knows_is_said_to_be_unknown_with_its_frames():
    text = vllm_log("RuntimeError: CUDA error: an illegal memory access was encountered")
    reading = check_log_text(text)
    (finding,) = [f for f in reading.findings if f.code == "LOG_UNRECOGNISED"]
    assert "not guessed at" in finding.message and finding.severity == "warning"
    assert finding.evidence["frames"][-1].endswith("llama_eagle3.py:433 load_weights")


def test_vllm_release_and_arguments_come_from_the_log():
    reading = check_log_text(vllm_log(VLLM_UNKNOWN_KEY))
    assert (reading.engine, reading.version, reading.version_source) == ("vllm", "0.34.0",
                                                                          "the log")
    (finding,) = [f for f in reading.findings if f.code == "LOAD_ERROR"]
    assert finding.evidence["param"] == "draft_model" and finding.engine == "vllm==0.34.0"
    assert reading.server_args["method"] == "eagle3" and reading.server_args["num_steps"] == 3


def test_a_line_that_only_informs_and_one_that_is_a_finding():
    text = ("vLLM API server version 0.34.0\n"
            "INFO [eagle3_utils.py:30] Using Eagle3 auxiliary layers from model: (2, 16, 29)\n")
    (finding,) = check_log_text(text).findings
    assert finding.code == "AUX_LAYERS_DEFAULTED" and "(2, 16, 29)" in finding.message
    text = text.replace("from model", "from config")
    reading = check_log_text(text)
    assert reading.findings == [] and reading.evidence[0]["signature"] == \
        "vllm-aux-layers-from-config"


def test_a_text_of_no_engine_is_not_attributed():
    reading = check_log_text("Traceback (most recent call last):\n  File \"a.py\", line 1, in f\n"
                             "ZeroDivisionError: division by zero\n")
    assert reading.engine is None and [f.code for f in reading.findings] == ["LOG_UNRECOGNISED"]
    assert reading.findings[0].engine is None


# ----------------------------------------------------------------------------- with the draft


def test_inspect_takes_the_release_from_the_log_and_explains_the_crash(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(vllm_log(VLLM_UNKNOWN_KEY), encoding="utf-8")
    data = inspect_checkpoint(DRAFTS / "prefix-draft-model", target_config=TARGET_CONFIG,
                              stats=False, log=log).to_json()
    assert [e["profile"] for e in data["engines"]] == ["vllm==0.34.0"]
    from_log = [f for f in data["findings"] if f["evidence"].get("signature")]
    from_plan = [f for f in data["findings"] if f["code"] == "LOAD_ERROR"
                 and "draft_model" in f["message"] and not f["evidence"].get("signature")]
    assert from_log and from_plan  # the log's exception and the plan name the same key
    assert data["log"]["version_source"] == "the log"
    # the log's arguments are the serving command's: the bundled 4-head draft at TP 8
    assert any(f["code"] == "LAUNCH_SETTING" and "sharded 8 ways" in f["message"]
               for f in data["findings"])


def test_the_cli_log_command_exit_codes_and_json(tmp_path, capsys):
    log = tmp_path / "server.log"
    log.write_text(vllm_log(VLLM_FC_SHAPE), encoding="utf-8")
    assert main(["log", str(log), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "log" and data["findings"][0]["evidence"]["signature"] == \
        "vllm-weight-shape"
    log.write_text("vLLM API server version 0.34.0\n", encoding="utf-8")
    assert main(["log", str(log)]) == 0


# ----------------------------------------------------------------------------- the real engines

ENVS = ROOT / ".cache" / "engines"


def _probe_texts(env: Path, engine: str) -> dict[str, str]:
    """sample -> the exception the engine's own loader raised on it: eagle3-nb probe over every
    bundled draft in one process of the side environment (tools/engine_truth.py's worker)."""
    drafts = sorted(str(p) for p in DRAFTS.iterdir() if (p / "config.json").is_file())
    r = subprocess.run([str(env / "bin" / "python"), str(ROOT / "tools" / "engine_truth.py"),
                        "--worker", engine, *drafts], capture_output=True, text=True, cwd=ROOT,
                       timeout=900, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-2000:]
    out = {}
    for line in r.stdout.splitlines():
        if line.startswith("@@"):
            result = json.loads(line[2:])
            observed = result.get("observed") or {}
            text = observed.get("raised") or observed.get("build_error")
            if text and re.search(r"\b\w*(?:Error|Exception): ", text):  # the engine's, not
                out[result["variant"]] = text                             # the probe's words
    return out


@pytest.mark.slow
@pytest.mark.parametrize("engine, version", [("vllm", "0.34.0"), ("sglang", "0.5.23")])
def test_the_engines_own_exceptions_name_the_cause_inspect_names(engine, version):
    env = ENVS / f"{engine}-{version}"
    if not (env / ".ready").is_file():
        pytest.skip(f"no {engine} {version} side environment (make engine-env ENGINE={engine} "
                    f"VERSION={version})")
    texts = _probe_texts(env, engine)
    for sample, raised in texts.items():
        log = f"Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n{raised}\n"
        reading = check_log_text(log, f"{engine}=={version}")
        said = {f.code for f in reading.findings if f.code != "LOG_UNRECOGNISED"}
        plan = inspect_checkpoint(DRAFTS / sample, [f"{engine}=={version}"], TARGET_CONFIG,
                                  stats=False).to_json()
        errors = {f["code"] for f in plan["findings"] if f["severity"] == "error"}
        assert said and said <= errors, (sample, raised[:200], said, errors)


# ----------------------------------------------------------------------------- public threads
# Lines users quoted in public issue threads, as quoted: each is recognised for what it is, or
# said to be unknown, never given another cause.

THREADS = [
    # vllm-project/vllm#22152 (Qwen3 target, before vLLM dropped the model_type gate)
    ("vllm", "Value error, Eagle3 is only supported for Llama models. Got "
     "self.target_model_config.hf_text_config.model_type='qwen3' [type=value_error, "
     "input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]",
     "LOAD_ERROR", "vllm-target-type-gate"),
    # vllm-project/vllm#8849 (EAGLE-1 fc after a conversion; the same loader text)
    ("vllm", "AssertionError: Attempted to load weight (torch.Size([3584])) into parameter "
     "(torch.Size([3584, 7168]))", "LOAD_ERROR", "vllm-weight-shape"),
    # vllm-project/vllm#24967 (an EAGLE-1 draft class vLLM does not register)
    ("vllm", "ValueError: Model architectures ['EagleQwen2ForCausalLM'] are not supported for "
     "now. Supported architectures: dict_keys(['LlamaForCausalLM'])", "LOAD_ERROR",
     "vllm-unsupported-arch"),
    # Tencent/AngelSlim#39 (a draft config naming Qwen3ForCausalLM, loaded by SGLang's target)
    ("sglang", "Traceback (most recent call last):\n"
     '  File "/sgl-workspace/sglang/python/sglang/srt/models/qwen3.py", line 493, in '
     "load_weights\n    param = params_dict[name]\n"
     "KeyError: 'midlayer.self_attn.qkv_proj.weight'", "LOAD_ERROR",
     "sglang-target-class-loads-draft"),
    # sgl-project/sglang#8230 (index out of bounds while capturing the draft's CUDA graph;
    # the thread never settled the cause): unknown, with the A/B plan
    ("sglang", '/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:93: operator(): block: '
     '[0,0,0], thread: [0,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && "index out '
     'of bounds"` failed.', "LOG_UNRECOGNISED", None),
]


@pytest.mark.parametrize("engine, text, code, signature", THREADS)
def test_lines_quoted_in_public_threads(engine, text, code, signature):
    reading = check_log_text(text + "\n", engine)
    (finding,) = reading.findings
    assert finding.code == code and finding.evidence.get("signature") == signature
    if code == "LOG_UNRECOGNISED":
        assert reading.ab_plan and reading.ab_plan[0]["setting"] == "--disable-cuda-graph"


def test_a_real_vllm_0_11_log_names_its_release_and_arguments():
    """vllm-project/vllm#28919's own lines (vLLM 0.11.0)."""
    text = ("INFO 11-18 14:36:24 [api_server.py:1839] vLLM API server version 0.11.0\n"
            "INFO 11-18 14:36:24 [utils.py:233] non-default args: {'model': 'Qwen/Qwen3-32B', "
            "'speculative_config': {'model': '/models/Qwen3-32B_eagle3', "
            "'num_speculative_tokens': 5, 'method': 'eagle3', 'draft_tensor_parallel_size': 1}, "
            "'tensor_parallel_size': 2}\n"
            "INFO 11-18 14:36:40 [model.py:547] Resolved architecture: Eagle3LlamaForCausalLM\n")
    reading = check_log_text(text)
    assert (reading.engine, reading.version) == ("vllm", "0.11.0")
    args = reading.server_args
    assert (args["num_steps"], args["draft_tensor_parallel"], args["tensor_parallel"]) == (5, 1, 2)
    assert reading.findings == []


def test_a_worker_process_prefix_on_every_line_is_read_through():
    """vLLM's multiprocess workers print each traceback line behind "(Name pid=N) "."""
    prefix = "(VllmWorker TP0 pid=4242) "
    text = "\n".join(prefix + line for line in (
        "Traceback (most recent call last):",
        '  File "/x/vllm/model_executor/models/llama_eagle3.py", line 433, in load_weights',
        "    loader.load_weights(weights)",
        VLLM_UNKNOWN_KEY)) + "\n"
    (error,) = raised_errors(text)
    assert error.type == "ValueError" and error.frames[-1].function == "load_weights"
    assert "'draft_model'" in error.message


def test_sglangs_bare_tensor_parallel_assert_is_named_by_its_frame():
    """SGLang's LlamaAttention asserts head counts against the TP size without a message
    (models/llama.py L183-193 in 0.5.23): only the frame tells what failed."""
    text = ("[2026-12-01 10:00:05 TP0] Scheduler hit an exception: Traceback (most recent call "
            "last):\n"
            '  File "/sgl/python/sglang/srt/models/llama_eagle3.py", line 60, in __init__\n'
            "    self.self_attn = LlamaAttention(\n"
            '  File "/sgl/python/sglang/srt/models/llama.py", line 183, in __init__\n'
            "    assert self.total_num_heads % tp_size == 0\n"
            "AssertionError\n")
    (finding,) = check_log_text(text, "sglang==0.5.23").findings
    assert finding.code == "LAUNCH_SETTING" and finding.evidence["signature"] == "sglang-tp-heads"
    elsewhere = text.replace("models/llama.py", "managers/scheduler.py")
    assert check_log_text(elsewhere, "sglang==0.5.23").findings[0].code == "LOG_UNRECOGNISED"


def test_a_vllm_thread_line_no_signature_knows_stays_unknown():
    """Tencent/AngelSlim#15 (vLLM, an EAGLE draft whose architectures vLLM prefixed once more):
    no vLLM signature explains it, so it is said to be unknown, not given SGLang's cause."""
    text = ("ValueError: Cannot find model module. 'EagleLlamaForCausalLMEagle3' is not a "
            "registered model in the Transformers library (only relevant if the model is meant "
            "to be in Transformers) and 'AutoModel' is not present in the model config's "
            "'auto_map' (relevant if the model is custom).\n")
    (finding,) = check_log_text(text, "vllm").findings
    assert finding.code == "LOG_UNRECOGNISED" and finding.engine == "vllm"


# ----------------------------------------------------------------------------- the A/B toggles
# Each toggle of the A/B plan is a flag (or a --speculative-config key, or an environment
# variable) of the release it is offered for: asked of the installed engine's own argument parser.

FLAGS_OF = {
    "sglang": ("import argparse, json\n"
               "from sglang.srt.server_args import ServerArgs\n"
               "p = argparse.ArgumentParser()\n"
               "ServerArgs.add_cli_args(p)\n"
               "print(json.dumps({'flags': sorted(p._option_string_actions), 'keys': []}))"),
    "vllm": ("import dataclasses, json\n"
             "from vllm.config import SpeculativeConfig\n"
             "from vllm.engine.arg_utils import EngineArgs\n"
             "try:\n"
             "    from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
             "except ImportError:\n"
             "    from vllm.utils import FlexibleArgumentParser\n"
             "p = FlexibleArgumentParser()\n"
             "EngineArgs.add_cli_args(p)\n"
             "keys = [f.name for f in dataclasses.fields(SpeculativeConfig)]\n"
             "print(json.dumps({'flags': sorted(p._option_string_actions), 'keys': keys}))"),
}


@pytest.mark.slow
@pytest.mark.parametrize("engine, version", [("vllm", "0.34.0"), ("sglang", "0.5.23")])
def test_each_toggle_is_a_setting_of_the_release_it_is_offered_for(engine, version):
    from eagle3_nb.checks.log import ab_plan
    from eagle3_nb.engines.registry import engine as registered

    env = ENVS / f"{engine}-{version}"
    if not (env / ".ready").is_file():
        pytest.skip(f"no {engine} {version} side environment")
    r = subprocess.run([str(env / "bin" / "python"), "-P", "-c", FLAGS_OF[engine]],
                       capture_output=True, text=True, timeout=600,
                       env={**os.environ, "VLLM_TARGET_DEVICE": "cpu"})
    assert r.returncode == 0, r.stderr[-2000:]
    known = json.loads(r.stdout.strip().splitlines()[-1])
    package = next((env / "lib").glob(f"python3*/site-packages/{engine}"))
    plan = ab_plan(registered(engine), version)
    assert plan
    for toggle in plan:
        setting = toggle["setting"]
        flags = re.findall(r"(?<![\w-])--[a-z][\w-]*", setting)
        keys = re.findall(r'"(\w+)":', setting)
        variables = re.findall(r"\b([A-Z][A-Z0-9_]{3,})=", setting)
        assert flags or variables, setting
        assert set(flags) <= set(known["flags"]), (setting, set(flags) - set(known["flags"]))
        assert set(keys) <= set(known["keys"]), (setting, set(keys) - set(known["keys"]))
        for name in variables:  # read somewhere in the engine's own code
            assert any(name in p.read_text(errors="ignore") for p in package.rglob("*.py")), name
