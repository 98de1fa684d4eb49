"""vLLM's server log: how to tell it, its release and resolved arguments, and the texts it
prints when an EAGLE-3 draft goes wrong (signatures, each with where the text was read)."""

from __future__ import annotations

import re

from eagle3_nb.engines.profile import releases_where
from eagle3_nb.engines.registry import LogDialect, Signature, Toggle
from eagle3_nb.engines.vllm.profiles import PROFILES
from eagle3_nb.findings import ERROR, INFO
from eagle3_nb.io.logs import last_line_with, literal_dict
from eagle3_nb.observation import as_int, as_text

_MARKERS = ("vllm/", "vllm.", "vLLM API server version", "vLLM server version",
            "SpecDecoding metrics:", "non-default args:", "LLM engine (v", "EngineCore")
_RELEASE = r"(\d+\.\d+\.\d+(?:\.\d+)?(?:\.post\d+)?)"
# entrypoints/openai/api_server.py setup_server [0.11.0] "vLLM API server version %s"; from 0.25.0
# log_version_and_model: "vLLM server version %s, serving model %s" with VLLM_DISABLE_LOG_LOGO=1,
# else a logo whose line reads "version %s"; every release: v1/engine/core.py EngineCore.__init__
# "Initializing a V1 LLM engine (v%s) with config: %s"
_VERSIONS = (re.compile(r"vLLM (?:API )?server version " + _RELEASE),
             re.compile(r"LLM engine \(v" + _RELEASE + r"\)"),
             re.compile(r"^\W*version\s+v?" + _RELEASE + r"\s*$", re.M),
             re.compile(r"\bvllm(?:\s*[:=]+\s*|\s+|-)v?" + _RELEASE + r"\b", re.I))


def server_args(text: str) -> dict | None:
    """The `non-default args: {...}` line vLLM logs at launch (entrypoints log_non_default_args:
    the command's own arguments, --speculative-config as a dict), else the engine's config line
    (VllmConfig.__str__), mapped to the fields observe records."""
    found = last_line_with(text, "non-default args:")
    given = literal_dict(found[0]) if found else {}
    if not given:
        return _engine_config_args(text)
    spec = given.get("speculative_config")
    spec = dict(spec) if isinstance(spec, dict) else {}
    for short, key in (("spec_method", "method"), ("spec_model", "model"),
                       ("spec_tokens", "num_speculative_tokens")):  # 0.25.0+ shorthand flags
        spec.setdefault(key, given.get(short))
    return {"engine": "vllm", "version": DIALECT.version(text),
            "model": as_text(given.get("model")),
            "draft": as_text(spec.get("model")), "method": as_text(spec.get("method")),
            "num_steps": as_int(spec.get("num_speculative_tokens")), "topk": None,
            "num_draft_tokens": None, "tensor_parallel": as_int(given.get("tensor_parallel_size")),
            "draft_tensor_parallel": as_int(spec.get("draft_tensor_parallel_size")),
            "cuda_graphs": not given.get("enforce_eager", False),
            "attention_backend": as_text(given.get("attention_backend")),
            "draft_attention_backend": None,
            "source": f"vLLM non-default args line (log line {found[1]})"}


_ENGINE_LINE = re.compile(
    r"speculative_config=SpeculativeConfig\(method='(?P<method>[^']*)', model='(?P<draft>[^']*)'"
    r", num_spec_tokens=(?P<steps>\d+)\)")


def _engine_config_args(text: str) -> dict | None:
    found = last_line_with(text, "LLM engine (v")
    m = _ENGINE_LINE.search(found[0]) if found else None
    if m is None:
        return None
    line = found[0]
    tp = re.search(r"tensor_parallel_size=(\d+)", line)
    eager = re.search(r"enforce_eager=(True|False)", line)
    model = re.search(r"\bmodel='([^']*)'", line)
    return {"engine": "vllm", "version": DIALECT.version(text), "model": model and model.group(1),
            "draft": m.group("draft"), "method": m.group("method"),
            "num_steps": int(m.group("steps")), "topk": None, "num_draft_tokens": None,
            "tensor_parallel": int(tp.group(1)) if tp else None,
            "cuda_graphs": not (eager and eager.group(1) == "True"),
            "attention_backend": None, "draft_attention_backend": None,
            "source": f"vLLM engine config line (log line {found[1]})"}


