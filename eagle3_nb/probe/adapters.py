"""How each installed engine builds its EAGLE-3 draft, in one process on CPU (world size 1, gloo).

One adapter per engine: import the engine, bring up its single-rank distributed state, read the
draft config the way the engine does, resolve architectures[0] to one of the engine's EAGLE-3
draft classes and build it on CPU. The checkpoint directory's code is never run: configs are
read with trust_remote_code=False, and only the engine's own model files are imported.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.probe import stubs

ENGINES = ("sglang", "vllm")


class EngineNotInstalled(Eagle3NbError):
    """The engine cannot be imported in this Python."""


class BuildError(Exception):
    """The engine refused to build the draft (its own exception is the cause)."""


@dataclass
class Built:
    model: Any
    load: Callable
    watch_attrs: list[str] = field(default_factory=list)
    cls: str = ""
    notes: list[str] = field(default_factory=list)


def install_hint(engine: str) -> str:
    return (f"make engine-env ENGINE={engine} (creates .cache/engines/{engine}-<version>/ on top "
            f"of .venv), then run the probe with that environment's Python: "
            f".cache/engines/{engine}-<version>/bin/python -m eagle3_nb.cli probe DRAFT "
            f"--engine {engine}")


def engine_version(engine: str) -> str:
    """The installed engine's version, importing as little as possible."""
    if engine not in ENGINES:
        raise Eagle3NbError(f"no probe for engine {engine!r}", "--engine",
                            f"one of {', '.join(ENGINES)}")
    from importlib import metadata
    try:
        return metadata.version(engine)
    except metadata.PackageNotFoundError:
        raise EngineNotInstalled(f"{engine} is not installed in this Python", "--engine",
                                 install_hint(engine)) from None


def _vllm_cpu_platform_compat() -> None:
    """vllm [<0.28.0] platforms/__init__.py cpu_platform_plugin: the CPU platform is chosen only
    for a '+cpu' build or macOS (VLLM_TARGET_DEVICE == "cpu" is read from 0.28.0), so this wheel
    resolves UnspecifiedPlatform and Attention.__init__ fails ("Invalid attention backend for
    None"). The probe sets vllm.platforms' current platform to CpuPlatform itself, before
    anything resolves it."""
    from eagle3_nb.engines.profile import release_key

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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _prepare(engine: str) -> None:
    stubs.install()
    if engine == "sglang":
        os.environ.setdefault("SGLANG_USE_CPU_ENGINE", "1")  # the engine's own CPU mode
    else:
        os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
        from eagle3_nb.engines.profile import release_key
        if release_key("0.26.0") <= release_key(engine_version("vllm")) < release_key("0.31.0"):
            stubs.install_torch_ops()  # SiluAndMul.__init__ binds torch.ops._C.silu_and_mul
        # vLLM inspects model classes in a child Python (registry._run_in_subprocess): give
        # that child the same stubs, through a sitecustomize the probe writes
        hook = Path(tempfile.mkdtemp(prefix="eagle3nb-stubs-"))
        (hook / "sitecustomize.py").write_text(
            "import eagle3_nb.probe.stubs as _s\n_s.install()\n"
            "import eagle3_nb.probe.adapters as _a\n_a._vllm_cpu_platform_compat()\n")
        _vllm_cpu_platform_compat()
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(hook), os.environ.get("PYTHONPATH", "")) if p)
    for key, value in (("MASTER_ADDR", "127.0.0.1"), ("RANK", "0"), ("WORLD_SIZE", "1"),
                       ("LOCAL_RANK", "0")):
        os.environ.setdefault(key, value)
    os.environ.setdefault("MASTER_PORT", str(_free_port()))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # local directories only, never the network


def _line(exc: BaseException) -> str:
    """The exception in one line: its type and its first message lines (pydantic puts the
    reason on the third)."""
    text = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()
            and not ln.strip().startswith("For further information")]
    return f"{type(exc).__name__}: {' | '.join(text[:3])}"[:500]


class ProbeSetupError(Eagle3NbError):
    """The probe could not bring up the engine's single-process state (not a draft problem)."""


def _setup(engine: str, step: Callable[[], None]) -> None:
    try:
        step()
    except Eagle3NbError:
        raise
    except Exception as exc:
        raise ProbeSetupError(f"could not set up {engine}'s single-process CPU state: "
                              f"{_line(exc)}", "probe",
                              "this build's start-up differs from what the probe knows; "
                              "report it with the engine version") from None


def _import(engine: str, module: str):
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise EngineNotInstalled(f"{engine} is installed but {module} does not import here "
                                 f"({type(exc).__name__}: {exc})", "--engine",
                                 install_hint(engine)) from None


