"""vLLM (vllm-project/vllm): everything the kit knows about it, registered as one Engine."""

from __future__ import annotations

from pathlib import Path

from eagle3_nb.engines.registry import Engine, later, register
from eagle3_nb.engines.vllm import bugs, profiles, releases

ENGINE = register(Engine(
    name="vllm", title="vLLM", repository="vllm-project/vllm",
    releases=releases.RELEASES, read=("0.34.0", "2026-12-03"),
    profiles=profiles.PROFILES, folder=Path(__file__).resolve().parent, bugs=bugs.BUGS,
    # the folder's other modules are imported when a command first reads the field
    launch=later(__name__, "launch:DIALECT"),
    drafting_rule=later(__name__, "drafting:default_rule"),
    flag_advice=later(__name__, "advice:flag_rows"), source=later(__name__, "advice:SRC"),
    draft_rope=profiles.DRAFT_ROPE,
    sample_releases=("0.33",),  # the range the samples' expectations were written for
    log=later(__name__, "log:DIALECT"), readers=later(__name__, "metrics:READERS"),
    figure_names=later(__name__, "metrics:FIGURE_NAMES"), observe=later(__name__, "observe"),
    probe="eagle3_nb.engines.vllm.probe",
    probe_stubs={
        "vllm._C": "vLLM's compiled CUDA ops (the wheel's .so needs libcuda)",
        "vllm._moe_C": "vLLM's compiled MoE ops (needs libcuda)",
        "vllm.vllm_flash_attn": "vLLM's flash-attention build (needs libcuda)",
    },
))
