"""Config fields the engines refuse at startup, as data (EngineProfile.config_rules), and the
one check that applies them (plan_startup).

The rules here are the engines' common ground: SGLang and vLLM read a flat draft config through
transformers' AutoConfig (so transformers' config class decides which values start), and both
build the Llama-style draft from their llama.py layers. Which rule sets a release gets follows
the transformers its wheel pins (Requires-Dist), since that is the transformers it runs with.
An engine's own reader (vLLM's speculators converter) keeps its rules in its profiles.
"""

from __future__ import annotations

from typing import Any

from eagle3_nb.engines.profile import UNSET, ConfigRule

_AUTO = ("transformers models/auto/configuration_auto.py AutoConfig.from_pretrained "
         "(CONFIG_MAPPING[model_type]; read in the 4.57.1, 5.0.0, 5.19.0 and 5.23.0 code)")
_STRICT = ("transformers models/llama/configuration_llama.py LlamaConfig: @strict "
           "(huggingface_hub.dataclasses.strict) validates each field's annotated type, from "
           "5.4.0 (not in 5.3.0; read in the 5.3.0, 5.4.0, 5.16.1, 5.19.0 and 5.23.0 wheels); "
           "confirmed by the ablation (tools/config_ablation.py) on sglang 0.5.23 and vllm 0.34.0")
_NO_PATH_GUESS = ("transformers configuration_auto.py AutoConfig.from_pretrained: without "
                  "model_type, 5.0.0 and older guess the class from the path's words (`for "
                  "pattern in sorted(CONFIG_MAPPING...)`); 5.2.0 on raise 'Unrecognized model' "
                  "(read in the 5.0.0, 5.2.0 and 5.4.0 wheels)")
_SILU = ("vllm model_executor/models/llama.py LlamaMLP.__init__ and sglang srt/models/llama.py "
         "LlamaMLP.__init__: `if hidden_act != \"silu\": raise ValueError` (read in vllm 0.34.0, "
         "sglang 0.5.23); the EAGLE-3 drafts build their decoder layer from these")
_ROPE_BASE = ("the draft's rotary embedding computes base ** (arange / dim) from rope_theta "
              "(vllm model_executor/layers/rotary_embedding, sglang srt/layers/rotary_embedding); "
              "confirmed by the ablation on sglang 0.5.23 and vllm 0.34.0")

_ROPE = ("transformers modeling_rope_utils.py rope validation (_check_received_keys: 'Missing "
         "required keys in `rope_parameters` for rope_type ...'), run when the config object is "
         "made (read in 4.57.1 and 5.23.0); confirmed by the ablation on sglang 0.5.23 and vllm "
         "0.33.0 / 0.34.0")
# rope_type -> the keys transformers' validation requires in both 4.x and 5.x and never fills in
# itself (5.x standardisation supplies rope_theta and yarn's original context: left out here)
ROPE_REQUIRED = {"linear": ("factor",), "dynamic": ("factor",), "yarn": ("factor",),
                 "llama3": ("factor", "low_freq_factor", "high_freq_factor"),
                 "longrope": ("short_factor", "long_factor")}
ROPE_ERROR = "KeyError: Missing required keys in `rope_parameters` (transformers' rope validation)"

# Every release that reads flat configs through AutoConfig: model_type names the config class,
# and the config class validates its RoPE settings
AUTOCONFIG = (
    ConfigRule("flat", "model_type", frozenset({"null", "wrong_type"}),
               "ValueError: the checkpoint has model type `{value}` but Transformers does not "
               "recognize this architecture (AutoConfig)", types=("str",), cite=_AUTO),
    ConfigRule("flat", "rope_scaling", frozenset({"rope_keys"}), ROPE_ERROR, cite=_ROPE),
    ConfigRule("flat", "rope_parameters", frozenset({"rope_keys"}), ROPE_ERROR, cite=_ROPE),
)

# The Llama-style draft class of SGLang and vLLM, whatever the transformers
LLAMA_DRAFT_LAYER = (
    ConfigRule("flat", "hidden_act", frozenset({"null", "other_value"}),
               "ValueError: Unsupported activation: {value}. Only silu is supported for now.",
               allowed=("silu",), cite=_SILU),
    ConfigRule("flat", "rope_theta", frozenset({"null"}),
               "TypeError: unsupported operand type(s) for ** or pow(): 'NoneType' and 'Tensor' "
               "(the rotary embedding's base)", cite=_ROPE_BASE),
)