def _draft_class(engine: str, models_pkg: str, arch: str | None):
    """architectures[0] -> the engine's EAGLE-3 draft class, found by reading the engine's
    *eagle3*.py model files for `class ARCH(` (then importing only that file)."""
    if not arch:
        raise BuildError("config.json has no architectures[0]")
    spec = importlib.util.find_spec(models_pkg)
    folder = Path(next(iter(spec.submodule_search_locations)))
    pattern = re.compile(rf"^class {re.escape(arch)}\(", re.M)
    for path in sorted(folder.glob("*eagle3*.py")):
        if pattern.search(path.read_text(encoding="utf-8", errors="replace")):
            module = _import(engine, f"{models_pkg}.{path.stem}")
            return getattr(module, arch)
    raise BuildError(f"architectures[0] {arch!r} is no EAGLE-3 draft class of this {engine} "
                     f"(none of {models_pkg}/*eagle3*.py defines it): the engine would not "
                     "build an EAGLE-3 draft from this config")


# ----------------------------------------------------------------------------- SGLang

_SGLANG_READY = False


def _placeholder_model() -> str:
    """ServerArgs reads its model_path's config.json; the draft's may be one SGLang cannot read
    (that is the probe's question, asked later), so the server args get a plain Llama one."""
    import json

    tmp = Path(tempfile.mkdtemp(prefix="eagle3nb-serverargs-"))
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
    from eagle3_nb.engines.profile import release_key

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
    from eagle3_nb.engines.profile import release_key

    if (release_key(version) >= release_key("0.5.8")
            or "sglang.srt.layers.layernorm" in sys.modules):
        return
    utils = _import("sglang", "sglang.srt.utils")
    original = getattr(utils, "cpu_has_amx_support", None)
    if original is None:
        return
    utils.cpu_has_amx_support = lambda: True
    try:
        for module in ("sglang.srt.layers.layernorm", "sglang.srt.layers.activation",
                       "sglang.srt.layers.rotary_embedding"):
            _import("sglang", module)
    finally:
        utils.cpu_has_amx_support = original


def build_sglang(draft: Path, target: Path | None, d2t_param: str) -> Built:
    _prepare("sglang")
    notes = _sglang_config_registry_compat(engine_version("sglang"))
    _import("sglang", "sglang")
    _sglang_cpu_fallback_compat(engine_version("sglang"))
    # sglang [0.4.x]: sglang/srt/utils.py was a module and get_config lived in
    # sglang/srt/hf_transformers_utils.py (moved under the utils package in 0.5)
    utils_spec = importlib.util.find_spec("sglang.srt.utils")
    hf_utils = _import("sglang", "sglang.srt.utils.hf_transformers_utils"
                       if utils_spec.submodule_search_locations is not None else
                       "sglang.srt.hf_transformers_utils")
    _setup("sglang", _sglang_distributed)
    try:
        config = hf_utils.get_config(str(draft), trust_remote_code=False)
    except Exception as exc:
        raise BuildError(f"reading config.json: {_line(exc)}") from exc
    arch = (getattr(config, "architectures", None) or [None])[0]
    cls = _draft_class("sglang", "sglang.srt.models", arch)
    try:
        model = cls(config)
    except Exception as exc:
        raise BuildError(f"{cls.__name__}(config): {_line(exc)}") from exc
    watch = [] if d2t_param in dict(model.named_parameters()) else [d2t_param]
    return Built(model, model.load_weights, watch, f"{cls.__module__}.{cls.__name__}", notes)


# ----------------------------------------------------------------------------- vLLM

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
    tmp = Path(tempfile.mkdtemp(prefix="eagle3nb-target-"))
    (tmp / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H,
        "intermediate_size": 2 * H, "num_attention_heads": 2, "num_key_value_heads": 2,
        "num_hidden_layers": 8, "vocab_size": vocab, "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "torch_dtype": "float32"}))
    return str(tmp), [f"no --target-config: a synthetic 8-layer Llama target (hidden {H}, "
                      f"vocab {vocab}) stood in"]


_VLLM_READY = False


def build_vllm(draft: Path, target: Path | None, d2t_param: str) -> Built:
    _prepare("vllm")
    cfg_mod = _import("vllm", "vllm.config")
    dist_mod = _import("vllm", "vllm.distributed")
    import json

    raw = json.loads((draft / "config.json").read_text())
    target_dir, notes = _vllm_target_dir(target, raw)
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
        raise BuildError(f"reading the draft config: {_line(exc)}") from exc
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
        _setup("vllm", dist)
        registry = _import("vllm", "vllm.model_executor.models")
        draft_cfg = spec.draft_model_config
        try:  # the engine's own name -> class table, as its model loader uses it
            cls, _ = registry.ModelRegistry.resolve_model_cls(
                draft_cfg.hf_config.architectures, model_config=draft_cfg)
        except Exception as exc:
            raise BuildError(f"resolving architectures {draft_cfg.hf_config.architectures}: "
                             f"{_line(exc)}") from exc
        try:
            model = cls(vllm_config=vllm_config, prefix="")
        except Exception as exc:
            raise BuildError(f"{cls.__name__}(vllm_config): {_line(exc)}") from exc

    def load(weights):
        with cfg_mod.set_current_vllm_config(vllm_config):
            return model.load_weights(weights)

    watch = [] if d2t_param in dict(model.named_parameters()) else []
    return Built(model, load, watch, f"{cls.__module__}.{cls.__name__}", notes)


BUILDERS = {"sglang": build_sglang, "vllm": build_vllm}
