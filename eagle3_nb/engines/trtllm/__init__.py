"""TensorRT-LLM (NVIDIA/TensorRT-LLM): everything the kit knows about it, registered as one Engine.

Every fact here was read from the engine's source, not checked with its loader: its wheels are
not installable on the kit's machines (docs/engine-facts-trtllm.md)."""

from __future__ import annotations

from pathlib import Path

from eagle3_nb.engines.registry import Engine, later, register
from eagle3_nb.engines.trtllm import bugs, profiles, releases

ENGINE = register(Engine(
    name="trtllm", title="TensorRT-LLM", repository="NVIDIA/TensorRT-LLM",
    releases=releases.RELEASES, read=("1.4.0rc1", "2026-12-03"),
    profiles=profiles.PROFILES, folder=Path(__file__).resolve().parent, bugs=bugs.BUGS,
    draft_rope=profiles.DRAFT_ROPE, package="tensorrt-llm",
    # the folder's other modules are imported when a command first reads the field
    launch=later(__name__, "launch:DIALECT"), log=later(__name__, "log:DIALECT"),
    readers=later(__name__, "metrics:READERS"),
    figure_names=later(__name__, "metrics:FIGURE_NAMES"),
    probe="eagle3_nb.engines.trtllm.probe", flag_advice=later(__name__, "advice:flag_rows"),
    source=later(__name__, "advice:SRC"),
    # the releases the samples' expectations were written for: one before PR #11010 (no
    # layers.N -> midlayer rename), one in the newest range (samples/variants.py per_engine)
    sample_releases=("1.2.1", "1.4.0rc1"),
))
