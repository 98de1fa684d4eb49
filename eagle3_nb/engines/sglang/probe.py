"""SGLang's probe adapter: build the draft class SGLang picks for architectures[0] on CPU, in
SGLang's own single-process state, and hand back its load_weights (eagle3_nb.probe runs it)."""

from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path

from eagle3_nb.engines.probing import (BuildError, Built, draft_class, engine_version,
                                       import_module, line, prepare_process, scratch_dir, setup)
from eagle3_nb.engines.profile import release_key

_SGLANG_READY = False


def _placeholder_model() -> str:
    """ServerArgs reads its model_path's config.json; the draft's may be one SGLang cannot read
    (that is the probe's question, asked later), so the server args get a plain Llama one."""
    import json

    tmp = scratch_dir("serverargs")
    (tmp / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
        "intermediate_size": 128, "num_attention_heads": 2, "num_key_value_heads": 2,
        "num_hidden_layers": 1, "vocab_size": 256, "max_position_embeddings": 2048}))
    return str(tmp)


def _sglang_distributed() -> None:
    global _SGLANG_READY
    if _SGLANG_READY:
        return
    ps = importlib.import_module("sglang.srt.distributed.parallel_state")
    server_args = importlib.import_module("sglang.srt.server_args")
    import torch.distributed as dist

    if not dist.is_initialized():
        ps.init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo")
    if not ps.model_parallel_is_initialized():
        args = server_args.ServerArgs(model_path=_placeholder_model(), tp_size=1, pp_size=1,
                                      ep_size=1, device="cpu")
        try:
            rc = importlib.import_module("sglang.srt.runtime_context")
        except ImportError:  # before 0.5.13: no runtime_context module
            rc = None
        if rc is not None and hasattr(rc, "publish"):
            rc.reset_context()
            rc.publish(args, role="probe", ranks=rc.SpawnRanks(world_rank=0))
            if ps._WORLD is not None:
                rc.get_parallel().override_permanently(world_group=ps._WORLD)
        elif hasattr(server_args, "set_global_server_args_for_scheduler"):
            # sglang [0.5.x-0.5.19]: no runtime_context.publish; the process-wide ServerArgs is
            # set by server_args.set_global_server_args_for_scheduler (what the scheduler calls)
            server_args.set_global_server_args_for_scheduler(args)
        ps.initialize_model_parallel(backend="gloo")
    _SGLANG_READY = True


def _sglang_config_registry_compat(version: str) -> list[str]:
    """sglang [<0.5.20] registers its own config classes with AutoConfig.register(name, cls)
    without exist_ok (sglang/srt/configs/*.py, at import of sglang.srt.configs); this
    transformers already ships several of those model_types (qwen3_asr, deepseek_v32, ...), so
    the import raises "'qwen3_asr' is already used by a Transformers config". 0.5.20 passes
    exist_ok=True itself (configs/qwen3_asr.py); for older releases the probe does the same, so
    the engine's class wins as it does there. No EAGLE-3 draft config is among them."""
    if release_key(version) >= release_key("0.5.20"):
        return []
    from transformers.models.auto import configuration_auto as ca

    mapping = ca._LazyConfigMapping
    if getattr(mapping.register, "_eagle3nb", False):
        return []
    original = mapping.register

    def register(self, key, value, exist_ok=False):
        return original(self, key, value, exist_ok=True)

    register._eagle3nb = True
    mapping.register = register
    return [f"sglang {version} registers config classes without exist_ok; the probe let them "
            "replace this transformers' classes of the same model_type (as sglang 0.5.20+ does)"]


def _sglang_cpu_fallback_compat(version: str) -> None:
    """sglang [<0.5.8] layers/layernorm.py and layers/activation.py (module level): unless
    CUDA, HIP, NPU, XPU or a CPU with AMX kernels (utils.cpu_has_amx_support()), they replace
    their own RMSNorm / GemmaRMSNorm / SiluAndMul / GeluAndMul with `from
    vllm.model_executor.layers... import ...`, and layers/rotary_embedding.py
    RotaryEmbedding.__init__ imports `vllm._custom_ops.rotary_embedding` as its fallback kernel,
    so on this CPU the engine needs vLLM. On a GPU it
    keeps its own classes; the probe gets the same by answering cpu_has_amx_support() with True
    while those modules are first imported. In every module imported in that window (custom_op,
    amx_utils, rotary_embedding, quantization/unquant, fp8, w8a8_int8, moe_runner/triton) the
    flag only picks forward kernels or AMX weight packing in process_weights_after_loading,
    neither of which the probe runs; no parameter depends on it. 0.5.8 dropped the vLLM fallback."""
    import sys
    if (release_key(version) >= release_key("0.5.8")
            or "sglang.srt.layers.layernorm" in sys.modules):
        return
    utils = import_module("sglang", "sglang.srt.utils")
    original = getattr(utils, "cpu_has_amx_support", None)
    if original is None:
        return
    utils.cpu_has_amx_support = lambda: True
    try:
        for module in ("sglang.srt.layers.layernorm", "sglang.srt.layers.activation",
                       "sglang.srt.layers.rotary_embedding"):
            import_module("sglang", module)
    finally:
        utils.cpu_has_amx_support = original


def build(draft: Path, target: Path | None, d2t_param: str) -> Built:
    os.environ.setdefault("SGLANG_USE_CPU_ENGINE", "1")  # the engine's own CPU mode
    prepare_process()
    notes = _sglang_config_registry_compat(engine_version("sglang"))
    import_module("sglang", "sglang")
    _sglang_cpu_fallback_compat(engine_version("sglang"))
    # sglang [0.4.x]: sglang/srt/utils.py was a module and get_config lived in
    # sglang/srt/hf_transformers_utils.py (moved under the utils package in 0.5)
    utils_spec = importlib.util.find_spec("sglang.srt.utils")
    hf_utils = import_module("sglang", "sglang.srt.utils.hf_transformers_utils"
                       if utils_spec.submodule_search_locations is not None else
                       "sglang.srt.hf_transformers_utils")
    setup("sglang", _sglang_distributed)
    try:
        config = hf_utils.get_config(str(draft), trust_remote_code=False)
    except Exception as exc:
        raise BuildError(f"reading config.json: {line(exc)}") from exc
    arch = (getattr(config, "architectures", None) or [None])[0]
    cls = draft_class("sglang", "sglang.srt.models", arch)
    try:
        model = cls(config)
    except Exception as exc:
        raise BuildError(f"{cls.__name__}(config): {line(exc)}") from exc
    watch = [] if d2t_param in dict(model.named_parameters()) else [d2t_param]
    return Built(model, model.load_weights, watch, f"{cls.__module__}.{cls.__name__}", notes)
