"""SGLang's serving command: `python -m sglang.launch_server ...` (or `sglang serve`).

The flag names are SGLang's own, stable across the surveyed releases:
python/sglang/srt/server_args.py ServerArgs.add_cli_args (0.4.4.post2-0.5.18; from 0.5.19 the
fields of srt/arg_groups/fields/spec.py)."""

from __future__ import annotations

import shlex

from eagle3_nb.engines.launch import LaunchSettings, as_int, read_flags
from eagle3_nb.engines.registry import LaunchDialect
from eagle3_nb.findings import ERROR

BOOLEAN = ("--disable-cuda-graph",)


def starts(joined: str) -> bool:
    return "sglang" in joined and ("launch_server" in joined or " serve" in joined)


def parse(words: list[str]) -> LaunchSettings:
    f = read_flags(words, BOOLEAN)
    return LaunchSettings(
        "sglang", f.get("--model-path") or f.get("--model"),
        f.get("--speculative-draft-model-path") or f.get("--speculative-draft-model"),
        f.get("--speculative-algorithm"), _count(f, "--speculative-num-steps"),
        _count(f, "--speculative-eagle-topk"), _count(f, "--speculative-num-draft-tokens"),
        _count(f, "--tp-size", "--tp"), not f.get("--disable-cuda-graph"),
        f.get("--attention-backend"), f.get("--speculative-draft-attention-backend"), f)


def _count(flags: dict, name: str, alias: str = "") -> int | None:
    given = name if name in flags else alias if alias in flags else None
    return as_int(flags[given], given) if given else None


def checks(launch: LaunchSettings, cfg, p, ev: dict, num_layers=None) -> list[tuple]:
    if (launch.method or "").upper() == "EAGLE3":
        return []
    return [("LAUNCH_SETTING", ERROR, f"--speculative-algorithm is {launch.method or 'not set'}: "
             f"an EAGLE-3 draft needs {p.capture_switch or 'EAGLE3'} (with EAGLE the target "
             "captures no aux states and fc is skipped: accept length about 1.0)", ev)]


def serve(target: str, draft: str) -> str:
    return (f"python -m sglang.launch_server --model-path {shlex.quote(target)} "
            f"--speculative-algorithm EAGLE3 --speculative-draft-model-path {shlex.quote(draft)} "
            "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4")


DIALECT = LaunchDialect(
    starts=starts, parse=parse, checks=checks,
    draft_tensor_parallel=lambda launch: launch.tensor_parallel,
    tensor_parallel_fix="serve at a tensor-parallel size that divides them",
    # the draft in the target's TP group unless DP attention or the draft layouts of
    # srt/configs/draft_parallel.py change it, which the kit does not model
    tensor_parallel_cite="sglang python/sglang/srt/models/llama.py LlamaAttention.__init__ "
                         "(heads % tp, kv heads % tp or tp % kv heads) and srt/layers/linear.py "
                         "MergedColumnParallelLinear (intermediate_size % tp), read in 0.5.23",
    example="python -m sglang.launch_server --model-path ... --speculative-algorithm EAGLE3 ...",
    setting_names={"num_steps": "--speculative-num-steps", "topk": "--speculative-eagle-topk",
                   "num_draft_tokens": "--speculative-num-draft-tokens",
                   "method": "--speculative-algorithm"},
    serve=serve,
)
