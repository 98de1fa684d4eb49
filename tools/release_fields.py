#!/usr/bin/env python3
"""Evaluate field markers at every release tag of an engine and check them against the profiles.

A *marker* is a small, data-only test of the engine's source at a release tag that tells one
profile field's value (eagle3_nb/engines/profile.py EngineProfile): a regex present in a file
or in one function's source, a file that exists, or a value pulled out by a regex. Each marker
was derived by reading the code on both sides of the change point the release survey found
(tools/data/<engine>-fields.json), so it flips exactly at the documented release.

    python tools/release_fields.py /tmp/survey/sglang.git sglang        # table + change points
    python tools/release_fields.py /tmp/survey/vllm.git vllm --check-profiles
    python tools/release_fields.py GIT sglang --since v0.5.17 --check-profiles  # a new release

`--check-profiles` exits 1 when a change point falls inside a profile range of
eagle3_nb.engines.PROFILES (the profiles missed it) or a release is newer than the last profiled
release. Reads the bare git directory with `git ls-tree` / `git cat-file --batch` only (no
checkout, no network). Python 3.11, stdlib only (plus eagle3_nb for the profiles).
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import re
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from eagle3_nb.engines.profile import release_key  # noqa: E402
from eagle3_nb.errors import EngineSpecError  # noqa: E402

RELEASE_TAG = re.compile(r"^v\d+(?:\.\d+)+(?:\.post\d+)?$")  # rc / dev tags never match
MAX_CELL = 18     # longer values are shown as vK in the table and spelled out below it
TABLE_WIDTH = 12  # marker columns per value table


# ---------------------------------------------------------------- markers as data

@dataclass(frozen=True)
class Probe:
    """One look at the source at a tag.

    test "exists": the file (or, with `function`, that definition) exists -> y / n.
    test "has": `pattern` occurs in the file or the function's source -> y / n, "-" when neither
    the file nor the function exists. test "extract": every match of `pattern` (its groups
    joined when it has groups; spaces, quotes and edge commas removed), unique and sorted,
    joined with ","; "none" without a match, "-" without the file or function.
    `path` may be a glob (fnmatch: `*` also crosses "/"); all matching files are searched.
    `function` is a qualified name ("Class.method", "func") and may be a glob ("*.load_weights").
    """
    path: str
    test: str
    pattern: str = ""
    function: str = ""


@dataclass(frozen=True)
class Marker:
    """A profile field's value at a tag: the probes' values joined with "/", then labelled."""
    field: str
    probes: tuple[Probe, ...]
    why: str
    cite: str                         # upstream change points: release, commit, PR
    labels: dict[str, str] = field(default_factory=dict)  # raw value -> short text
    # "range": every change must start a profile range; "steps": a range or a step of the
    # profiles' target_allowlist; "info": no profile field holds it (reported, never a failure)
    tracked: str = "range"


@dataclass(frozen=True)
class Unmarkable:
    field: str
    why: str


def P(path: str, test: str, pattern: str = "", function: str = "") -> Probe:
    return Probe(path, test, pattern, function)


# ---- SGLang
SRT = "python/sglang/srt/"
S_DRAFT = SRT + "models/llama_eagle3.py"
S_MLA = SRT + "models/kimi_k25_eagle3.py"

SGLANG_MARKERS: tuple[Marker, ...] = (
    Marker("architectures", (P(SRT + "models/*eagle3*.py", "extract",
                               r"^EntryClass\s*=\s*\[?\s*([\w, ]*\w)"),),
           "the EAGLE-3 draft classes a draft's architectures[0] can name (EntryClass of the "
           "*eagle3*.py model files)",
           "0.5.12 + Eagle3DeepseekV2ForCausalLM: a87fb399de (#24826)"),
    Marker("mla (MLA draft class)", (P(S_MLA, "exists"),),
           "kimi_k25_eagle3.py holds the MLA draft Eagle3DeepseekV2ForCausalLM",
           "0.5.12: a87fb399de (#24826) support kimi-k2.5-eagle3-mla",
           {"n": "none", "y": "kimi_k25"}),
    Marker("decoder_param / max_layers",
           (P(S_DRAFT, "has", r"self\.layers\s*=", "LlamaModel.__init__"),
            P(S_DRAFT, "has", r"only supports 1 layer")),
           "LlamaModel builds one `midlayer` (and refuses num_hidden_layers != 1) or "
           "`layers.{i}` for any count",
           "0.5.12: a75b79e03b (#24663) Support newer EAGLE-3 drafters",
           {"n/y": "midlayer, 1", "y/n": "layers.{i}"}),
    Marker("renames",
           (P(S_DRAFT, "has", r"legacy_name_map", "LlamaForCausalLMEagle3.load_weights"),),
           "load_weights rewrites midlayer -> layers.0 and aux_norm_* -> fc_norm.N",
           "0.5.12: a75b79e03b (#24663)", {"n": "none", "y": "legacy map"}),
    Marker("key_resolution",
           (P(S_DRAFT, "has", r"name if name in params_dict else",
              "LlamaForCausalLMEagle3.load_weights"),),
           "a checkpoint name is used bare when it is a parameter, else with 'model.' (before: "
           "always 'model.' + name through LlamaForCausalLM.load_weights)",
           "0.4.9: 886d344964 (#6985) support llama4 eagle3",
           {"n": "model_prefix", "y": "bare_or_model"}),
    Marker("unknown_keys",
           (P(S_DRAFT, "has", r"super\(\)\.load_weights", "LlamaForCausalLMEagle3.load_weights"),),
           "unknown names go to LlamaForCausalLM.load_weights (warning, KeyError for stacked "
           "names) or are dropped silently by the draft's own loop",
           "0.4.9: 886d344964 (#6985)", {"y": "drop_logged", "n": "drop_silent"}),
    Marker("d2t default",
           (P(S_DRAFT, "has", r"self\.hot_token_id\s*=\s*None",
              "LlamaForCausalLMEagle3.__init__"),),
           "hot_token_id starts as None, so a checkpoint without d2t loads (before: "
           "AttributeError at startup)",
           "0.4.9: 886d344964 (#6985)", {"n": "d2t required", "y": "d2t optional"}),
    Marker("fc_aux_count",
           (P(S_DRAFT, "has", r"num_aux_hidden_states", "LlamaModel.__init__"),),
           "fc input = k * Ht with k from num_aux_hidden_states / eagle_config ids (before: 3)",
           "0.5.12: a75b79e03b (#24663)", {"n": "fixed_3", "y": "num_aux..."}),
    Marker("has_fc_norm / flags.fc_norm",
           (P(S_DRAFT, "has", r"fc_norm", "LlamaModel.__init__"),),
           "per-aux RMSNorm before fc, from config fc_norm / use_aux_norm",
           "0.5.12: a75b79e03b (#24663)", {"n": "not read", "y": "top level"}),
    Marker("flags.norm_output",
           (P(S_DRAFT, "has", r"norm_output", "LlamaModel.*"),),
           "norm_output: carry the post-norm state to the next draft step",
           "0.5.12: a75b79e03b (#24663)", {"n": "not read", "y": "top level"}),
    Marker("has_input_norm / flags.norm_before_fc",
           (P(S_DRAFT, "has", r"norm_before_fc", "LlamaModel.__init__"),
            P(S_DRAFT, "has", r"eagle_config\.get\(\s*\"norm_before_fc\"", "LlamaModel.__init__")),
           "input_norm over the concatenated features when norm_before_fc (eagle_config first, "
           "then top level)",
           "0.5.17: 5df193b4ac (#32334) Fix GPT-OSS EAGLE3 hidden states",
           {"n/n": "not read", "y/y": "eagle_config, top"}),
    Marker("mla.flags.fc_norm", (P(S_MLA, "has", r"fc_norm"),),
           "the MLA draft reads fc_norm / use_aux_norm",
           "0.5.13: 93445e6359 (#26506) support kimi-k2.6-eagle3.1-mla draft",
           {"-": "(no MLA)", "n": "not read", "y": "top level"}),
    Marker("mla.flags.norm_output", (P(S_MLA, "has", r"norm_output"),),
           "the MLA draft reads norm_output", "0.5.13: 93445e6359 (#26506)",
           {"-": "(no MLA)", "n": "not read", "y": "top level"}),
    Marker("aux_id_sources",
           (P(SRT + "model_executor/*.py", "has",
              r"eagle_config\s*\[\s*\"eagle_aux_hidden_state_layer_ids\""),
            P(SRT + "model_executor/*.py", "has",
              r"hf_config(\.|\s*,\s*\")eagle_aux_hidden_state_layer_ids")),
           "where the target's model runner reads the draft's aux ids: eagle_config, top level",
           "0.4.9: 886d344964 (#6985)",
           {"n/n": "none", "y/n": "eagle_config", "y/y": "eagle_config, top", "n/y": "top"}),
    Marker("reads_use_aux_hidden_state",
           (P(SRT + "model_executor/*.py", "has", r"get\(\s*\"use_aux_hidden_state\""),),
           "eagle_config.use_aux_hidden_state: false switches the target's capture off",
           "0.5.8: 3dfff6ae3c (#14920) Eagle: GPT-OSS Eagle v2 support", {"n": "no", "y": "yes"}),
    Marker("graphs_use_default_ids",
           (P(SRT + "model_executor/*.py", "has",
              r"eagle_config\s*\[\s*\"eagle_aux_hidden_state_layer_ids\""),
            P(SRT + "model_executor/*.py", "has", r"set_eagle3_layers_to_capture\(\)")),
           "a no-argument set_eagle3_layers_to_capture() (graph capture) after the config ids "
           "are read: replayed CUDA graphs capture the default layers",
           "0.4.9: ids read, 886d344964 (#6985); 0.5.11 fixed: 43925d179d (#22836)",
           {"n/y": "no (ids unread)", "y/y": "yes", "y/n": "no"}),
    Marker("lm_head_policy",
           (P(S_DRAFT, "has", r"load_lm_head_from_target", "LlamaForCausalLMEagle3.__init__"),),
           "draft_vocab_size: null -> the target's lm_head (before: always its own head)",
           "0.5.2: aee094e430 (#9739) add support for nvidia/gpt-oss-120b-Eagle3",
           {"n": "own_always", "y": "target if null"}),
    Marker("missing_draft_vocab_error",
           (P(S_DRAFT, "has", r"vocab_size\s*=\s*\(?\s*config_?\.draft_vocab_size",
              "LlamaForCausalLMEagle3.__init__"),),
           "the draft LogitsProcessor reads config.draft_vocab_size unconditionally, so a "
           "config without it fails even with tied embeddings",
           "0.5.4.post2: 750940ae36 (#12002) Eagle3 DP attention for Qwen3 MoE",
           {"n": "untied only", "y": "always"}),
    Marker("context_error",
           (P(SRT + "configs/model_config.py", "extract",
              r"\"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN\",\s*default=\"(\w+)\""),),
           "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN defaults to True (a longer target context "
           "only warns) or to false (ValueError at startup)",
           "0.5.1: eb19ccadae (#9388) fix errors related to context length in SD",
           {"True": "warning", "none": "ValueError"}),
    Marker("context override sets max_position_embeddings",
           (P(SRT + "configs/model_config.py", "has",
              r"max_position_embeddings\s*=\s*context_length"),),
           "with the override env var the draft's max_position_embeddings follows the target "
           "context too (no profile field: context_override names only the variable)",
           "0.5.3: aab35bccb4 (#10787) fix: draft model IMA by overide max_positional_embeddings",
           {"n": "no", "y": "yes"}, tracked="info"),
    Marker("aux_rules.llama",
           (P(SRT + "models/llama.py", "has", r"layer_ids",
              "LlamaForCausalLM.set_eagle3_layers_to_capture"),
            P(SRT + "models/llama.py", "has", r"val \+ 1",
              "LlamaForCausalLM.set_eagle3_layers_to_capture")),
           "llama.py set_eagle3_layers_to_capture: takes the draft's ids, +1 each",
           "0.4.9: 886d344964 (#6985)", {"n/n": "defaults only", "y/y": "plus_one"}),
    Marker("aux_rules.gpt_oss",
           (P(SRT + "models/gpt_oss.py", "exists", "",
              "GptOssForCausalLM.set_eagle3_layers_to_capture"),
            P(SRT + "models/gpt_oss.py", "has", r"max\(layer_ids\)\s*==\s*num_layers",
              "GptOssForCausalLM.set_eagle3_layers_to_capture")),
           "gpt_oss.py set_eagle3_layers_to_capture: absent (no capture), +1 always, or as-is "
           "when max(ids) == num_layers",
           "0.5.1: c1d2061f97 (#8824) Add initial support for gpt-oss; 0.5.17: 5df193b4ac (#32334)",
           {"n/-": "unsupported", "y/n": "plus_one", "y/y": "as_is_if_max_L"}),
    Marker("aux_rules.deepseek",
           (P(SRT + "models/deepseek_v2.py", "exists", "",
              "DeepseekV2ForCausalLM.set_eagle3_layers_to_capture"),
            P(SRT + "models/deepseek_v2.py", "has", r"layer_ids\[0\]\s*==\s*1",
              "DeepseekV2ForCausalLM.set_eagle3_layers_to_capture")),
           "deepseek_v2.py set_eagle3_layers_to_capture: absent (AttributeError at startup), "
           "+1 always, or +1 only when the first id is 1",
           "0.5.4.post2: 78c43d8847 (#12319) Initial eagle3 support for Deepseek-like models; "
           "0.5.13: f5049709b3 (#25454)",
           {"n/-": "unsupported", "y/n": "plus_one", "y/y": "plus_one_if_1st_1"}),
    Marker("final_boundary_families (llama/deepseek/gpt_oss)",
           (P(SRT + "models/llama.py", "has", r"(i \+ 1|end_layer) in self\.layers_to_capture",
              "LlamaModel.forward"),
            P(SRT + "models/deepseek_v2.py", "has",
              r"(i \+ 1|end_layer) in self\.layers_to_capture", "DeepseekV2Model.forward"),
            P(SRT + "models/gpt_oss.py", "has", r"(i \+ 1|end_layer) in self\.layers_to_capture",
              "GptOssModel.forward")),
           "the capture loop yields boundary L (the last layer's output), per target family",
           "0.5.17 gpt_oss: 5df193b4ac (#32334)",
           {"n/n/-": "none", "n/n/n": "none", "n/n/y": "gpt_oss"}),
    Marker("config_rules (graph width from top-level ids)",
           (P(SRT + "speculative/eagle_utils.py", "has",
              r"getattr\(hf_config,\s*\"eagle_aux_hidden_state_layer_ids\"",
              "get_draft_input_from_target_hidden_dim"),),
           "the draft-extend CUDA graph sizes its hidden-state input from len(top-level ids) when "
           "num_aux_hidden_states and eagle_config's ids are unset "
           "(GRAPH_WIDTH_FROM_TOP_LEVEL_IDS)",
           "0.5.15: PR #29464", {"-": "no fallback", "n": "no fallback", "y": "top-level len"}),
    Marker("config_rules (eagle_config: null at the worker)",
           (P(SRT + "speculative/eagle_worker*.py", "has", r"\"eagle_config\",\s*\{\}"),),
           "the EAGLE worker reads getattr(hf_config, 'eagle_config', {}).get(...): a null "
           "eagle_config raises AttributeError at startup (WORKER_EAGLE_CONFIG_NULL)",
           "0.5.8: PR #14920; 0.5.15: PR #29464", {"-": "not read", "n": "not read",
                                                    "y": "null raises"}),
)
# Fields too subtle for a regex: printed as "not markable: read by hand" (a new release needs
# them read in the code, whatever the markers say).
SGLANG_UNMARKABLE: tuple[Unmarkable, ...] = (
    Unmarkable("embed_policy / target_hidden_null_breaks_fc / fc_skip_when_width_is_hidden",
               "never changed in the survey; they hang on a hasattr/shape comparison spread over "
               "llama.py set_embed and the worker, too loose for one regex"),
)

# ---- vLLM
MODELS = "vllm/model_executor/models/"
V_DRAFT = MODELS + "llama_eagle3.py"

V_SPEC = "vllm/transformers_utils/configs/speculators/algos.py"
V_PROPOSER = "vllm/v1/spec_decode/*.py"
V_CONFIG = "vllm/config*.py"  # vllm/config.py, later vllm/config/__init__.py, config/speculative.py
V_CAPTURE = r"_maybe_add_hidden_state|end_layer in self\.aux_hidden_state_layers"
V2_SPEC = "vllm/v1/worker/gpu/spec_decode/*.py"  # model runner V2
# a registry line of a draft served by an *eagle3 module; a commented-out line reads "#Name"
V_EAGLE3_REGISTRY = r"^\s*(#\s*)?\"(\w+)\":\s*\(\s*\"\w*eagle3\""

VLLM_MARKERS: tuple[Marker, ...] = (
    Marker("architectures",
           (P(MODELS + "registry.py", "extract",
              r"^\s*(#\s*)?\"((?:Eagle3)?(?:Llama|Qwen3)ForCausalLM(?:Eagle3)?)\":\s*\("
              r"\s*\"\w*eagle3\""),),
           "registry lines of the Llama / Qwen3 EAGLE-3 draft names the profiles list",
           "0.10.1 LlamaForCausalLMEagle3 commented out: 807d21b80d (#22611); 0.10.2 back: "
           "53b42f4102 (#24392); 0.24.0 + Eagle3Qwen3ForCausalLM: 89bd2c14d3 (#43132)"),
    Marker("architectures (every EAGLE-3 registry line)",
           (P(MODELS + "registry.py", "extract", V_EAGLE3_REGISTRY),),
           "every registry name served by an *eagle3 module: VL, MiniMax, PEagle and DeepSeek "
           "drafts too; the profiles' architectures list only the Llama / Qwen3 names",
           "0.11.1 Eagle3Qwen2_5vl: f1d53d150c (#22872); 0.12.0 Eagle3Qwen3vl: 37b15e97e8 "
           "(#29594); 0.18.0 Eagle3DeepseekV2/V3: 5573894737 (#36361); 0.20.0 "
           "Eagle3MiniMaxM2: f6983f01de (#37512); 0.22.0 PEagle: 6ccb10d794 (#41826); 0.24.0 "
           "Qwen3: 89bd2c14d3 (#43132)", tracked="info"),
    Marker("architecture_errors (EAGLEConfig prefix)",
           (P("vllm/transformers_utils/configs/eagle.py", "extract",
              r"arch\.(startswith|endswith)\(\"Eagle3\"\)"),),
           "EAGLEConfig prefixes 'Eagle3' unless the name starts (0.9.0) or starts or ends "
           "(0.10.1) with it; 0.8.5 builds Eagle3LlamaForCausalLM whatever architectures says",
           "0.9.0: e136000595 (#17323); 0.10.1: 3d7363e61c (#22333)",
           {"none": "not read", "startswith": "Eagle3 prefix",
            "endswith,startswith": "pre/suffix ok"}),
    Marker("dialects (speculators)", (P(V_SPEC, "exists"),),
           "transformers_utils/configs/speculators/ reads speculators-format configs",
           "0.10.1: dfbc1f8880 (#21345)", {"n": "flat", "y": "flat+spec"}),
    Marker("refuses_local_verifier",
           (P("vllm/transformers_utils/config.py", "has", r"must name a remote model repository",
              "maybe_override_with_speculators"),),
           "maybe_override_with_speculators raises for a speculators verifier that is a local "
           "path (or not a valid repo id); before, the verifier's name_or_path is served as is",
           "0.33.0: no fork history (read in the 0.32.0 and 0.33.0 wheels)",
           {"n": "served", "y": "refused"}),
    Marker("speculators_layer_types / has_q_k_norm",
           (P(V_SPEC, "has", r"Unsupported model_type", "*update_eagle3"),
            P(MODELS + "qwen3_eagle3.py", "exists")),
           "update_eagle3 accepts only llama / qwen3 layer configs, and qwen3_eagle3.py "
           "(q_norm/k_norm, top-level ids) exists; before, any layer type became the Llama draft",
           "0.24.0: 89bd2c14d3 (#43132)",
           {"-/n": "n/a", "n/n": "any -> llama", "y/y": "llama, qwen3"}),
    Marker("max_layers (multi-layer)",
           (P(V_DRAFT, "has", r"num_hidden_layers", "LlamaModel.__init__"),),
           "LlamaModel builds num_hidden_layers decoder layers (before: exactly one)",
           "0.11.1: cf4cd6c24f (#26164)", {"n": "1", "y": "any"}),
    Marker("unknown_keys / unknown_error",
           (P(V_DRAFT, "has", r"params_dict\[name\]", "LlamaModel.load_weights"),),
           "model.* names go through LlamaModel's own loop (KeyError) or, with "
           "hf_to_vllm_mapper, through AutoWeightsLoader (ValueError 'no module or parameter')",
           "0.25.0: 1ab9522935 (#47058)", {"y": "KeyError", "n": "ValueError"}),
    Marker("ignored_unknown_suffixes",
           (P(MODELS + "utils.py", "has", r"ROTARY_EMBEDS_UNUSED_WEIGHTS|\"rotary_emb\.inv_freq\""),
            P(MODELS + "utils.py", "has", r"ignore_unexpected_suffixes\.append\(\s*\"\.bias\"")),
           "AutoWeightsLoader skips rotary buffers (0.9.0) and unexpected .bias (0.25.0)",
           "0.25.0 .bias: 5051698e41 (#44589)",
           {"n/n": "none", "y/n": "rotary", "y/y": "rotary, .bias"}),
    Marker("missing_params",
           (P(V_DRAFT, "has", r"^\s*return \S", "Eagle3LlamaForCausalLM.load_weights"),
            P(V_PROPOSER, "has", r"get_model\(")),
           "load_weights returns the loaded set and the draft is built by the default loader "
           "(get_model): its strict check raises for any parameter the checkpoint leaves unset",
           "0.9.0: c6b636f9fb (#18273); 0.9.1 no return: 1bc86a3da1 (#18909)",
           {"y/n": "silent", "y/y": "raise", "n/y": "silent"}),
    Marker("d2t reading (ignored in 0.9.0)",
           (P(V_DRAFT, "has", r"['\"]d2t['\"] not in loaded_weights"),),
           "`if 'd2t' not in loaded_weights: draft_id_to_target_id = None` is always true "
           "(names were renamed): d2t ignored, draft ids used as target ids",
           "0.9.0: 583507d130 (#18488); 0.9.1 fixed: 1bc86a3da1 (#18909)",
           {"n": "offsets", "y": "ignored"}),
    Marker("d2t_param_needs_pruned_vocab",
           (P(V_DRAFT, "has", r"self\.draft_id_to_target_id\s*=\s*None",
              "Eagle3LlamaForCausalLM.__init__"),),
           "draft_id_to_target_id exists only when draft_vocab_size != the target vocab",
           "0.30.0: no fork history (matches PR #53458)", {"n": "always", "y": "pruned only"}),
    Marker("fc_aux_count",
           (P(V_DRAFT, "has", r"num_aux_hidden_states", "LlamaModel.__init__"),),
           "fc input k * Ht with k from num_aux_hidden_states / eagle_config ids (before: 3)",
           "0.22.0: 1242196295 (#42764)", {"n": "fixed_3", "y": "num_aux..."}),
    Marker("flags.norm_before_residual", (P(V_DRAFT, "has", r"norm_before_residual"),),
           "the decoder layer reads norm_before_residual", "0.10.1: dfbc1f8880 (#21345)",
           {"n": "not read", "y": "read"}),
    Marker("has_input_norm / flags.norm_before_fc",
           (P(V_DRAFT, "has", r"norm_before_fc"),
            P(V_SPEC, "has", r"norm_before_fc", "*update_eagle3"),
            P(V_DRAFT, "has", r"eagle_config\.get\(\s*\"norm_before_fc\"")),
           "input_norm when norm_before_fc: read at the top level (0.18.0), copied from "
           "speculators configs (0.19.0), eagle_config first (0.22.0)",
           "0.18.0: 87985077a4 (#36545); 0.19.0: 5b8c30d62b (#38111); 0.22.0: 3f3e862681 (#42143)",
           {"n/-/n": "not read", "n/n/n": "not read", "y/n/n": "top, flat only",
            "y/y/n": "top", "y/y/y": "eagle_config, top"}),
    Marker("has_fc_norm / flags.fc_norm",
           (P(V_DRAFT, "has", r"fc_norm"), P(V_SPEC, "has", r"fc_norm", "*update_eagle3")),
           "fc_norm read at the top level (0.22.0), copied from speculators configs (0.25.0)",
           "0.22.0: 1242196295 (#42764); 0.25.0: dda3aca47f (#46488)",
           {"n/-": "not read", "n/n": "not read", "y/n": "top, flat only", "y/y": "top"}),
    Marker("flags.norm_output",
           (P(V_DRAFT, "has", r"norm_output"), P(V_SPEC, "has", r"norm_output", "*update_eagle3")),
           "norm_output read at the top level (0.22.0), copied from speculators configs (0.25.0)",
           "0.22.0: 1242196295 (#42764); 0.25.0: dda3aca47f (#46488)",
           {"n/-": "not read", "n/n": "not read", "y/n": "top, flat only", "y/y": "top"}),
    Marker("reads_use_aux_hidden_state",
           (P(V_DRAFT, "has", r"use_aux_hidden_state"),),
           "the draft reads eagle_config.use_aux_hidden_state (false: no fc, V1 runner does "
           "not capture)", "0.12.0: 5f9679a43b (#27688)", {"n": "no", "y": "yes"}),
    Marker("drop_when_off",
           (P(V_DRAFT, "extract",
              r"(?:skip_substrs\.append\(|orig_to_new_substr\[)\s*\"(fc\.|input_norm\.)\"",
              "Eagle3LlamaForCausalLM.load_weights"),),
           "load_weights drops fc.* while use_aux_hidden_state is off and input_norm.* while "
           "norm_before_fc is off", "0.12.0: 5f9679a43b (#27688); 0.18.0: 87985077a4 (#36545)"),
    Marker("qkv_bias", (P(V_DRAFT, "has", r"attention_bias", "LlamaDecoderLayer.__init__"),),
           "q/k/v projections get a bias when the draft config sets attention_bias",
           "0.16.0: af3162d3aa (#32887)", {"n": "False", "y": "attention_bias"}),
    Marker("aux_id_sources",
           (P("vllm/v1/worker/gpu_model_runner.py", "has",
              r"hf_config(\.|\s*,\s*\")eagle_aux_hidden_state_layer_ids",
              "*_get_eagle3_aux_layers_from_config"),
            P("vllm/v1/worker/gpu_model_runner.py", "has",
              r"eagle_config(\.get\(|\[)\s*\"eagle_aux_hidden_state_layer_ids\"",
              "*_get_eagle3_aux_layers_from_config")),
           "where the V1 runner reads the draft's aux ids: top level, then eagle_config",
           "0.11.1: 05f6846ede (#25961); 0.22.0: 1242196295 (#42764)",
           {"-/-": "none", "y/n": "top", "y/y": "top, eagle_config"}),
    Marker("aux ids in model runner V2 (engines/bugs.py)",
           (P(V2_SPEC, "has", r"\.get\(\s*\"layer_ids\"\s*\)",
              "*get_eagle3_aux_layers_from_config"),
            P(V2_SPEC, "has", r"eagle_config[^\n]*\"eagle_aux_hidden_state_layer_ids\"",
              "*get_eagle3_aux_layers_from_config")),
           "the V2 runner reads top-level ids, later eagle_config['layer_ids'], never "
           "eagle_config['eagle_aux_hidden_state_layer_ids'] (a bug, not a profile field)",
           "0.17.0: a4047d4ea (#35029); 0.27.0: a7d00ec051 (#48524)",
           {"-/-": "n/a", "n/n": "top", "y/n": "top, ec[layer_ids]"}, tracked="info"),
    Marker("use_aux_hidden_state in model runner V2 (engines/bugs.py)",
           (P(V2_SPEC, "exists", "", "*get_eagle3_aux_layers_from_config"),
            P(V2_SPEC, "has", r"get\(\s*\"use_aux_hidden_state\"")),
           "the V2 runner (EAGLE-3 from 0.17.0) honours use_aux_hidden_state: false (a bug "
           "before, not a profile field)", "0.33.0: no fork history (requires_aux_hidden_states)",
           {"n/-": "n/a", "n/n": "n/a", "y/n": "ignored", "y/y": "read"}, tracked="info"),
    Marker("embed_policy",
           (P(V_PROPOSER, "has", r"\"model\.embed_tokens\.weight\" not in loaded_weights"),
            P(V_PROPOSER, "has", r"embed_tokens\.weight\.shape|eagle_shape = "),
            P(V_PROPOSER, "has", r"has_own_embed_tokens")),
           "the proposer shares the target's embed_tokens: unless loaded (0.8.5), always "
           "(0.9.0), when the shapes match (0.9.1), unless the checkpoint has its own (0.11.1; "
           "plus a width guard from 0.25.0)",
           "0.9.0: 418d2f8bfb (#17326); 0.9.1: 3465b87ef8 (#19033); 0.11.1: e439c784fa (#28549)",
           {"y/n/n": "own_if_present", "n/n/n": "target_always", "n/y/n": "if shapes match",
            "n/n/y": "own_if_present", "n/y/y": "own_if_present"}),
    Marker("lm_head_policy",
           (P(V_PROPOSER, "has", r"lm_head\.weight\.shape"),
            P(V_PROPOSER, "has", r"has_own_lm_head")),
           "the proposer shares the target's lm_head: never for eagle3, when the shapes match "
           "(0.11.0), when the checkpoint has none (0.11.1)",
           "0.11.0: d5944d5146 (#25406); 0.11.1: e439c784fa (#28549)",
           {"n/n": "own_always", "y/n": "if shapes match", "n/y": "if absent"}),
    Marker("capture_switch (method from the path)",
           (P(V_CONFIG, "has", r"\"eagle3\" in self\.draft_model_config\.model"),),
           "a draft path containing 'eagle3' selects method eagle3 (before: 'eagle3-' "
           "selected EAGLE-1)", "0.10.2: 53b42f4102 (#24392)",
           {"n": "name the method", "y": "path eagle3"}),
    Marker("target_allowlist",
           (P(V_CONFIG, "extract",
              r"(?:eagle3_target_supported|aux_hidden_states_supported)\s*=\s*\[([^\]]*)\]"
              r"|\"(llama)\" not in self\.target_model_config"),),
           "target model_type substrings EAGLE-3 is allowed for (none: the SupportsEagle3 "
           "interface decides)",
           "0.10.1: 9f9c38c392 (#21835); 0.11.0: #24243, #25246; 0.16.0: #33035, #33111; "
           "0.17.0: #33726; 0.18.0: #36361; 0.19.1: #37512, #39450; 0.21.0: #41880; 0.22.0 "
           "removed: ab1ad0d7a9 (#42536)", tracked="steps"),
    Marker("final_boundary_families (llama/deepseek/gpt_oss)",
           (P(MODELS + "llama.py", "has", V_CAPTURE, "LlamaModel.forward"),
            P(MODELS + "deepseek_v2.py", "has", V_CAPTURE, "DeepseekV2Model.forward"),
            P(MODELS + "gpt_oss.py", "has", V_CAPTURE, "GptOssModel.forward")),
           "the target's capture loop can yield index L (the last layer's output)",
           "0.18.0: 8b346309a5 (#36063); 0.25.0 deepseek: 0ca39c4f1f (#46973)",
           {"n/n/-": "none", "n/n/n": "none", "y/n/y": "llama, gpt_oss", "y/y/y": "all"}),
    Marker("mla (MLA draft class)", (P(MODELS + "deepseek_eagle3.py", "exists"),),
           "deepseek_eagle3.py holds the MLA draft Eagle3DeepseekV2ForCausalLM",
           "0.18.0: 5573894737 (#36361)", {"n": "none", "y": "deepseek_eagle3"}),
    Marker("mla.fc_aux_count / mla.flags.fc_norm",
           (P(MODELS + "deepseek_eagle3.py", "has", r"num_aux_hidden_states"),
            P(MODELS + "deepseek_eagle3.py", "has", r"fc_norm")),
           "the MLA draft's fc width from num_aux_hidden_states and its fc_norm",
           "0.22.0: 1242196295 (#42764)",
           {"-/-": "(no MLA)", "n/n": "fixed_3", "y/y": "num_aux, fc_norm"}),
    Marker("mla.unknown_keys",
           (P(MODELS + "deepseek_eagle3.py", "has", r"if name not in params_dict"),),
           "the MLA draft's own loop skips unknown names (before the WeightsMapper loader)",
           "0.25.0: 1ab9522935 (#47058)",
           {"-": "(no MLA)", "y": "drop_silent", "n": "raise"}),
)
# Not markable (see SGLANG_UNMARKABLE).
VLLM_UNMARKABLE: tuple[Unmarkable, ...] = (
    Unmarkable("model runner V2 default (engines/bugs.py)",
               "vllm/config/vllm.py use_v2_model_runner: a decision over architecture lists, "
               "MoE / hybrid / quantisation conditions that changes shape every release "
               "(0.22.0, 0.23.0, 0.24.0, 0.25.0, 0.29.0); no profile field holds it"),
    Unmarkable("aux_rules / aux_sorted / graphs_use_default_ids / fc_skip_when_width_is_hidden",
               "never changed in the survey (as-is ids through EagleModelMixin or each target's "
               "own loop); spread over every target class, read by hand"),
)

MARKERS = {"sglang": SGLANG_MARKERS, "vllm": VLLM_MARKERS}
UNMARKABLE = {"sglang": SGLANG_UNMARKABLE, "vllm": VLLM_UNMARKABLE}


# ---------------------------------------------------------------- git access

class ToolError(Exception):
    """Reported as one line on stderr, exit status 2."""


class GitRepo:
    """A bare (or normal) git directory read through ls-tree and one `cat-file --batch`."""

    def __init__(self, git_dir: str):
        self.git_dir = str(git_dir)
        self._batch: subprocess.Popen | None = None
        self._blobs: dict[str, str] = {}
        if self._git("rev-parse", "--git-dir", check=False) is None:
            raise ToolError(f"not a git directory: {git_dir}")

    def _git(self, *args: str, check: bool = True) -> str | None:
        proc = subprocess.run(["git", "--git-dir", self.git_dir, *args], capture_output=True,
                              text=True, errors="replace")
        if proc.returncode != 0:
            if check:
                raise ToolError(f"git {' '.join(args[:2])} failed: {proc.stderr.strip()[:200]}")
            return None
        return proc.stdout

    def release_tags(self) -> list[str]:
        tags = [t for t in self._git("tag", "--list").split() if RELEASE_TAG.match(t)]
        return sorted(tags, key=release_key)

    def tree(self, tag: str, prefixes: list[str]) -> dict[str, str]:
        """path -> blob id of every file under `prefixes` at `tag`."""
        out = self._git("ls-tree", "-r", "--full-tree", tag, "--", *prefixes)
        files = {}
        for line in out.splitlines():
            meta, _, path = line.partition("\t")
            parts = meta.split()
            if len(parts) == 3 and parts[1] == "blob":
                files[path] = parts[2]
        return files

    def blob(self, sha: str) -> str:
        if sha not in self._blobs:
            self._blobs[sha] = self._read_blob(sha)
        return self._blobs[sha]

    def _read_blob(self, sha: str) -> str:
        if self._batch is None:
            self._batch = subprocess.Popen(
                ["git", "--git-dir", self.git_dir, "cat-file", "--batch"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._batch.stdin.write(f"{sha}\n".encode())
        self._batch.stdin.flush()
        header = self._batch.stdout.readline().decode().split()
        if len(header) != 3:
            raise ToolError(f"git cat-file: no object {sha}")
        data = self._batch.stdout.read(int(header[2]) + 1)[:-1]
        return data.decode("utf-8", "replace")

    def close(self) -> None:
        if self._batch is not None:
            self._batch.stdin.close()
            self._batch.wait()
            self._batch = None


# ---------------------------------------------------------------- function extraction

def functions_in(source: str) -> dict[str, str]:
    """Qualified name ("Class.method", "func") -> source of every def in `source`."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. invalid escape sequences in old sources
            tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return _functions_by_indent(source)
    lines = source.splitlines()
    found: dict[str, str] = {}
    _collect_defs(tree.body, "", lines, found)
    return found


