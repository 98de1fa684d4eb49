"""The serving command, read: `python -m sglang.launch_server ...` or `vllm serve ...`.

What a draft cannot show: the algorithm the engine runs it with, whether it is given at all,
the attention backend its worker inherits, the decoding settings a simulation should copy, and
whether CUDA graphs are on. The flag names are the engines' own, stable across the surveyed
releases: SGLang `python/sglang/srt/server_args.py` (0.4.4.post2-0.5.18; from 0.5.19 the fields
of `arg_groups/fields/spec.py`), vLLM `vllm/engine/arg_utils.py` EngineArgs.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle3_nb.config import DraftConfig
from eagle3_nb.engines.profile import EngineProfile
from eagle3_nb.errors import ConfigError
from eagle3_nb.findings import ERROR, INFO, WARNING, Finding

SGLANG_BOOLEAN = ("--disable-cuda-graph",)
VLLM_BOOLEAN = ("--enforce-eager",)


@dataclass
class LaunchSettings:
    engine: str
    model: str | None = None
    draft: str | None = None
    method: str | None = None             # SGLang --speculative-algorithm, vLLM "method"
    num_steps: int | None = None
    topk: int | None = None
    num_draft_tokens: int | None = None
    tensor_parallel: int | None = None
    cuda_graphs: bool = True
    attention_backend: str | None = None
    draft_attention_backend: str | None = None
    flags: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "flags"}


def read_launch(text_or_file: str) -> LaunchSettings:
    """A serving command line, or a file holding one (backslash continuations allowed)."""
    text = text_or_file
    if names_a_file(text_or_file):
        text = Path(text_or_file).read_text(encoding="utf-8", errors="replace")[:65536]
    try:
        words = shlex.split(text.replace("\\\n", " "))
    except ValueError as exc:
        raise ConfigError(f"cannot read the launch command ({exc})", "--launch",
                          "quote it as the shell would") from None
    joined = " ".join(words)
    if "sglang" in joined and ("launch_server" in joined or " serve" in joined):
        return _sglang(_flags(words, SGLANG_BOOLEAN))
    if "vllm" in joined and (" serve" in joined or "entrypoints" in joined):
        return _vllm(words, _flags(words, VLLM_BOOLEAN))
    raise ConfigError("the launch command starts neither an SGLang nor a vLLM server",
                      "--launch", "pass the command as you run it, e.g. "
                      "'python -m sglang.launch_server --model-path ... --speculative-algorithm "
                      "EAGLE3 ...' or 'vllm serve MODEL --speculative-config ...'")


def names_a_file(text: str) -> bool:
    """Whether --launch names a file rather than holding the command (a long command is no
    file name: the OS refuses it, ENAMETOOLONG)."""
    if len(text) >= 4096 or "\n" in text:
        return False
    try:
        return Path(text).is_file()
    except OSError:
        return False


def _flags(words: list[str], booleans: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("--") and "=" in word:
            name, value = word.split("=", 1)
            out[name] = value
        elif word.startswith("-") and word in booleans:
            out[word] = True
        elif word.startswith("-") and i + 1 < len(words) and not words[i + 1].startswith("--"):
            out[word] = words[i + 1]
            i += 1
        elif word.startswith("-"):
            out[word] = True
        i += 1
    return out


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _sglang(f: dict[str, Any]) -> LaunchSettings:
    return LaunchSettings(
        "sglang", f.get("--model-path") or f.get("--model"),
        f.get("--speculative-draft-model-path") or f.get("--speculative-draft-model"),
        f.get("--speculative-algorithm"), _int(f.get("--speculative-num-steps")),
        _int(f.get("--speculative-eagle-topk")), _int(f.get("--speculative-num-draft-tokens")),
        _int(f.get("--tp-size") or f.get("--tp")), not f.get("--disable-cuda-graph"),
        f.get("--attention-backend"), f.get("--speculative-draft-attention-backend"), f)


def _vllm(words: list[str], f: dict[str, Any]) -> LaunchSettings:
    spec: dict[str, Any] = {}
    raw = f.get("--speculative-config")
    if isinstance(raw, str):
        try:
            spec = json.loads(raw)
        except ValueError:
            raise ConfigError("--speculative-config is not JSON", "--launch",
                              "quote the JSON as the shell would") from None
        spec = spec if isinstance(spec, dict) else {}
    serve = words.index("serve") if "serve" in words else -1
    model = words[serve + 1] if 0 <= serve < len(words) - 1 and \
        not words[serve + 1].startswith("-") else f.get("--model")
    return LaunchSettings(
        "vllm", model, spec.get("model") or f.get("--speculative-model"), spec.get("method"),
        _int(spec.get("num_speculative_tokens") or f.get("--num-speculative-tokens")), None,
        None, _int(f.get("--tensor-parallel-size") or f.get("-tp")),
        not f.get("--enforce-eager"), f.get("--attention-backend"), None, f)


def launch_findings(launch: LaunchSettings, cfg: DraftConfig | None,
                    profiles: list[EngineProfile]) -> list[Finding]:
    """What the command does to this draft, per profile of the engine it starts. cfg None: the
    draft's config is not at hand (a running server's own view); what needs it is not checked."""
    out = []
    for p in (p for p in profiles if p.name == launch.engine):
        out += [Finding(code, sev, msg, ev, p.key) for code, sev, msg, ev in _checks(launch, cfg, p)]
    return out


def _checks(launch: LaunchSettings, cfg: DraftConfig | None, p: EngineProfile) -> list[tuple]:
    out = []
    ev = {"launch": launch.to_json()}
    if not launch.draft:
        out.append(("LAUNCH_SETTING", ERROR, "the command names no draft model: nothing is "
                    "speculated", ev))
    method = (launch.method or "").upper()
    if launch.engine == "sglang" and method != "EAGLE3":
        out.append(("LAUNCH_SETTING", ERROR, f"--speculative-algorithm is "
                    f"{launch.method or 'not set'}: an EAGLE-3 draft needs "
                    f"{p.capture_switch or 'EAGLE3'} (with EAGLE the target captures no aux "
                    "states and fc is skipped: accept length about 1.0)", ev))
    if launch.engine == "vllm" and method != "EAGLE3":
        sev = ERROR if method else WARNING
        out.append(("LAUNCH_SETTING", sev, f'the speculative config\'s method is '
                    f'{launch.method or "not set (vLLM infers it from the draft path)"}: '
                    f"an EAGLE-3 draft needs {p.capture_switch}", ev))
    backend = launch.attention_backend or ""
    if "mla" in backend and cfg is not None and not cfg.mla \
            and not launch.draft_attention_backend \
            and p.draft_attention_flag:
        out.append(("LAUNCH_SETTING", WARNING, f"--attention-backend {backend} is an MLA "
                    f"backend, and the draft worker inherits it without "
                    f"{p.draft_attention_flag}: this draft's attention is not MLA", ev))
    if cfg is not None and not cfg.mla:
        out += _tensor_parallel_checks(launch, cfg, ev)
    if p.graphs_use_default_ids and not launch.cuda_graphs:
        out.append(("LAUNCH_SETTING", INFO, "CUDA graphs are off, so this release's graph "
                    "replay of the default aux layers does not apply", ev))
    return out


# The draft's decoder layer is sharded like any Llama layer of the engine, over the draft's
# tensor-parallel size: the target's unless vLLM's draft_tensor_parallel_size says 1.
TENSOR_PARALLEL_CITE = (
    "sglang python/sglang/srt/models/llama.py LlamaAttention.__init__ (heads % tp, kv heads % tp "
    "or tp % kv heads) and srt/layers/linear.py MergedColumnParallelLinear (intermediate_size % "
    "tp), read in 0.5.23 (the draft in the target's TP group unless DP attention or the draft "
    "layouts of srt/configs/draft_parallel.py change it, which the kit does not model); vllm "
    "vllm/config/speculative.py SpeculativeConfig._verify_and_get_draft_tp (draft TP: the "
    "target's, or 1), vllm/config/model.py verify_with_parallel_config (heads % tp), "
    "model_executor/models/llama.py LlamaAttention.__init__ and model_executor/layers/linear.py "
    "MergedColumnParallelLinear, read in 0.33.0")


def _draft_tensor_parallel(launch: LaunchSettings) -> int | None:
    if launch.engine == "vllm":
        spec = launch.flags.get("--speculative-config")
        try:
            draft_tp = json.loads(spec).get("draft_tensor_parallel_size") if spec else None
        except (ValueError, AttributeError):
            draft_tp = None
        if _int(draft_tp):
            return _int(draft_tp)
    return launch.tensor_parallel


def _tensor_parallel_checks(launch: LaunchSettings, cfg: DraftConfig, ev: dict) -> list[tuple]:
    """Startup assertions the draft's own sizes fail at this tensor-parallel size."""
    tp = _draft_tensor_parallel(launch)
    if not tp or tp <= 1:
        return []
    heads, kv, inter = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.intermediate_size
    broken = [f"num_attention_heads {heads}" if heads % tp else "",
              f"num_key_value_heads {kv}" if (kv % tp if kv >= tp else tp % kv) else "",
              f"intermediate_size {inter}" if inter % tp else ""]
    broken = [b for b in broken if b]
    if not broken:
        return []
    fix = ('add "draft_tensor_parallel_size": 1 to --speculative-config'
           if launch.engine == "vllm" else "serve at a tensor-parallel size that divides them")
    return [("LAUNCH_SETTING", ERROR,
             f"the draft is sharded {tp} ways, and {', '.join(broken)} "
             f"{'is' if len(broken) == 1 else 'are'} not divisible by {tp}: the engine fails at "
             f"startup (an assertion in its Llama layer); {fix}, or train the draft with sizes "
             f"{tp} divides", {**ev, "draft_tensor_parallel": tp, "cite": TENSOR_PARALLEL_CITE})]

