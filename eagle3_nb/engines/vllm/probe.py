"""vLLM's probe adapter: build the draft class vLLM's registry resolves for the draft config on
CPU, inside vLLM's own config context, and hand back its load_weights (eagle3_nb.probe runs it)."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

from eagle3_nb.engines import stubs
from eagle3_nb.engines.probing import (BuildError, Built, EngineNotInstalled, engine_version,
                                       import_module, line, prepare_process, scratch_dir, setup)
from eagle3_nb.engines.profile import release_key

# torch.ops namespace -> op names a layer's __init__ looks up (never calls) when the compiled
# extension that registers them is stubbed: vllm [0.26.0-0.30.0]
# model_executor/layers/activation.py SiluAndMul.__init__ binds torch.ops._C.silu_and_mul on CPU
# too (the op comes from vllm._C, stubbed); 0.31.0 binds it on POWERPC CPUs only, releases before
# 0.26.0 on CUDA/XPU only. Installed only for those releases.
TORCH_OPS: dict[str, tuple[str, ...]] = {"_C": ("silu_and_mul",)}


def cpu_platform_compat() -> None:
    """vllm [<0.28.0] platforms/__init__.py cpu_platform_plugin: the CPU platform is chosen only
    for a '+cpu' build or macOS (VLLM_TARGET_DEVICE == "cpu" is read from 0.28.0), so this wheel
    resolves UnspecifiedPlatform and Attention.__init__ fails ("Invalid attention backend for
    None"). The probe sets vllm.platforms' current platform to CpuPlatform itself, before
    anything resolves it."""
    try:
        if release_key(engine_version("vllm")) >= release_key("0.28.0"):
            return
        platforms = importlib.import_module("vllm.platforms")
        interface = importlib.import_module("vllm.platforms.interface")
        current = getattr(platforms, "_current_platform", "?")
        if current is None or isinstance(current, interface.UnspecifiedPlatform):
            platforms._current_platform = importlib.import_module("vllm.platforms.cpu").CpuPlatform()
    except Exception:  # the probe's own import of vllm reports what is wrong
        return


def triton_check_compat() -> None:
    """vllm [0.34.0] platforms/cpu.py CpuPlatform.check_and_update_config raises "vLLM on x86
    CPUs requires Triton (triton-cpu)" unless vllm.triton_utils.HAS_TRITON (a Triton with a CPU
    backend). Building a draft and running its load_weights never launches a Triton kernel, so
    the probe answers that check with True; nothing else reads the flag after import."""
    if release_key(engine_version("vllm")) < release_key("0.34.0"):
        return
    importlib.import_module("vllm.triton_utils").HAS_TRITON = True


def _prepare() -> None:
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    if release_key("0.26.0") <= release_key(engine_version("vllm")) < release_key("0.31.0"):
        stubs.install_torch_ops(TORCH_OPS)  # SiluAndMul.__init__ binds torch.ops._C.silu_and_mul
    # vLLM inspects model classes in a child Python (registry._run_in_subprocess): give
    # that child the same stubs, through a sitecustomize the probe writes
    hook = scratch_dir("stubs")
    (hook / "sitecustomize.py").write_text(
        "import eagle3_nb.engines.stubs as _s\n_s.install()\n"
        "import eagle3_nb.engines.vllm.probe as _a\n_a.cpu_platform_compat()\n")
    cpu_platform_compat()
    # the hooks of earlier probes in this process went with them: off the path too
    earlier = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
               if p and not ("eagle3nb-stubs-" in p and not os.path.isdir(p))]
    os.environ["PYTHONPATH"] = os.pathsep.join([str(hook), *earlier])
    prepare_process()


def _vllm_target_dir(target: Path | None, draft_cfg: dict) -> tuple[str, list[str]]:
    """A directory with the target's config.json: the one given, else a synthetic Llama target
    sized from the draft (vLLM's draft config path needs a target model config)."""
    if target is not None:
        return str(target if target.is_dir() else target.parent), []
    import json

    H = draft_cfg.get("target_hidden_size") or draft_cfg.get("hidden_size") or 4096
    layer = draft_cfg.get("transformer_layer_config") or {}
    vocab = draft_cfg.get("vocab_size") or layer.get("vocab_size") or 32000
    H = H or layer.get("hidden_size")
    tmp = scratch_dir("target")
    (tmp / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H,
        "intermediate_size": 2 * H, "num_attention_heads": 2, "num_key_value_heads": 2,
        "num_hidden_layers": 8, "vocab_size": vocab, "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "torch_dtype": "float32"}))
    return str(tmp), [f"no --target-config: a synthetic 8-layer Llama target (hidden {H}, "
                      f"vocab {vocab}) stood in"]


_VLLM_READY = False


def build(draft: Path, target: Path | None, d2t_param: str) -> Built:
    _prepare()
    cfg_mod = import_module("vllm", "vllm.config")
    dist_mod = import_module("vllm", "vllm.distributed")
    import json

    raw = json.loads((draft / "config.json").read_text())
    target_dir, notes = _vllm_target_dir(target, raw)
    triton_check_compat()
    try:
        target_cfg = cfg_mod.ModelConfig(model=target_dir, tokenizer=target_dir,
                                         dtype="float32", skip_tokenizer_init=True,
                                         trust_remote_code=False)
    except Exception as exc:
        raise EngineNotInstalled(f"vLLM cannot read the target config {target_dir}: "
                                 f"{type(exc).__name__}: {str(exc)[:300]}", "--target-config",
                                 "pass a plain Llama/Qwen target config") from None
    try:
        spec = cfg_mod.SpeculativeConfig(model=str(draft), method="eagle3",
                                         num_speculative_tokens=2,
                                         target_model_config=target_cfg,
                                         target_parallel_config=cfg_mod.ParallelConfig())
    except Exception as exc:
        raise BuildError(f"reading the draft config: {line(exc)}") from exc
    vllm_config = cfg_mod.VllmConfig(model_config=target_cfg, speculative_config=spec,
                                     device_config=cfg_mod.DeviceConfig(device="cpu"),
                                     load_config=cfg_mod.LoadConfig())
    def dist():
        global _VLLM_READY
        if not _VLLM_READY:
            dist_mod.init_distributed_environment(
                world_size=1, rank=0, local_rank=0, backend="gloo",
                distributed_init_method=f"tcp://127.0.0.1:{os.environ['MASTER_PORT']}")
            dist_mod.ensure_model_parallel_initialized(1, 1)
            _VLLM_READY = True

    with cfg_mod.set_current_vllm_config(vllm_config):
        setup("vllm", dist)
        registry = import_module("vllm", "vllm.model_executor.models")
        draft_cfg = spec.draft_model_config
        try:  # the engine's own name -> class table, as its model loader uses it
            cls, _ = registry.ModelRegistry.resolve_model_cls(
                draft_cfg.hf_config.architectures, model_config=draft_cfg)
        except Exception as exc:
            raise BuildError(f"resolving architectures {draft_cfg.hf_config.architectures}: "
                             f"{line(exc)}") from exc
        try:
            model = cls(vllm_config=vllm_config, prefix="")
        except Exception as exc:
            raise BuildError(f"{cls.__name__}(vllm_config): {line(exc)}") from exc

    def load(weights):
        with cfg_mod.set_current_vllm_config(vllm_config):
            return model.load_weights(weights)

    watch = [] if d2t_param in dict(model.named_parameters()) else []
    return Built(model, load, watch, f"{cls.__module__}.{cls.__name__}", notes)