def _collect_defs(body: list[ast.stmt], prefix: str, lines: list[str],
                  found: dict[str, str]) -> None:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = prefix + node.name
            if not isinstance(node, ast.ClassDef):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                text = "\n".join(lines[first - 1:node.end_lineno])
                found[name] = found[name] + "\n" + text if name in found else text
            _collect_defs(node.body, name + ".", lines, found)
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            for part in ("body", "orelse", "finalbody"):  # defs under if / try / with
                _collect_defs(getattr(node, part, []), prefix, lines, found)
            for handler in getattr(node, "handlers", []):
                _collect_defs(handler.body, prefix, lines, found)


_DEF = re.compile(r"^(\s*)(?:async\s+)?(def|class)\s+(\w+)")


def _functions_by_indent(source: str) -> dict[str, str]:
    """Fallback for source ast cannot parse (newer syntax): blocks by indentation."""
    lines = source.splitlines()
    found: dict[str, str] = {}
    stack: list[tuple[int, str]] = []  # (indent, name) of the enclosing defs and classes
    for i, line in enumerate(lines):
        m = _DEF.match(line)
        if not m:
            continue
        indent = len(m.group(1))
        stack = [(d, n) for d, n in stack if d < indent]
        name = ".".join([n for _, n in stack] + [m.group(3)])
        stack.append((indent, m.group(3)))
        if m.group(2) == "def":
            text = "\n".join(lines[i:_block_end(lines, i, indent)])
            found[name] = found[name] + "\n" + text if name in found else text
    return found


