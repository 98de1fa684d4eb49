"""TensorRT-LLM's serving command, `trtllm-serve MODEL --config x.yaml` (the older flag
`--extra_llm_api_options x.yaml` is the same option), and that YAML file itself as `--launch`.

The YAML's `speculative_config` block is EagleDecodingConfig / Eagle3DecodingConfig
(NVIDIA/TensorRT-LLM tensorrt_llm/llmapi/llm_args.py, read at main@00679c66 and in older stored
copies): decoding_type (Eagle3; Eagle, its older name), max_draft_len, speculative_model (older
copies: speculative_model_dir), eagle3_one_model (default True), eagle3_layers_to_capture,
eagle3_model_arch (llama3 or mistral_large3), use_dynamic_tree with dynamic_tree_max_topK and
max_total_draft_tokens. Read from source, not checked with the engine (its wheels are not
installable here). The YAML is read with PyYAML's safe_load only, no larger than a serving
command may be (engines.launch.MAX_COMMAND_BYTES)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from eagle3_nb.engines.launch import MAX_COMMAND_BYTES, LaunchSettings, as_int, read_flags
from eagle3_nb.engines.planner import trained_aux_indices
from eagle3_nb.engines.profile import release_key
from eagle3_nb.engines.registry import LaunchDialect
from eagle3_nb.engines.trtllm.profiles import NOT_PROBED
from eagle3_nb.errors import ConfigError, Eagle3NbError
from eagle3_nb.findings import ERROR, INFO, WARNING

ARGS = "NVIDIA/TensorRT-LLM tensorrt_llm/llmapi/llm_args.py EagleDecodingConfig [main@00679c66]"
CAPTURE = ("NVIDIA/TensorRT-LLM tensorrt_llm/_torch/speculative/eagle3.py "
           "Eagle3SpecMetadata.__post_init__ and maybe_capture_hidden_states [main@00679c66]: "
           "id i is the output of target layer i, hidden_states[i + 1]; default (1, L//2-1, L-4)")
FC = ("NVIDIA/TensorRT-LLM tensorrt_llm/_torch/models/modeling_speculative.py "
      "Eagle3DraftModel.__init__ [main@00679c66]: fc = Linear(Ht * num_capture_layers, H) only "
      "when num_capture_layers > 1")
TRT_BACKEND = ("NVIDIA/TensorRT-LLM tensorrt_llm/models/eagle/model.py EagleForCausalLM"
               "(LLaMAForCausalLM): the TensorRT backend's EAGLE-1/2 engine (num_eagle_layers, "
               "max_non_leaves_per_layer), no EAGLE-3 class; NVIDIA/TensorRT-LLM#10396 (a Qwen "
               "EAGLE draft on --backend trt fails to load)")
ARCH = ("NVIDIA/TensorRT-LLM tensorrt_llm/_torch/models/modeling_speculative.py "
        "SpecDecOneEngineForCausalLM.__init__ (eagle3_model_arch: llama3 -> Eagle3ForCausalLM, "
        "mistral_large3 -> MistralLarge3EagleForCausalLM; MistralLarge3EagleForCausalLM."
        "load_weights) [main@00679c66]")
CONFIG_FLAGS = ("--config", "--extra_llm_api_options")
EAGLE3_TYPES = ("eagle3", "eagle")       # "Eagle": the older name, an alias from PR #10124
# the names DecodingBaseConfig.from_dict dispatches on, exactly as written (case-sensitive
# dict lookup, else ValueError "Invalid decoding type"); "Eagle3" from PR #10124 (after 1.1.0's
# branch, assumed in 1.2.0), "Eagle" in every release (on the PyTorch backend it runs EAGLE-3)
EAGLE3_NAME_SINCE = "1.2.0"
DISPATCH = ("NVIDIA/TensorRT-LLM tensorrt_llm/llmapi/llm_args.py DecodingBaseConfig.from_dict "
            "(stored older copies: config_classes.get(decoding_type), keys 'Eagle', 'MTP', ...; "
            "no 'Eagle3') and Eagle3DecodingConfig decoding_type Literal['Eagle3'] (a stored "
            "recent copy, its commit not recorded), PR #10124")
DRAFT_KEYS = ("speculative_model", "speculative_model_dir")
_TOP_KEY = re.compile(r"^speculative_config\s*:", re.M)   # a YAML mapping's top-level key


def starts(joined: str) -> bool:
    return "trtllm-serve" in joined


def parse(words: list[str]) -> LaunchSettings:
    flags = read_flags(words, ())
    config_file = next((flags[f] for f in CONFIG_FLAGS if isinstance(flags.get(f), str)), None)
    start = next((i for i, w in enumerate(words) if w.endswith("trtllm-serve")), -1)
    rest = [w for w in words[start + 1:start + 3] if w != "serve"] if start >= 0 else []
    model = rest[0] if rest and not rest[0].startswith("-") else flags.get("--model")
    if config_file is None:  # the drafting settings live only in the --config YAML
        return LaunchSettings("trtllm", model, flags=flags)
    path = Path(config_file)
    if not path.is_file():
        launch = LaunchSettings("trtllm", model, flags=flags)
        launch.implied_draft = (f"its --config file {config_file} holds a speculative_config "
                                "(not readable here, so not checked: pass the YAML itself as "
                                "--launch)")
        return launch
    return from_yaml(_bounded_text(path), model, flags, str(path))


def read_text(text: str) -> LaunchSettings | None:
    """The YAML file given as --launch: a mapping with a speculative_config; None for anything
    else (a serving command, which parse reads)."""
    if not _TOP_KEY.search(text):
        return None
    data = _safe_load(text, "--launch")
    if not isinstance(data, dict) or not isinstance(data.get("speculative_config"), dict):
        return None
    return from_yaml(text, None, {}, "--launch", data)


def _bounded_text(path: Path) -> str:
    with path.open("rb") as handle:
        data = handle.read(MAX_COMMAND_BYTES + 1)
    if len(data) > MAX_COMMAND_BYTES:
        raise ConfigError(f"the --config file is over {MAX_COMMAND_BYTES >> 10} KiB: not a "
                          "TensorRT-LLM config", str(path), "pass the YAML trtllm-serve reads")
    return data.decode("utf-8", errors="replace")


def _safe_load(text: str, where: str) -> Any:
    try:
        import yaml
    except ImportError:
        raise ConfigError("reading a TensorRT-LLM config needs PyYAML", where,
                          "pip install 'PyYAML>=6.0,<7' (requirements.txt)") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise ConfigError(f"the TensorRT-LLM config is not YAML ({first})", where,
                          "pass the file trtllm-serve reads with --config") from None


def from_yaml(text: str, model: str | None, flags: dict[str, Any], where: str,
              data: Any = None) -> LaunchSettings:
    data = _safe_load(text, where) if data is None else data
    if not isinstance(data, dict):
        raise ConfigError("the TensorRT-LLM config is no YAML mapping", where,
                          "pass the file trtllm-serve reads with --config")
    spec = data.get("speculative_config")
    spec = spec if isinstance(spec, dict) else {}
    kind = spec.get("decoding_type")
    draft = next((spec[k] for k in DRAFT_KEYS if isinstance(spec.get(k), str)), None)
    dynamic = spec.get("use_dynamic_tree") is True
    launch = LaunchSettings(
        "trtllm", model, draft,
        "eagle3" if str(kind).lower() in EAGLE3_TYPES else (str(kind) if kind else None),
        as_int(spec.get("max_draft_len"), "speculative_config.max_draft_len"), None, None,
        as_int(data.get("tensor_parallel_size"), "tensor_parallel_size")
        or as_int(flags.get("--tp_size"), "--tp_size"),
        True, _text(data.get("attn_backend")), None, dict(flags))
    launch.flags.update(_speculative_flags(spec, kind, where))
    launch.aux_ids = launch.flags["eagle3_layers_to_capture"]
    if dynamic:
        launch.refuses_simulation = (
            "speculative_config.use_dynamic_tree is true (dynamic_tree_max_topK "
            f"{spec.get('dynamic_tree_max_topK')}, max_total_draft_tokens "
            f"{spec.get('max_total_draft_tokens')}): the kit has not read TensorRT-LLM's "
            "dynamic-tree expansion (tensorrt_llm/_torch/speculative/eagle3_dynamic_tree.py), "
            "so it cannot simulate what the engine drafts")
    return launch


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _speculative_flags(spec: dict, kind: Any, where: str) -> dict[str, Any]:
    ids = spec.get("eagle3_layers_to_capture")
    if ids is not None:
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                                for i in ids) or len(ids) > 64:
            raise ConfigError(f"speculative_config.eagle3_layers_to_capture is {str(ids)[:60]}: "
                              "not a list of layer ids", where,
                              "give the target layer ids, e.g. [1, 15, 28]")
    one_model = spec.get("eagle3_one_model", True)
    return {"decoding_type": _text(kind), "eagle3_layers_to_capture": ids,
            "eagle3_one_model": one_model if isinstance(one_model, bool) else True,
            "eagle3_model_arch": _text(spec.get("eagle3_model_arch")) or "llama3",
            "use_dynamic_tree": spec.get("use_dynamic_tree") is True}


# --- checks ------------------------------------------------------------------------------------

def checks(launch: LaunchSettings, cfg, p, ev: dict, num_layers=None) -> list[tuple]:
    out = _backend(launch, ev)
    kind = launch.flags.get("decoding_type")
    if launch.draft and (launch.method or "").lower() != "eagle3":
        out.append(("LAUNCH_SETTING", ERROR, f"speculative_config.decoding_type is "
                    f"{kind or 'not set'}: an EAGLE-3 draft needs {p.capture_switch}",
                    {**ev, "cite": ARGS}))
    elif isinstance(kind, str) and kind not in _eagle_names(p):
        out.append(("LAUNCH_SETTING", ERROR, f"speculative_config.decoding_type {kind!r}: "
                    f"{p.name} {p.version} refuses it at startup (the name is matched exactly: "
                    f"'Invalid decoding type' in the copies read); write decoding_type: "
                    f"{_eagle_names(p)[-1]}", {**ev, "cite": DISPATCH}))
    if launch.flags.get("eagle3_model_arch", "llama3") != "llama3":
        out.append(("LAUNCH_SETTING", WARNING, "speculative_config.eagle3_model_arch is "
                    f"{launch.flags['eagle3_model_arch']}: the engine builds "
                    "MistralLarge3EagleForCausalLM, whose keys its MistralLarge3WeightMapper "
                    "renames; the kit's answer is for the llama3 draft class "
                    "(Eagle3ForCausalLM) and does not hold for it", {**ev, "cite": ARCH}))
    if cfg is not None and "eagle3_layers_to_capture" in launch.flags:
        out += _capture(launch, cfg, ev, num_layers)
    return out


def _eagle_names(p) -> tuple[str, ...]:
    """The EAGLE-3 decoding_type names this release dispatches on, the current one last."""
    return ("Eagle", "Eagle3") if release_key(p.covers[0]) >= release_key(EAGLE3_NAME_SINCE) \
        else ("Eagle",)


def _backend(launch: LaunchSettings, ev: dict) -> list[tuple]:
    backend = launch.flags.get("--backend")
    if backend != "trt":
        return []
    return [("LAUNCH_SETTING", ERROR, "--backend trt builds TensorRT engines, whose Eagle model "
             "is EAGLE-1/2 only: an EAGLE-3 draft is not served there (the PyTorch backend, the "
             "default from 1.0, serves EAGLE-3); drop --backend trt",
             {**ev, "cite": TRT_BACKEND})]


def _capture(launch: LaunchSettings, cfg, ev: dict, num_layers: int | None) -> list[tuple]:
    """The ids the YAML gives against the trained ones (the training default's, where the
    draft declares none, need the target's NUM_LAYERS)."""
    ids = launch.flags.get("eagle3_layers_to_capture")
    trained, how = trained_aux_indices(cfg, num_layers)
    ev = {**ev, "cite": CAPTURE, "note": NOT_PROBED}
    if ids is None:
        line = _line(trained)
        return [("AUX_LAYERS_DEFAULTED", WARNING if line else INFO,
                 "the YAML gives no eagle3_layers_to_capture: TensorRT-LLM captures its "
                 "defaults (1, L//2-1, L-4), the outputs of those layers = hidden_states "
                 "[2, L//2, L-3] (the draft's own ids are never read)"
                 + (f"; training used {trained} ({how}): write {line}" if line else ""),
                 {**ev, "config_line": line or None})]
    out = _fc_width(ids, cfg, ev)
    captured = sorted({i + 1 for i in ids if i >= 0})
    if trained is None or captured == sorted(set(trained)):
        return out
    line = _line(trained)
    declared = cfg.aux_layer_ids.value
    copied = declared is not None and sorted(ids) == sorted(declared)
    return out + [("AUX_LAYER_CONVENTION", ERROR,
                   f"eagle3_layers_to_capture {sorted(ids)} makes TensorRT-LLM capture "
                   f"hidden_states {captured} (id i = the output of layer i, hidden_states[i+1]), "
                   f"but training used {trained} ({how})"
                   + ("; these are the draft's own ids copied as they are, one layer too deep: "
                      "TensorRT-LLM id i is SGLang/vLLM hidden_states index i+1" if copied else "")
                   + f"; write {line}", {**ev, "config_line": line, "captured": captured,
                                         "trained": trained})]


def _line(trained: list[int] | None) -> str:
    if not trained or any(t - 1 < 0 for t in trained):
        return ""
    return f"eagle3_layers_to_capture: {sorted(t - 1 for t in trained)}"


def _fc_width(ids: list[int], cfg, ev: dict) -> list[tuple]:
    """The fc the engine builds for this many ids against the draft's own count."""
    n = len(set(ids))
    if any(i < -1 for i in ids):
        return [("LAUNCH_SETTING", ERROR, f"eagle3_layers_to_capture {ids} holds a layer id "
                 "below -1 (-1 names the final post-norm state; others are target layers)",
                 {**ev, "cite": ARGS})]
    if n == 1:
        return [("LAUNCH_SETTING", ERROR, "eagle3_layers_to_capture has one id: TensorRT-LLM "
                 "builds no fc for one capture layer, so the checkpoint's fc is dropped and the "
                 "draft reads one raw target state", {**ev, "cite": FC})]
    trained = cfg.num_aux
    if trained and n != trained:
        return [("LAUNCH_SETTING", ERROR, f"eagle3_layers_to_capture has {n} ids, so fc takes "
                 f"{n} x {cfg.Ht} inputs, but the draft was trained on {trained} aux states: the "
                 "fc weight does not fit (shape error at load)", {**ev, "cite": FC})]
    return []


def serve(target: str, draft: str) -> str:
    """The --config YAML a person writes to serve DRAFT (trtllm-serve TARGET --config it): the
    kit's own eagle3_layers_to_capture line from the draft's trained ids, omitted where they are
    not known (TensorRT-LLM then captures its defaults, which the checks report). The target is
    named on trtllm-serve's command line, not in this file. decoding_type Eagle: the one name
    every release dispatches on (Eagle3 is refused before 1.2.0; Eagle is its deprecated alias
    after)."""
    lines = ["speculative_config:", "  decoding_type: Eagle", "  max_draft_len: 3",
             f"  speculative_model: {json.dumps(draft)}"]
    capture = _line(_trained_for(target, draft))
    return "\n".join(lines + ([f"  {capture}"] if capture else [])) + "\n"


def _trained_for(target: str, draft: str) -> list[int] | None:
    """The hidden_states indices the draft was trained on, the target's depth resolving the
    defaults; None where its config (or the target's) does not say."""
    from eagle3_nb.config import parse_config, parse_target_config
    from eagle3_nb.io.checkpoint import read_json

    draft_dir, target_dir = Path(draft).resolve(), Path(target).resolve()
    try:
        cfg = parse_config(read_json(draft_dir, "config.json"))
        layers = parse_target_config(read_json(target_dir, "config.json"), target) \
            .num_hidden_layers if target_dir.is_dir() else None
    except Eagle3NbError:
        return None
    return trained_aux_indices(cfg, layers)[0]


DIALECT = LaunchDialect(
    starts=starts, parse=parse, checks=checks,
    draft_tensor_parallel=lambda launch: launch.tensor_parallel,
    tensor_parallel_fix="serve at a tensor-parallel size that divides them",
    tensor_parallel_cite="NVIDIA/TensorRT-LLM tensorrt_llm/_torch/models/modeling_speculative.py "
                         "Eagle3Attention (the draft shares the target's mapping) "
                         "[main@00679c66]",
    example="trtllm-serve MODEL --config config.yaml (speculative_config: decoding_type: "
            "Eagle3, max_draft_len, speculative_model)",
    setting_names={"num_steps": "speculative_config.max_draft_len",
                   "method": "speculative_config.decoding_type"},
    read_text=read_text,
    serve=serve,
)
