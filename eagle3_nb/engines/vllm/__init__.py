"""vLLM (vllm-project/vllm): everything the kit knows about it, registered as one Engine."""

from __future__ import annotations

from pathlib import Path

from eagle3_nb.engines.registry import Engine, register
from eagle3_nb.engines.vllm import (advice, bugs, drafting, launch, log, metrics, observe,
                                    profiles, releases)

ENGINE = register(Engine(
    name="vllm", title="vLLM", repository="vllm-project/vllm",
    releases=releases.RELEASES, read=("0.34.0", "2026-12-03"),
    profiles=profiles.PROFILES, folder=Path(__file__).resolve().parent, bugs=bugs.BUGS,
    launch=launch.DIALECT, drafting_rule=drafting.default_rule, flag_advice=advice.flag_rows,
    source=advice.SRC, draft_rope=profiles.DRAFT_ROPE,
    sample_releases=("0.33",),  # the range the samples' expectations were written for
    log=log.DIALECT, readers=metrics.READERS, figure_names=metrics.FIGURE_NAMES, observe=observe,
    probe="eagle3_nb.engines.vllm.probe",
    probe_stubs={
        "vllm._C": "vLLM's compiled CUDA ops (the wheel's .so needs libcuda)",
        "vllm._moe_C": "vLLM's compiled MoE ops (needs libcuda)",
        "vllm.vllm_flash_attn": "vLLM's flash-attention build (needs libcuda)",
    },
))