def _block_end(lines: list[str], start: int, indent: int) -> int:
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or
                                len(lines[end]) - len(lines[end].lstrip()) > indent):
        end += 1
    return end


# ---------------------------------------------------------------- evaluation

class Evaluator:
    """Marker values at tags; probe results are cached per blob, so unchanged files cost once."""

    def __init__(self, repo: GitRepo, markers: tuple[Marker, ...]):
        self.repo = repo
        self.markers = markers
        self.paths = sorted({p.path for m in markers for p in m.probes})
        self.prefixes = sorted({_fixed_dir(path) for path in self.paths})
        self._functions: dict[str, dict[str, str]] = {}
        self._results: dict[tuple[Probe, str], object] = {}

    def values(self, tag: str) -> dict[str, str]:
        """field -> the marker's (labelled) value at `tag`."""
        files = sorted(self.repo.tree(tag, self.prefixes).items())
        shas = {pattern: [sha for path, sha in files if _path_matches(path, pattern)]
                for pattern in self.paths}
        return {m.field: label(m, "/".join(self.probe(p, shas[p.path]) for p in m.probes))
                for m in self.markers}

    def probe(self, probe: Probe, shas: list[str]) -> str:
        """The probe's value over the blobs of the files its path matches at one tag."""
        if probe.test == "exists" and not probe.function:
            return "y" if shas else "n"
        results = [self._on_blob(probe, sha) for sha in shas]
        found = [r for r in results if r is not None]  # None: the function is not defined there
        if probe.test == "exists":
            return "y" if found else "n"
        if not found:
            return "-"
        if probe.test == "has":
            return "y" if any(found) else "n"
        matches = sorted(set().union(*found))
        return ",".join(matches) if matches else "none"

    def _on_blob(self, probe: Probe, sha: str):
        key = (probe, sha)
        if key not in self._results:
            self._results[key] = self._evaluate(probe, sha)
        return self._results[key]

    def _evaluate(self, probe: Probe, sha: str):
        text = self._scope(probe, sha)
        if text is None:
            return None
        if probe.test == "exists":
            return True
        if probe.test == "has":
            return re.search(probe.pattern, text, re.M) is not None
        return {_match_text(m) for m in re.finditer(probe.pattern, text, re.M)}

    def _scope(self, probe: Probe, sha: str) -> str | None:
        text = self.repo.blob(sha)
        if not probe.function:
            return text
        if sha not in self._functions:
            self._functions[sha] = functions_in(text)
        bodies = [src for name, src in self._functions[sha].items()
                  if fnmatch.fnmatchcase(name, probe.function)]
        return "\n".join(bodies) if bodies else None


