"""SGLang (sgl-project/sglang): everything the kit knows about it, registered as one Engine."""

from __future__ import annotations

from pathlib import Path

from eagle3_nb.engines.registry import Engine, later, register
from eagle3_nb.engines.sglang import bugs, profiles, releases

ENGINE = register(Engine(
    name="sglang", title="SGLang", repository="sgl-project/sglang",
    releases=releases.RELEASES, read=("0.5.23", "2026-11-29"),
    profiles=profiles.PROFILES, folder=Path(__file__).resolve().parent, bugs=bugs.BUGS,
    # the folder's other modules are imported when a command first reads the field
    launch=later(__name__, "launch:DIALECT"),
    drafting_rule=later(__name__, "drafting:default_rule"),
    flag_advice=later(__name__, "advice:flag_rows"), source=later(__name__, "advice:SRC"),
    draft_rope=profiles.DRAFT_ROPE, tree_drafting=profiles.TREE_DRAFTING,
    demo_releases=("0.5.9",),  # drops layers0-flat's layers.0.* keys silently (profiles.py)
    # before and after the layers.0 rename (0.5.16) and the newest read
    sample_releases=("0.5.9", "0.5.16", "0.5.23"),
    log=later(__name__, "log:DIALECT"), readers=later(__name__, "metrics:READERS"),
    figure_names=later(__name__, "metrics:FIGURE_NAMES"), observe=later(__name__, "observe"),
    path_rule=later(__name__, "paths:misread_path"),
    probe="eagle3_nb.engines.sglang.probe",
    probe_stubs={
        "sgl_kernel": "SGLang's CUDA kernel package (no CPU build); kernels are never called "
                      "while loading weights",
        "flashinfer": "CUDA attention kernels (no CPU build)",
        "deep_gemm": "CUDA GEMM kernels (no CPU build)",
        "torchvision": "the registry's torchvision builds do not load against the CPU torch "
                       "(operator torchvision::nms does not exist); only multimodal image "
                       "transforms import it",
    },
))
