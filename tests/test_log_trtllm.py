"""eagle3-nb log on TensorRT-LLM's own words (engines/trtllm/log.py): each text below is the
engine's as a public thread quotes it, or the message its source raises, produced where the
library that raises it is at hand (transformers, torch, pydantic in this environment), and never
written to fit a pattern. TensorRT-LLM itself cannot run here (its wheels are not installable),
so the frames around a message are its source's file and function names. Text no signature
knows stays unknown."""

from __future__ import annotations

from pathlib import Path

import pytest

from eagle3_nb.checks.load import inspect_checkpoint
from eagle3_nb.checks.log import check_log_text

ROOT = Path(__file__).resolve().parent.parent
DRAFTS = ROOT / "data_samples" / "drafts"
TARGET_CONFIG = ROOT / "data_samples" / "target" / "config.json"
SITE = "/usr/local/lib/python3.12/dist-packages/tensorrt_llm"


def traceback(frames: list[tuple[str, int, str]], raised: str) -> str:
    """A Python traceback through TensorRT-LLM's FILES (file, line, function) ending in RAISED."""
    lines = ["Traceback (most recent call last):"]
    for file, no, function in frames:
        lines += [f'  File "{SITE}/{file}", line {no}, in {function}', "    ..."]
    return "\n".join(lines + [raised]) + "\n"


def only_finding(reading):
    (finding,) = reading.findings
    return finding


# ----------------------------------------------------------------------------- public threads

# NVIDIA/TensorRT-LLM#7842 (1.0.0rc6, an FP8 target with a BF16 draft, one-model): the C++
# check aborts the process; no Python traceback follows.
FP8_ABORT = (
    "terminate called after throwing an instance of 'tensorrt_llm::common::TllmException'\n"
    "  what():  [TensorRT-LLM][ERROR] Assertion failed: KV cache data type e4m3 is not the same "
    "as input data type fp16. (../tensorrt_llm/kernels/fmhaDispatcher.cpp:58)\n")
# NVIDIA/TensorRT-LLM#15426 (a ModelOpt-exported Kimi-K2 EAGLE-3 draft on the PyTorch backend)
UNKNOWN_ARCH = ("ValueError: Unknown architecture for AutoModelForCausalLM: "
                "Eagle3DeepseekV2ForCausalLM")
# NVIDIA/TensorRT-LLM#2014 (a TensorRT-engine build of a non-EAGLE model): no signature's business
ENGINE_BUILD_SHAPE = ("AssertionError: The value updated is not the same shape as the original. "
                      "Updated: (2560, 13696), original: (5120, 6848)")


def test_the_fp8_kv_abort_quoted_in_7842_is_that_bug_on_the_release_it_was_seen_on():
    reading = check_log_text(FP8_ABORT, "trtllm==1.0.0rc6")
    assert reading.engine == "trtllm"
    finding = only_finding(reading)
    assert finding.code == "ENGINE_BUG" and "7842" in finding.message
    assert finding.evidence["signature"] == "trtllm-fp8-kv-bf16-draft-abort"
    assert "a fp16 draft" in finding.message
    assert "eagle3_one_model: false" in finding.evidence["next_step"]
    # the text alone names its engine: "[TensorRT-LLM][ERROR]"
    assert check_log_text(FP8_ABORT).engine == "trtllm"


def test_an_unregistered_draft_architecture_quoted_in_15426_is_a_load_error():
    finding = only_finding(check_log_text(UNKNOWN_ARCH + "\n", "trtllm"))
    assert finding.code == "LOAD_ERROR"
    assert finding.evidence["signature"] == "trtllm-unknown-architecture"
    assert finding.evidence["arch"] == "Eagle3DeepseekV2ForCausalLM"
    assert "Eagle3DeepSeekV3ForCausalLM" in finding.evidence["next_step"]


def test_an_engine_build_error_of_another_kind_stays_unknown():
    finding = only_finding(check_log_text(ENGINE_BUILD_SHAPE + "\n", "trtllm"))
    assert finding.code == "LOG_UNRECOGNISED" and "not guessed at" in finding.message


# ----------------------------------------------------------------------------- the source's texts