def _match_text(m: re.Match) -> str:
    """The match (its groups joined, when it has groups) without spaces, quotes and edge commas:
    '[\n  "llama",\n  "qwen",\n]' and '["llama", "qwen"]' read the same."""
    text = m.group(0) if not m.re.groups else "".join(g for g in m.groups() if g is not None)
    return re.sub(r"[\s\"']+", "", text).strip(",")


def _path_matches(path: str, pattern: str) -> bool:
    return path == pattern if not any(c in pattern for c in "*?[") else \
        fnmatch.fnmatchcase(path, pattern)


def _fixed_dir(pattern: str) -> str:
    """The directory part of a path or glob that has no wildcard: what ls-tree is limited to."""
    head = re.split(r"[*?\[]", pattern, maxsplit=1)[0]
    if head == pattern:
        return pattern
    return head.rsplit("/", 1)[0] + "/" if "/" in head else "."


def label(marker: Marker, raw: str) -> str:
    """The short text of a raw value; a raw value the labels do not know is shown with '?'."""
    if not marker.labels:
        return raw
    return marker.labels.get(raw, raw + "?")


# ---------------------------------------------------------------- releases and change points

def select_releases(tags: list[str], since: str | None, until: str | None = None,
                    baseline: str | None = None) -> list[str]:
    """Tags from `since` to `until` (inclusive), plus `baseline` when it is older than `since`."""
    def wanted(tag: str) -> bool:
        key = release_key(tag)
        if baseline and since and key == release_key(baseline) < release_key(since):
            return True
        return ((since is None or key >= release_key(since)) and
                (until is None or key <= release_key(until)))
    return [t for t in tags if wanted(t)]