# transformers 5.4+ (a release whose wheel pins it): LlamaConfig refuses a wrongly typed field,
# and AutoConfig a config without model_type
_TYPED = (("num_hidden_layers", "int"), ("rms_norm_eps", "float"), ("hidden_act", "str"),
          ("attention_bias", "bool"), ("mlp_bias", "bool"), ("tie_word_embeddings", "bool"))
STRICT_CONFIG = (
    ConfigRule("flat", "model_type", frozenset({"absent"}),
               "ValueError: Unrecognized model in DRAFT. Should have a `model_type` key in its "
               "config.json (AutoConfig)", cite=_NO_PATH_GUESS),
    *(ConfigRule("flat", key, frozenset({"null", "wrong_type"}),
                 f"StrictDataclassFieldValidationError: Field '{key}' expected {kind} "
                 "(transformers' LlamaConfig checks field types)", types=(kind,),
                 cite=_STRICT) for key, kind in _TYPED),
)

# The releases whose Llama draft class builds fc from num_aux_hidden_states (SGLang 0.5.12 on,
# vLLM 0.22 on): Linear(target_hidden_size * num_aux_hidden_states, H), so a count that is not an
# integer raises while the draft is built; the other releases never read the key
_NUM_AUX = ("sglang srt/models/llama_eagle3.py LlamaModel.__init__ [0.5.23] and vllm "
            "model_executor/models/llama_eagle3.py LlamaModel.__init__ [0.34.0]: "
            "torch.nn.Linear(hidden_size_in * num_aux_hidden_states, ...) with the value as "
            "written; confirmed by the ablation (tools/config_ablation.py) on sglang 0.5.23 and "
            "vllm 0.33.0 / 0.34.0")
NUM_AUX_READ = (
    ConfigRule("flat", "num_aux_hidden_states", frozenset({"wrong_type"}),
               "TypeError: empty(): argument 'size' failed to unpack the object (the draft "
               "builds fc as Linear(target_hidden_size * num_aux_hidden_states, hidden_size))",
               types=("int",), cite=_NUM_AUX),
)
# A draft class whose fc counts the top-level ids with len() where nothing else sets the count
# takes a string's characters for ids: fc is built for len(value) aux states
_LEN_OF_STRING = ("the draft builds fc for len(eagle_aux_hidden_state_layer_ids) aux states, "
                  "which for {value!r} counts its characters: fc's shape differs from the "
                  "checkpoint's (load error); write the ids as a JSON list of integers")
# ConfigRule.when for "no other key sets the aux count"
NO_AUX_COUNT = (("num_aux_hidden_states", (UNSET, None)),
                ("eagle_config.eagle_aux_hidden_state_layer_ids", (UNSET, None)))


def ids_counted_by_len(dialect: str, when: tuple, cite: str) -> ConfigRule:
    """The rule for a draft class that counts top-level ids with len() (WHEN: that class)."""
    return ConfigRule(dialect, "eagle_aux_hidden_state_layer_ids", frozenset({"wrong_type"}),
                      _LEN_OF_STRING, types=("list",), cite=cite, when=when)


# A release whose transformers pin allows both sides of 5.4 (vLLM 0.20-0.23: >=4.56.0, 5.0-5.5.0
# excluded) gets only the rules that hold on both
LENIENT_CONFIG = AUTOCONFIG + LLAMA_DRAFT_LAYER
STRICT_CONFIG_ALL = AUTOCONFIG + STRICT_CONFIG + LLAMA_DRAFT_LAYER

# transformers up to 5.1 build a config without model_type from the model type written in the
# path (the longest; the engine's registrations included) and raise when there is none; 5.2 on
# always raise (STRICT_CONFIG). A release whose pin allows either side gets the rule on both.
_UNRECOGNIZED = ("ValueError: Unrecognized model in DRAFT. Should have a `model_type` key in its "
                 "config.json, or contain one of the following strings in its name (AutoConfig "
                 "guesses the config class from the words of the path it is given, checked here "
                 "on the serving command's draft path when --launch or the log names one, else "
                 "on the path the kit was given; add \"model_type\": \"llama\")")


def path_guessed_model_type(model_types: list[str], cite: str) -> tuple[ConfigRule, ...]:
    """The rule for a release whose transformers guesses a missing model_type from the path,
    MODEL_TYPES being every type its AutoConfig knows there (engines/<engine>/data)."""
    return (ConfigRule("flat", "model_type", frozenset({"unguessed"}), _UNRECOGNIZED,
                       path_words=tuple(model_types), cite=cite),)