def test_a_speculators_draft_fails_where_tensorrt_llm_reads_its_config_as_inspect_says():
    """TensorRT-LLM reads the draft's config with transformers' AutoConfig (model_config.py
    load_pretrained_config); transformers raises here what it raises there."""
    transformers = pytest.importorskip("transformers")
    draft = DRAFTS / "good-speculators"
    with pytest.raises(ValueError) as raised:
        transformers.AutoConfig.from_pretrained(str(draft), trust_remote_code=True)
    log = traceback([("_torch/models/modeling_speculative.py", 1290, "__init__"),
                     ("_torch/model_config.py", 540, "load_pretrained_config")],
                    f"ValueError: {raised.value}")
    finding = only_finding(check_log_text(log, "trtllm==1.2.1"))
    assert finding.code == "LOAD_ERROR"
    assert finding.evidence["signature"] == "trtllm-speculators-config"
    assert "--to eagle" in finding.evidence["next_step"]
    plan = inspect_checkpoint(draft, ["trtllm==1.2.1"], TARGET_CONFIG, stats=False).to_json()
    assert "LOAD_ERROR" in {f["code"] for f in plan["findings"] if f["severity"] == "error"}


def test_an_fc_wider_than_the_captured_layers_fails_in_copy_weight():
    """modules/linear.py copy_weight does dst.data.copy_(src): torch's own message, for an fc
    built for 3 captured layers of a 2880-wide target and a checkpoint fc for 2 (5760 wide)."""
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError) as raised:
        torch.empty(2880, 3 * 2880).copy_(torch.empty(2880, 2 * 2880))
    message = f"RuntimeError: {raised.value}"
    log = traceback([("_torch/modules/linear.py", 282, "load_weights_vanilla_helper"),
                     ("_torch/modules/linear.py", 190, "copy_weight")], message)
    finding = only_finding(check_log_text(log, "trtllm==1.2.1"))
    assert finding.code == "LOAD_ERROR"
    assert (finding.evidence["expected"], finding.evidence["loaded"]) == ("8640", "5760")
    assert "eagle3_layers_to_capture" in finding.evidence["next_step"]
    # the same torch message raised anywhere else (a forward pass) is not a weight load
    elsewhere = traceback([("_torch/models/modeling_llama.py", 610, "forward")], message)
    assert only_finding(check_log_text(elsewhere, "trtllm==1.2.1")).code == "LOG_UNRECOGNISED"


def test_an_eagle_config_without_max_draft_len_is_refused_by_its_validator():
    """llm_args.py EagleDecodingConfig.validate_eagle_config raises inside a pydantic model
    validator: the error reaches the log as pydantic prints it."""
    pydantic = pytest.importorskip("pydantic")

    class EagleDecodingConfig(pydantic.BaseModel):
        max_draft_len: int | None = None

        @pydantic.model_validator(mode="after")
        def validate_eagle_config(self):
            if self.max_draft_len is None or self.max_draft_len == 0:
                raise ValueError("max_draft_len must be > 0 for Eagle")
            return self

    with pytest.raises(pydantic.ValidationError) as raised:
        EagleDecodingConfig(max_draft_len=0)
    log = traceback([("llmapi/llm_args.py", 1204, "validate_eagle_config")],
                    f"pydantic_core._pydantic_core.ValidationError: {raised.value}")
    finding = only_finding(check_log_text(log, "trtllm==1.2.1"))
    assert (finding.code, finding.evidence["signature"]) == ("LAUNCH_SETTING",
                                                             "trtllm-max-draft-len-zero")


@pytest.mark.parametrize("raised, signature", [
    # llm_args.py BaseLlmArgs.validate_speculative_config (stored older copies)
    ("AssertionError: Path to EAGLE3 weights must be specified.", "trtllm-draft-path-missing"),
    # llm_args.py EagleDecodingConfig.validate_speculative_model (recent stored copy)
    ("ValueError: Draft model must be provided for EAGLE", "trtllm-draft-path-missing"),
    # llm_args.py DecodingBaseConfig.from_dict f"Invalid decoding type: {decoding_type}"
    ("ValueError: Invalid decoding type: Eagle3", "trtllm-invalid-decoding-type"),
])
def test_launch_config_refusals_are_launch_settings(raised, signature):
    finding = only_finding(check_log_text(raised + "\n", "trtllm==1.1.0"))
    assert (finding.code, finding.evidence["signature"]) == ("LAUNCH_SETTING", signature)


def test_the_two_model_warning_only_informs():
    """llm_args.py validate_eagle_config logger.warning, as TensorRT-LLM's logger prints it."""
    text = ("[TensorRT-LLM] TensorRT-LLM version: 1.2.1\n"
            "[TRT-LLM] [W] Eagle3 2-model is deprecated and will be removed in release 1.4.\n")
    reading = check_log_text(text)
    assert reading.findings == []
    (line,) = reading.evidence
    assert line["signature"] == "trtllm-two-model-deprecated" and "1.4" in line["meaning"]