def evaluate(repo: GitRepo, markers: tuple[Marker, ...], tags: list[str]) -> list[tuple[str, dict]]:
    """[(tag, {field: labelled value})] in release order."""
    evaluator = Evaluator(repo, markers)
    return [(tag, evaluator.values(tag)) for tag in tags]


@dataclass(frozen=True)
class Change:
    field: str
    release: str      # first release with the new value (no leading v)
    previous: str     # the release before it
    old: str
    new: str


def change_points(rows: list[tuple[str, dict]]) -> list[Change]:
    """Every release whose value of a field differs from the previous evaluated release."""
    changes = []
    for (prev_tag, prev), (tag, cur) in zip(rows, rows[1:]):
        for name, value in cur.items():
            if prev.get(name) != value:
                changes.append(Change(name, _bare(tag), _bare(prev_tag), prev.get(name, ""), value))
    return changes


def _bare(tag: str) -> str:
    return tag[1:] if tag.startswith("v") else tag


# ---------------------------------------------------------------- the profile check

@dataclass
class CheckResult:
    missed: list[tuple[Change, tuple[str, str]]] = field(default_factory=list)
    unprofiled: list[tuple[str, list[Change]]] = field(default_factory=list)
    untracked: list[tuple[Change, tuple[str, str]]] = field(default_factory=list)
    quiet_starts: list[str] = field(default_factory=list)  # range starts no marker flips at

    @property
    def failed(self) -> bool:
        return bool(self.missed or self.unprofiled)


