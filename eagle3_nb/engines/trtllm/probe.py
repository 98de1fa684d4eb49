"""TensorRT-LLM's probe adapter: build the engine's own one-model draft class,
Eagle3ForCausalLM, from the draft's config and hand back its load_weights (eagle3_nb.probe runs
it and compares what it wrote with the profile).

The construction follows NVIDIA/TensorRT-LLM main@00679c66 as read (no release was installable
here, so it was exercised only against a stand-in with the same interface, in the tests):
SpecDecOneEngineForCausalLM.__init__ builds the draft's ModelConfig with
`ModelConfig.from_pretrained(spec_config.speculative_model, ..., spec_config=spec_config)`
(tensorrt_llm/_torch/models/modeling_speculative.py), then `Eagle3ForCausalLM(draft_config)`;
`Eagle3ForCausalLM.load_weights(weights: dict, weight_mapper)` takes the checkpoint as one dict.
The engine reads draft configs with trust_remote_code=True; the probe passes False (the kit never
runs a checkpoint's code). TensorRT-LLM's loader calls torch.cuda.set_device: run the probe on a
machine with a GPU and TensorRT-LLM installed (its NGC container)."""

from __future__ import annotations

from pathlib import Path

from eagle3_nb.engines.probing import BuildError, Built, import_module, line, prepare_process

ENGINE = "trtllm"
SPEC = "tensorrt_llm._torch.models.modeling_speculative"
CONFIG = "tensorrt_llm._torch.model_config"
ARGS = "tensorrt_llm.llmapi.llm_args"
MAPPER = "tensorrt_llm._torch.models.checkpoints.hf.weight_mapper"
MAX_DRAFT_LEN = 3


def _spec_config(args, draft: Path):
    """The EAGLE-3 decoding config, by its newer name (Eagle3DecodingConfig, PR #10124) or the
    older one; eagle3_layers_to_capture is left unset, as a YAML without it leaves it."""
    cls = getattr(args, "Eagle3DecodingConfig", None) or getattr(args, "EagleDecodingConfig")
    try:
        return cls(max_draft_len=MAX_DRAFT_LEN, speculative_model=str(draft),
                   eagle3_one_model=True)
    except Exception as exc:
        raise BuildError(f"{cls.__name__}(speculative_model=...): {line(exc)}") from exc


def _mapper(model, model_config):
    """The Hugging Face weight mapper the engine's loader takes, bound to the model."""
    module = import_module(ENGINE, MAPPER)
    mapper = module.HfWeightMapper()
    init = getattr(mapper, "init_model_and_config", None)
    if init is not None:
        init(model, model_config)
    return mapper


def build(draft: Path, target: Path | None, d2t_param: str) -> Built:
    prepare_process()
    args = import_module(ENGINE, ARGS)
    config_mod = import_module(ENGINE, CONFIG)
    spec_mod = import_module(ENGINE, SPEC)
    spec_config = _spec_config(args, draft)
    try:
        model_config = config_mod.ModelConfig.from_pretrained(
            str(draft), trust_remote_code=False, spec_config=spec_config)
    except Exception as exc:
        raise BuildError(f"ModelConfig.from_pretrained(draft): {line(exc)}") from exc
    try:
        model = spec_mod.Eagle3ForCausalLM(model_config)
    except Exception as exc:
        raise BuildError(f"Eagle3ForCausalLM(draft config): {line(exc)}") from exc
    mapper = _mapper(model, model_config)

    def load(weights):
        return model.load_weights(dict(weights), mapper)

    notes = ["one-model mode (eagle3_one_model: true), eagle3_layers_to_capture unset: "
             "the engine's default capture count (3) sizes fc"]
    if target is not None:
        notes.append("the target config is not read by the draft's build (one-model mode builds "
                     "the draft from its own config)")
    return Built(model, load, [], f"{SPEC}.Eagle3ForCausalLM", notes)