_READ_TEXT = "read in the 0.11.0, 0.25.0, 0.33.0 and 0.34.0 wheels"
_INSPECT = "eagle3-nb inspect DRAFT --engine vllm==VERSION --target-config TARGET"
_ARCH_FIX = ('set the draft config\'s architectures to ["Eagle3LlamaForCausalLM"] (or '
             '"LlamaForCausalLMEagle3") in a copy; an Eagle3DeepSeekMTPModel means the draft '
             "config says model_type deepseek_v3, which vLLM rewrites to the MTP head: give it "
             "deepseek_v2")
SIGNATURES = (
    Signature("vllm-speculators-config",
              r"Unrecognized model in (?P<path>\S+?)\.? Should have a .model_type. key",
              "LOAD_ERROR", ERROR, "the draft's config.json has no model_type: a speculators-"
              "format config, which this release reads through transformers' AutoConfig and "
              "cannot (speculators configs are read from 0.10.1, PR #21345)",
              "convert a copy to the flat form (eagle3-nb convert DRAFT NEW --to eagle), or "
              "serve with vLLM 0.10.1 or later",
              "transformers AutoConfig.from_pretrained; the profiles' dialect_error",
              *releases_where(PROFILES, lambda p: bool(p.dialect_error))),
    Signature("vllm-unknown-key", r"There is no module or parameter named '(?P<param>[^']+)'",
              "LOAD_ERROR", ERROR,
              "the checkpoint has a tensor ({param}) this draft class has no parameter for, and "
              "this release refuses unknown keys",
              f"{_INSPECT} names every key's fate; convert a copy that drops or renames it "
              "(eagle3-nb convert DRAFT NEW --engine vllm==VERSION)",
              "vllm/model_executor/models/utils.py AutoWeightsLoader._load_module (ValueError; "
              f"{_READ_TEXT}), the profiles' unknown_error; eagle3-nb probe on 0.34.0, sample "
              "prefix-draft-model",
              *releases_where(PROFILES, lambda p: "There is no module" in p.unknown_error)),
    Signature("vllm-unknown-key-lookup", r"KeyError: '(?P<param>[^']+)'", "LOAD_ERROR", ERROR,
              "the checkpoint has a tensor ({param}) this draft class has no parameter for (or a "
              "second decoder layer this release does not build)",
              f"{_INSPECT} names every key's fate; convert a copy that drops or renames it",
              "vllm/model_executor/models/llama_eagle3.py LlamaModel.load_weights "
              "(params_dict[name]; 0.11.0 L182/L187), the profiles' unknown_error; vllm#18906",
              *releases_where(PROFILES, lambda p: p.unknown_error.startswith("KeyError")),
              frame="llama_eagle3"),
    Signature("vllm-weight-shape",
              r"(?:Tried to load weights of size |Attempted to load weight \()torch\.Size\("
              r"\[(?P<loaded>[^\]]*)\]\)\)?\s*(?:to a parameter of size |into parameter \()"
              r"torch\.Size\(\[(?P<expected>[^\]]*)\]\)", "LOAD_ERROR", ERROR,
              "a checkpoint tensor of shape [{loaded}] goes into a parameter of shape "
              "[{expected}]: for fc, the engine built it for another number of aux states than "
              "the checkpoint's (its input width / the target hidden size)",
              f"{_INSPECT} names the tensor; for fc set num_aux_hidden_states or the "
              "eagle_config id list to the checkpoint's aux count (vllm #54526)",
              "vllm/model_executor/model_loader/weight_utils.py default_weight_loader "
              f"(AssertionError; {_READ_TEXT}); eagle3-nb probe on 0.34.0, sample "
              "aux4-speculators", None, None),
    Signature("vllm-unsupported-arch",
              r"Model architectures (?P<archs>\[[^\]]*\]) are not supported for now",
              "LOAD_ERROR", ERROR, "the draft config's architectures {archs} name no class this "
              "release registers (vLLM prefixes Eagle3 to a name that lacks it)", _ARCH_FIX,
              "vllm/model_executor/models/registry.py _ModelRegistry._raise_for_unsupported "
              f"({_READ_TEXT}); config/speculative.py hf_config_override (the MTP rewrite)",
              "0.11.0", None),
    Signature("vllm-target-not-eagle3", r"Model does not support EAGLE3 interface|EAGLE-3 "
              r"speculative decoding requires the language model to support EAGLE-3",
              "LOAD_ERROR", ERROR, "the target class has no EAGLE-3 capture hook "
              "(SupportsEagle3) in this release",
              f"{_INSPECT} names the first release whose class captures (the capture table)",
              "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py "
              "set_eagle3_aux_hidden_state_layers, v1/worker/gpu_model_runner.py (until 0.33.0), "
              f"models/pixtral.py ({_READ_TEXT})", "0.11.0", None),
    Signature("vllm-target-not-mixin", r"Model instance must inherit from EagleModelMixin",
              "LOAD_ERROR", ERROR, "the target class declares EAGLE-3 capture but its model is "
              "not an EagleModelMixin: the default hook asserts at startup (vLLM's Qwen3.5 "
              "wrappers in 0.18.0-0.19.0; they capture from 0.20.0)",
              f"{_INSPECT} names the first release whose class captures (the capture table)",
              "vllm/model_executor/models/interfaces.py SupportsEagle3.set_aux_hidden_state_layers "
              "(assert; 0.18.0 L1356, 0.19.0 L1361; PR #36063)", "0.18.0", None),
    Signature("vllm-forward-without-aux", r"ValueError: too many values to unpack \(expected 2\)",
              "LOAD_ERROR", ERROR, "the target class declares EAGLE-3 capture but its forward "
              "returns no aux hidden states: the runner's profile run cannot unpack them (vLLM's "
              "Qwen3.5 wrappers in 0.17.x inherit a hook whose ids their forward never reads)",
              f"{_INSPECT} names the first release whose class captures (the capture table)",
              "vllm/v1/worker/gpu_model_runner.py GPUModelRunner profile run "
              "(`hidden_states, _ = outputs`; 0.17.0 L4985, 0.17.1 L5011); "
              "models/qwen3_vl.py (the hook) and qwen3_next.py Qwen3NextModel.forward [0.17.0]",
              "0.17.0", "0.17.1", frame="gpu_model_runner"),
    Signature("vllm-target-type-gate",
              r"(?i:eagle3) is only supported for (?P<supported>.+?) models\. Got "
              r".*?model_type='(?P<model_type>[^']+)'", "LOAD_ERROR", ERROR,
              "this release serves EAGLE-3 only for targets whose model_type contains one of "
              "{supported}; the target's is {model_type}",
              "serve with a vLLM release from 0.22.0 (no model_type gate) or a supported target",
              "vllm/config/speculative.py SpeculativeConfig._verify_args (0.11.0 L546; from "
              "0.17.0 the text reads '{method} is only supported for [...] models'); vllm#22152 "
              "quotes the older Llama-only text", None, "0.21.0"),
    Signature("vllm-verifier-not-remote", r"Speculators verifier must name a remote model "
              r"repository", "LAUNCH_SETTING", ERROR,
              "the speculators draft names a local verifier, which this release refuses",
              "serve the target with --model TARGET and the draft with --speculative-config "
              "'{\"method\": \"eagle3\", \"model\": DRAFT, ...}'",
              "vllm/transformers_utils/config.py maybe_override_with_speculators (0.33.0 L862, "
              "0.34.0 L907)", "0.33.0", None),
    Signature("vllm-heads-tp", r"Total number of attention heads \((?P<heads>\d+)\) must be "
              r"divisible by tensor parallel size \((?P<tp>\d+)\)", "LAUNCH_SETTING", ERROR,
              "a model with {heads} attention heads cannot be sharded {tp} ways",
              'for the draft: "draft_tensor_parallel_size": 1 in --speculative-config',
              f"vllm/config/model.py ModelConfig.verify_with_parallel_config ({_READ_TEXT})",
              "0.11.0", None),
    Signature("vllm-not-divisible", r"(?P<size>\d+) is not divisible by (?P<tp>\d+)",
              "LAUNCH_SETTING", ERROR, "a layer of size {size} cannot be sharded {tp} ways",
              'for the draft: "draft_tensor_parallel_size": 1 in --speculative-config',
              "vllm/distributed/utils.py ensure_divisibility, called from "
              f"model_executor/layers/linear.py ({_READ_TEXT})", "0.11.0", None,
              frame=r"linear\.py|distributed/utils\.py"),
    Signature("vllm-num-spec-tokens-missing", r"num_speculative_tokens must be provided with "
              r"speculative model|A speculative model was provided, but .num_speculative_tokens. "
              r"was not provided", "LAUNCH_SETTING", ERROR,
              "the speculative config names no num_speculative_tokens and the draft's config has "
              "no n_predict",
              'add "num_speculative_tokens": K to --speculative-config',
              f"vllm/config/speculative.py SpeculativeConfig._verify_args ({_READ_TEXT}); "
              "v1/worker/gpu/spec_decode/speculator_config.py "
              "DraftModelSpeculatorConfig.configure [0.34.0]", "0.11.0", None),
    Signature("vllm-speculators-layer-type",
              r"Unsupported model_type (?P<layer_type>\S+) for Eagle3 speculator", "LOAD_ERROR",
              ERROR, "the speculators config's transformer_layer_config has a model_type "
              "({layer_type}) this release cannot build an EAGLE-3 layer from",
              "retrain or re-export the draft with a llama (or, from 0.24.0, qwen3) layer config",
              "vllm/transformers_utils/configs/speculators/algos.py update_eagle3 (ValueError), "
              "the profiles' speculators_layer_type_error (0.25.0, 0.33.0, 0.34.0 read)",
              "0.25.0", None),
    Signature("vllm-v1-runner-removed",
              r"VLLM_USE_V2_MODEL_RUNNER=(?P<value>\S+) is no longer supported", "LAUNCH_SETTING",
              ERROR, "VLLM_USE_V2_MODEL_RUNNER={value} asks for model runner V1, which this "
              "release removed; the V2 runner reads aux ids only at the top level of the draft's "
              "config.json",
              "unset VLLM_USE_V2_MODEL_RUNNER; if the draft keeps its aux ids only in "
              "eagle_config, put them at the top level of a copy of its config.json",
              "vllm/platforms/interface.py Platform.validate_environ [0.34.0]", "0.34.0", None),
    Signature("vllm-peagle-removed", r"P-EAGLE \(parallel drafting EAGLE-3\) is not supported",
              "LOAD_ERROR", ERROR, "a P-EAGLE (parallel drafting) checkpoint: this release "
              "removed P-EAGLE",
              "serve it with vLLM 0.33.0 or earlier (from 0.22.0), or use a plain EAGLE-3 draft",
              "vllm/transformers_utils/configs/speculators/algos.py update_peagle, "
              "speculators/base.py build_vllm_speculative_config [0.34.0]", "0.34.0", None),
    Signature("vllm-aux-layers-from-model",
              r"Using Eagle3 auxiliary layers from model: (?P<layers>.+)$", "AUX_LAYERS_DEFAULTED",
              INFO, "the engine found no aux layer ids in the draft's config and captures the "
              "target's defaults {layers}",
              "if the draft was trained on other layers, put its ids at the top level of its "
              "config.json (the V2 runner reads no other place)",
              "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py "
              "set_eagle3_aux_hidden_state_layers [0.25.0, 0.33.0, 0.34.0]", "0.25.0", None,
              kind="line"),
    Signature("vllm-aux-layers-from-config",
              r"Using Eagle3 auxiliary layers from config: (?P<layers>.+)$", "",
              INFO, "the engine read the aux layer ids {layers} from the draft's config",
              "nothing to do if they are the hidden_states indices training used",
              "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py "
              "set_eagle3_aux_hidden_state_layers [0.25.0, 0.33.0, 0.34.0]", "0.25.0", None,
              kind="line"),
    Signature("vllm-aux-layers-v1", r"Using auxiliary layers from speculative config: "
              r"(?P<layers>.+)$", "", INFO, "model runner V1 read the aux layer ids {layers} "
              "from the draft's config", "nothing to do if they are the hidden_states indices "
              "training used", "vllm/v1/worker/gpu_model_runner.py "
              "GPUModelRunner._setup_eagle3_aux_hidden_state_outputs [0.25.0, 0.33.0]",
              "0.25.0", "0.33.0", kind="line"),
)

# Flags read in engine/arg_utils.py EngineArgs and config/speculative.py SpeculativeConfig of
# these releases
_READ = ("0.11.0", "0.25.0", "0.33.0", "0.34.0")
TOGGLES = (
    Toggle("--enforce-eager", "CUDA graphs and torch.compile", "0.11.0", None, _READ),
    Toggle('"draft_tensor_parallel_size": 1 in --speculative-config', "the draft sharded with "
           "the target's tensor-parallel size", "0.11.0", None, _READ),
    Toggle('"num_speculative_tokens": 1 in --speculative-config', "draft positions after the "
           "first (the draft's own states fed back)", "0.11.0", None, _READ),
    Toggle("--max-num-seqs 1", "batching: one sequence at a time", "0.11.0", None, _READ),
)

DIALECT = LogDialect(markers=_MARKERS, versions=_VERSIONS, server_args=server_args,
                     signatures=SIGNATURES, toggles=TOGGLES)