def range_containing(release: str, ranges: list[tuple[str, str]]) -> tuple[str, str] | None:
    key = release_key(release)
    return next((r for r in ranges if release_key(r[0]) <= key <= release_key(r[1])), None)


def check_profiles(rows: list[tuple[str, dict]], markers: tuple[Marker, ...],
                   ranges: list[tuple[str, str]], steps: tuple[str, ...] = ()) -> CheckResult:
    """Change points against profile ranges [(first, last)] and the allowlist `steps`."""
    ranges = sorted(ranges, key=lambda r: release_key(r[0]))
    tracked = {m.field: m.tracked for m in markers}
    changes = change_points(rows)
    result = CheckResult()
    for change in changes:
        where = range_containing(change.release, ranges)
        if where is None or _allowed(change, tracked[change.field], ranges, steps):
            continue
        bucket = result.untracked if tracked[change.field] == "info" else result.missed
        bucket.append((change, where))
    if ranges:
        result.unprofiled = _unprofiled(rows, markers, ranges[-1][1])
    result.quiet_starts = _quiet_starts(rows, changes, tracked, ranges)
    return result


def _allowed(change: Change, tracked: str, ranges: list[tuple[str, str]],
             steps: tuple[str, ...]) -> bool:
    """A change at the first release of a range (or of an allowlist step, for "steps")."""
    key = release_key(change.release)
    firsts = [first for first, _ in ranges] + (list(steps) if tracked == "steps" else [])
    return any(release_key(first) == key for first in firsts)