MISSING = object()   # lookup's answer for a field the config does not have


def lookup(raw: dict[str, Any], path: str) -> Any:
    """The value at a dotted PATH of a config (MISSING where any part is absent); a digit part
    indexes a list ("architectures.0")."""
    node: Any = raw
    for part in path.split("."):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return MISSING
    return node


def applies(rule: ConfigRule, raw: dict[str, Any]) -> bool:
    """Whether the config is one RULE holds for (its `when`: the engine's path that reads it)."""
    for path, values in rule.when:
        value = lookup(raw, path)
        if (UNSET if value is MISSING else value) not in values:
            return False
    return True


def json_type(value: Any) -> str:
    """A JSON value's type as config messages name it (bool, int, float, str, list, object)."""
    for kind, types in (("bool", bool), ("int", int), ("float", float), ("str", str),
                        ("list", list), ("object", dict)):
        if isinstance(value, types):
            return kind
    return type(value).__name__


def breach(rule: ConfigRule, raw: dict[str, Any], draft_path: str = "") -> str:
    """How the config breaks RULE ("absent", "null", "wrong_type", "other_value", "rope_keys",
    "length", "unguessed"), or "". draft_path: the path the engine is given (for "unguessed")."""
    if not applies(rule, raw):
        return ""
    value = lookup(raw, rule.path)
    if value is MISSING:
        if "unguessed" in rule.fails_when:
            return "" if guessed_type(draft_path, rule.path_words) else "unguessed"
        return "absent" if "absent" in rule.fails_when else ""
    if value is None:
        seen = "null" if "null" in rule.fails_when else ""
        return seen or ("other_value" if rule.allowed and "other_value" in rule.fails_when
                        else "")
    if "rope_keys" in rule.fails_when:
        return "rope_keys" if _rope_missing(value) else ""
    if rule.types and json_type(value) not in rule.types:
        return "wrong_type" if "wrong_type" in rule.fails_when else ""
    if rule.allowed and value not in rule.allowed and "other_value" in rule.fails_when:
        return "other_value"
    if "length" in rule.fails_when and value and _length(value) != rule.length:
        return "length"
    return ""


def guessed_type(path: str, model_types: tuple[str, ...]) -> str | None:
    """The model type AutoConfig takes from a path when config.json has none: the longest one
    written anywhere in it (configuration_auto.py AutoConfig.from_pretrained, transformers
    <= 5.1: `for pattern in sorted(CONFIG_MAPPING, key=len, reverse=True): if pattern in
    str(path)`), or None."""
    return next((t for t in sorted(model_types, key=len, reverse=True) if t in path), None)


def _length(value: Any) -> int | None:
    """len() of a JSON value, None for a number or bool (len() raises TypeError on them)."""
    return len(value) if isinstance(value, (str, list, dict)) else None


def _rope_missing(value: Any) -> list[str]:
    """The keys a RoPE section's rope_type (or legacy type) needs and does not have."""
    if not isinstance(value, dict):
        return []
    kind = value.get("rope_type", value.get("type"))
    return [k for k in ROPE_REQUIRED.get(kind, ()) if k not in value] if isinstance(kind, str) \
        else []


def shown(rule: ConfigRule, raw: dict[str, Any], how: str) -> str:
    """'num_hidden_layers is null', 'model_type is absent', "attention_bias is 'false' (a JSON
    str)"."""
    value = lookup(raw, rule.path)
    if how == "rope_keys":
        kind = value.get("rope_type", value.get("type"))
        return f"{rule.path} has rope_type {kind!r} without {', '.join(_rope_missing(value))}"
    if how == "absent":
        return f"{rule.path} is absent"
    if how == "unguessed":
        return f"{rule.path} is absent and no model type is written in the draft's path"
    if how == "length":
        n = _length(value)
        return f"{rule.path} is {_text(value)} ({'no len()' if n is None else f'len {n}'})"
    if value is None:
        return f"{rule.path} is null"
    return f"{rule.path} is {_text(value)}" + (f" (a JSON {json_type(value)})"
                                               if how == "wrong_type" else "")


def _text(value: Any) -> str:
    return repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."


def value_text(raw: dict[str, Any], path: str) -> str:
    value = lookup(raw, path)
    return "None" if value is None or value is MISSING else str(value)[:40]