def _quiet_starts(rows: list[tuple[str, dict]], changes: list[Change], tracked: dict[str, str],
                  ranges: list[tuple[str, str]]) -> list[str]:
    """Range starts (evaluated, with a release before them) where no tracked marker flips."""
    flipped = {release_key(c.release) for c in changes if tracked[c.field] != "info"}
    evaluated = {release_key(tag) for tag, _ in rows[1:]}
    return [first for first, _ in ranges
            if release_key(first) in evaluated and release_key(first) not in flipped]


def _unprofiled(rows: list[tuple[str, dict]], markers: tuple[Marker, ...],
                last: str) -> list[tuple[str, list[Change]]]:
    """Releases after `last`, each with the fields that differ from the value at `last`."""
    base = next((values for tag, values in rows if release_key(tag) == release_key(last)), None)
    out = []
    for tag, values in rows:
        if release_key(tag) <= release_key(last):
            continue
        diff = [] if base is None else [
            Change(m.field, _bare(tag), last, base[m.field], values[m.field])
            for m in markers if base[m.field] != values[m.field]]
        out.append((_bare(tag), diff))
    return out


def profile_ranges(engine: str) -> tuple[list[tuple[str, str]], tuple[str, ...]]:
    """The engine's profile ranges and the first releases of its target_allowlist steps."""
    from eagle3_nb.engines import PROFILES
    mine = [p for p in PROFILES if p.name == engine]
    steps = sorted({first for p in mine for first, _ in p.target_allowlist}, key=release_key)
    return sorted((p.covers for p in mine), key=lambda r: release_key(r[0])), tuple(steps)


# ---------------------------------------------------------------- output

def render(engine: str, rows: list[tuple[str, dict]], markers: tuple[Marker, ...],
           unmarkable: tuple[Unmarkable, ...], check: CheckResult | None = None) -> str:
    out = [f"## {engine}: {len(markers)} markers at {len(rows)} releases"
           + (f" ({rows[0][0]} .. {rows[-1][0]})" if rows else "")]
    out += _legend(markers, unmarkable)
    out += _change_table(rows)
    out += _release_table(rows, markers)
    if check is not None:
        out += _check_text(check, markers)
    return "\n".join(out) + "\n"


def _legend(markers: tuple[Marker, ...], unmarkable: tuple[Unmarkable, ...]) -> list[str]:
    out = ["", "### Markers", "", "| # | field | probes | why | upstream change |",
           "|---|---|---|---|---|"]
    for i, m in enumerate(markers, 1):
        note = "" if m.tracked == "range" else (
            " (steps: target_allowlist)" if m.tracked == "steps" else " (info: no profile field)")
        out.append(f"| {i} | {m.field}{note} | {_probe_text(m)} | {_cell(m.why)} | "
                   f"{_cell(m.cite)} |")
    for u in unmarkable:
        out.append(f"| - | {u.field} | not markable: read by hand | {_cell(u.why)} | |")
    return out


def _probe_text(marker: Marker) -> str:
    parts = []
    for p in marker.probes:
        where = p.path + (f" {p.function}()" if p.function else "")
        what = {"exists": "exists", "has": f"has /{p.pattern}/",
                "extract": f"extract /{p.pattern}/"}[p.test]
        parts.append(f"{where}: {what}")
    text = "; ".join(parts)
    if marker.labels:
        text += "; labels " + ", ".join(f"{k}={v}" for k, v in marker.labels.items())
    return _cell(text)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _change_table(rows: list[tuple[str, dict]]) -> list[str]:
    out = ["", "### Change points", "", "| release | field | change |", "|---|---|---|"]
    out += [f"| {c.release} | {c.field} | {_cell(describe(c.old, c.new))} |"
            for c in change_points(rows)]
    if len(out) == 5:
        out.append("| (none) | | |")
    return out


def describe(old: str, new: str) -> str:
    """'a -> b'; for comma lists only what was added and removed: '+x -y'."""
    if "," not in old + new or any(c in old + new for c in " /"):
        return f"{old} -> {new}"
    before, after = set(old.split(",")), set(new.split(","))
    if before & after:
        return " ".join([f"+{v}" for v in sorted(after - before)] +
                        [f"-{v}" for v in sorted(before - after)])
    return f"{old} -> {new}"


def _release_table(rows: list[tuple[str, dict]], markers: tuple[Marker, ...]) -> list[str]:
    """Rows: releases; columns: marker numbers, TABLE_WIDTH at a time; a changed cell is bold;
    a value longer than MAX_CELL is shown as vK and spelled out below."""
    refs: dict[tuple[int, str], str] = {}
    out = ["", "### Values (columns: the marker numbers above; **bold**: changed at that release)"]
    numbered = list(enumerate(markers, 1))
    for start in range(0, len(numbered), TABLE_WIDTH):
        out += _value_block(rows, numbered[start:start + TABLE_WIDTH], refs)
    if refs:
        out += ["", "Long values:", ""]
        out += [f"- {number} {ref}: {_cell(value)}" for (number, value), ref
                in sorted(refs.items(), key=lambda item: (item[0][0], int(item[1][1:])))]
    return out


def _value_block(rows: list[tuple[str, dict]], numbered: list[tuple[int, Marker]],
                 refs: dict[tuple[int, str], str]) -> list[str]:
    out = ["", "| release | " + " | ".join(str(n) for n, _ in numbered) + " |",
           "|---" * (len(numbered) + 1) + "|"]
    prev: dict | None = None
    for tag, values in rows:
        cells = []
        for number, m in numbered:
            text = _short(number, values[m.field], refs)
            changed = prev is not None and prev[m.field] != values[m.field]
            cells.append(f"**{text}**" if changed else text)
        out.append(f"| {_bare(tag)} | " + " | ".join(cells) + " |")
        prev = values
    return out


def _short(number: int, text: str, refs: dict[tuple[int, str], str]) -> str:
    if len(text) <= MAX_CELL:
        return _cell(text)
    if (number, text) not in refs:
        refs[(number, text)] = f"v{sum(1 for n, _ in refs if n == number) + 1}"
    return refs[(number, text)]


def _check_text(check: CheckResult, markers: tuple[Marker, ...]) -> list[str]:
    by_field = {m.field: m for m in markers}
    out = ["", "### Profile check", ""]
    for c, (first, last) in check.missed:
        m = by_field[c.field]
        out.append(f"- MISSED: {c.field} changes at {c.release} inside the profile range "
                   f"{first} .. {last}: {describe(c.old, c.new)} ({m.cite})")
    for release, diff in check.unprofiled:
        fields = "; ".join(f"{c.field} ({describe(c.old, c.new)})" for c in diff)
        out.append(f"- NOT PROFILED: {release} is newer than the last profiled release; "
                   + (f"changed since {diff[0].previous}: {fields}" if diff else
                      "no marked field changed: extend the last range after reading the "
                      "unmarkable fields"))
    for c, (first, last) in check.untracked:
        out.append(f"- info (no profile field): {c.field} changes at {c.release} inside "
                   f"{first} .. {last}: {describe(c.old, c.new)}")
    if check.quiet_starts:
        out.append("- info: profile ranges starting where no marker flips (a field without a "
                   "marker, or an unmarkable one): " + ", ".join(check.quiet_starts))
    verdict = ("FAILED: split the range a MISSED change falls in; extend the newest range or "
               "add one for a NOT PROFILED release" if check.failed else
               "ok: every change point starts a profile range")
    out.append(f"- result: {verdict}")
    return out


# ---------------------------------------------------------------- command line

def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("git_dir", help="bare git directory with the engine's release tags")
    ap.add_argument("engine", choices=sorted(MARKERS))
    ap.add_argument("--since", help="first release to evaluate (default: the first profiled one)")
    ap.add_argument("--until", help="last release to evaluate (default: the newest tag)")
    ap.add_argument("--field", action="append", default=[],
                    help="evaluate only this field (repeatable; a glob)")
    ap.add_argument("--check-profiles", action="store_true",
                    help="check every change point against eagle3_nb.engines.PROFILES")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    markers = tuple(m for m in MARKERS[args.engine]
                    if not args.field or any(fnmatch.fnmatchcase(m.field, f) for f in args.field))
    ranges, steps = profile_ranges(args.engine)
    try:
        rows = _evaluate_args(args, markers, ranges)
    except (ToolError, EngineSpecError) as exc:
        print(f"release_fields: {exc}", file=sys.stderr)
        return 2
    check = check_profiles(rows, markers, ranges, steps) if args.check_profiles else None
    print(render(args.engine, rows, markers, UNMARKABLE[args.engine], check), end="")
    return 1 if check is not None and check.failed else 0


def _evaluate_args(args: argparse.Namespace, markers: tuple[Marker, ...],
                   ranges: list[tuple[str, str]]) -> list[tuple[str, dict]]:
    """Rows for the releases the arguments name; with --check-profiles the last profiled
    release is evaluated too, as the baseline of any newer release."""
    repo = GitRepo(args.git_dir)
    try:
        since = args.since or (ranges[0][0] if ranges else None)
        baseline = ranges[-1][1] if args.check_profiles and ranges else None
        tags = select_releases(repo.release_tags(), since, args.until, baseline)
        if not tags:
            raise ToolError(f"no release tags from {since} in {args.git_dir}")
        return evaluate(repo, markers, tags)
    finally:
        repo.close()


if __name__ == "__main__":
    sys.exit(main())
