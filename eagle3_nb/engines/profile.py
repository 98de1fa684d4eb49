"""EngineProfile: what one engine version range does with an EAGLE-3 draft, as data.

A profile never contains logic; `planner.plan_load` applies any profile. Adding an engine
version is adding a profile. Every field cites the fact it encodes in `cites`.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field, replace

from eagle3_nb.errors import EngineSpecError

# aux id -> hidden_states index rules per target family (see docs/domain.md "Aux layer ids")
PLUS_ONE = "plus_one"                      # always id + 1
PLUS_ONE_IF_FIRST_IS_1 = "plus_one_if_first_is_1"
AS_IS = "as_is"                            # hidden_states[id]
AS_IS_IF_MAX_IS_L = "as_is_if_max_is_L"    # gpt-oss in SGLang
NO_CAPTURE = "unsupported"                 # target class cannot capture: startup fails
AUX_RULES = (PLUS_ONE, PLUS_ONE_IF_FIRST_IS_1, AS_IS, AS_IS_IF_MAX_IS_L, NO_CAPTURE)

# Every policy string a profile may hold, per field: the planner branches on these, so a typo
# would silently pick another branch. EngineProfile refuses anything else.
POLICIES: dict[str, tuple[str, ...]] = {
    "key_resolution": ("bare_or_model", "model_prefix_except_lm_head"),
    "unknown_keys": ("drop_silent", "drop_logged", "raise"),
    "fc_aux_count": ("fixed_3", "num_aux_then_eagle_config_then_3",
                     "eagle_config_then_top_level_ids_then_3"),
    "draft_attention": ("gqa", "mla"),
    "extra_layer_attn_norm": ("input_layernorm", "hidden_norm"),
    "embed_policy": ("target_unless_hidden_differs", "own_if_present", "target_always",
                     "target_if_shapes_match"),
    "lm_head_policy": ("target_if_draft_vocab_null", "target_if_absent_and_full_vocab",
                       "own_always", "target_if_shapes_match", "target_if_absent"),
    "missing_params": ("silent", "raise"),
    "d2t_reading": ("offsets", "absolute"),
}
DIALECTS = ("flat", "speculators")
# checkpoint name part -> (engine parameter part, shard) for weights the engine fuses on load
GQA_STACKED = ((".qkv_proj", ".q_proj", "q"), (".qkv_proj", ".k_proj", "k"),
               (".qkv_proj", ".v_proj", "v"), (".gate_up_proj", ".gate_proj", 0),
               (".gate_up_proj", ".up_proj", 1))
AUX_ID_SOURCES = ("eagle_config", "top_level")


@dataclass(frozen=True)
class FlagRule:
    """How an engine treats one norm flag of the draft config."""
    read: bool                               # False: the engine never reads it
    default: dict[str, bool]                 # dialect -> value used when the key is absent
    sources: tuple[str, ...] = ("top_level",)  # where it is read, first match wins
    ignored_in: frozenset[str] = frozenset()   # dialects whose config path drops the flag


@dataclass(frozen=True)
class ConfigRule:
    """A draft config field that makes the engine's config reader or draft class raise at
    startup: when it is absent, null, of a JSON type the reader refuses, another value than
    those the engine accepts, a RoPE section without the keys its rope_type needs, or a value
    whose len() is not the one the engine sizes a buffer for ("length")."""
    dialect: str                             # "flat" | "speculators"
    path: str                                # dotted key in config.json (a digit: a list index)
    fails_when: frozenset[str]               # of CONFIG_BREACHES
    error: str                               # the engine's exception; {value}: the value given
    types: tuple[str, ...] = ()              # JSON types accepted: "int", "float", "str", "bool"
    allowed: tuple = ()                      # the only values accepted ("other_value")
    cite: str = ""
    length: int | None = None                # "length": the len() a truthy value must have
    # the rule holds only where each (path, values) does: the value at path is one of values
    # (UNSET: the key is absent); the engine takes another path otherwise
    when: tuple[tuple[str, tuple], ...] = ()
    # "unguessed": the model types transformers' AutoConfig looks for in the draft's path when
    # the key is absent (up to 5.1); absent with none of them in the path raises
    path_words: tuple[str, ...] = ()


CONFIG_BREACHES = ("absent", "null", "wrong_type", "other_value", "rope_keys", "length",
                   "unguessed")
UNSET = "<absent>"   # in ConfigRule.when: the key is not in the config


@dataclass(frozen=True)
class EngineProfile:
    name: str
    version: str                      # the release this answer is for (a profile: its newest release)
    covers: tuple[str, str]           # first and last published release it covers, inclusive
    evidence: str
    dialects: frozenset[str]          # config dialects the engine can start from
    dialect_error: str                # startup error for any other dialect
    architectures: dict[str, str]     # flat configs: accepted architectures[0] -> note
    architecture_errors: dict[str, str]  # known wrong architectures -> what happens
    # speculators configs: accepted layer model types ("*": any, all built as the Llama draft)
    speculators_layer_types: frozenset[str]
    # startup error for any other layer model type ({layer_model_type}); "": the generic text
    speculators_layer_type_error: str
    decoder_param: str                # format with i: engine parameter prefix of decoder layer i
    max_layers: int | None            # None: any number
    too_many_layers_error: str
    renames: tuple[tuple[str, str], ...]  # substring replacements applied to every key first
    key_resolution: str               # "bare_or_model" | "model_prefix_except_lm_head"
    unknown_keys: str                 # "drop_silent" | "raise"
    unknown_error: str                # message template when unknown keys raise
    ignored_unknown_suffixes: tuple[str, ...]
    d2t_param: str
    d2t_param_needs_pruned_vocab: bool  # the d2t parameter exists only when Vd != Vt
    fc_aux_count: str                 # "fixed_3" | "num_aux_then_eagle_config_then_3"
    fc_aux_top_level_layer_types: frozenset[str]  # layer types whose fc also reads top-level ids
    has_input_norm: bool              # norm_before_fc / input_norm.weight supported
    has_fc_norm: bool
    has_q_k_norm: bool                # Qwen3-style q_norm/k_norm parameters exist
    extra_layer_attn_norm: str        # pre-attention norm of layers >= 1
    extra_layers_have_hidden_norm: bool
    flags: dict[str, FlagRule]
    aux_id_sources: tuple[str, ...]   # where the target runner reads aux ids, first match wins
    reads_use_aux_hidden_state: bool
    aux_rules: dict[str, str]         # target family -> id rule
    aux_sorted: dict[str, bool]       # target family -> captures sorted + de-duplicated
    last_layer_capturable: bool       # can an index == L be captured
    graphs_use_default_ids: bool      # CUDA-graph replay captures the defaults, not the config ids
    fc_skip_when_width_is_hidden: bool  # the draft skips fc when the input is H wide
    embed_policy: str                 # "target_unless_hidden_differs" | "own_if_present"
    lm_head_policy: str               # "target_if_draft_vocab_null" | "target_if_absent_and_full_vocab"
    # dialects whose config path hands a null target_hidden_size to a draft class that builds
    # fc with it (None * A: TypeError at startup)
    target_hidden_null_breaks_fc: frozenset[str]
    missing_draft_vocab_error: str | None
    context_error: str | None         # startup error when the target context exceeds the draft's
    # target_id = draft_id + d2t[draft_id] in every engine read so far; without d2t, draft id i
    # is used as target id i (sglang hot_token_id None; vLLM zero-initialised offsets)
    d2t_reading: str = "offsets"
    # serving advice: the launch setting that makes the engine capture aux states and run the
    # draft's own head with d2t, and the override that lets a shorter-context draft start
    capture_switch: str = ""
    context_override: str = ""
    # a release no profile covers is answered with the nearest profile's data: based_on names
    # that profile (its key), and the release must never read as verified (engines.resolve_engine)
    based_on: str = ""
    eagle3_since: str = ""            # set when the release predates EAGLE-3 in this engine
    # (module, switch): keys of that module dropped silently while the switch is false
    drop_when_off: tuple[tuple[str, str], ...] = ()
    # parameters the checkpoint leaves unwritten: "silent", or "raise" (a strict loader check)
    missing_params: str = "silent"
    qkv_bias: bool = True             # attention_bias drafts get q/k/v bias parameters
    o_proj_bias: bool = False         # attention_bias drafts get an o_proj bias parameter
    mlp_bias_params: bool = False     # mlp_bias drafts get gate_up / down bias parameters
    # target gate by model_type before the target class is asked: (first release, substrings)
    # steps, the newest step not after the release applies; () = no such gate
    target_allowlist: tuple[tuple[str, tuple[str, ...]], ...] = ()
    target_allowlist_error: str = ""
    # families whose final boundary (index L) is capturable although last_layer_capturable is
    # false (the capture table's per-class answer wins where it has one)
    final_boundary_families: frozenset[str] = frozenset()
    # the launch flag that gives the draft worker its own attention backend; "" when the engine
    # has none to read here. Without it, the draft worker inherits the target's backend.
    draft_attention_flag: str = ""
    # draft config model_type -> the startup error it meets (a config rewritten to another class)
    draft_model_type_errors: dict[str, str] = field(default_factory=dict)
    # the draft class's attention and the weights its loader fuses
    draft_attention: str = "gqa"
    stacked: tuple[tuple[str, str, object], ...] = GQA_STACKED
    # (config field, startup error): fields the draft class needs non-null
    required_fields: tuple[tuple[str, str], ...] = ()
    # the decoder prefix when the draft has one layer ("" = decoder_param with i=0): an engine
    # that builds a bare module for one layer and a list for more
    single_layer_param: str = ""
    # (depth, pattern, replacement): regular expressions applied to each key before `renames`,
    # depth "single" (one decoder layer), "multi" (more) or "any"
    regex_renames: tuple[tuple[str, str, str], ...] = ()
    # decoder layers >= 1 build input_layernorm (False: only the first layer has one)
    extra_layers_have_input_norm: bool = True
    # (module, switch): the engine builds no such module while the switch is off and uses the
    # target's instead, so the checkpoint's copy is never read (switch "target_hidden_differs")
    unused_unless: tuple[tuple[str, str], ...] = ()
    # the fewest target layers the engine's default aux ids need when none are given (0: any);
    # a target of 2..N-1 layers with no ids meets default_ids_error at startup
    default_ids_min_layers: int = 0
    default_ids_error: str = ""
    # where the engine takes aux ids from outside the draft (its launch config), as a line to
    # write ({ids}), and the offset from hidden_states indices to the ids that line holds
    aux_ids_launch_line: str = ""
    aux_ids_launch_offset: int = 0
    # said with every answer (info ENGINE_READ_ONLY): how the profile's facts were established
    # when no run of the engine's own loader checked them ("": they were checked)
    caveat: str = ""
    # a speculators checkpoint served as the model names its verifier (the target): True when
    # the engine refuses a verifier that is a local path, so the target must be given explicitly
    refuses_local_verifier: bool = False
    # config fields the engine's config reader or draft class refuses at startup
    config_rules: tuple[ConfigRule, ...] = ()
    # the draft class ties lm_head to embed_tokens when tie_word_embeddings is true (False: it
    # builds its own lm_head whatever the config says)
    ties_lm_head: bool = True
    # speculators configs: the top-level keys the engine's converter passes on to the draft's
    # config (None: each as the kit reads it); a key not passed is never seen by the draft class
    speculators_keys_passed: frozenset[str] | None = None
    # the engine's MLA draft class (Eagle3DeepseekV2ForCausalLM) in the same releases, or None
    mla: "EngineProfile | None" = None
    cites: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        bad = [f"{name}={getattr(self, name)!r} (one of {allowed})"
               for name, allowed in POLICIES.items() if getattr(self, name) not in allowed]
        bad += [f"aux_rules[{fam!r}]={rule!r} (one of {AUX_RULES})"
                for fam, rule in self.aux_rules.items() if rule not in AUX_RULES]
        bad += [f"dialects {sorted(self.dialects - set(DIALECTS))} (one of {DIALECTS})"
                for _ in [0] if not self.dialects <= set(DIALECTS)]
        bad += [f"aux_id_sources {list(self.aux_id_sources)} (each one of {AUX_ID_SOURCES})"
                for _ in [0] if not set(self.aux_id_sources) <= set(AUX_ID_SOURCES)]
        bad += [f"aux_sorted family {fam!r} has no aux rule"
                for fam in self.aux_sorted if fam not in self.aux_rules]
        bad += [f"flags[{n!r}] default for unknown dialect(s) {sorted(set(r.default) - set(DIALECTS))}"
                for n, r in self.flags.items() if not set(r.default) <= set(DIALECTS)]
        bad += [f"config rule {r.path}: fails_when {sorted(r.fails_when - set(CONFIG_BREACHES))} "
                f"(each one of {CONFIG_BREACHES})" for r in self.config_rules
                if not r.fails_when <= set(CONFIG_BREACHES)]
        if release_key(self.covers[0]) > release_key(self.covers[1]):
            bad.append(f"covers {self.covers} is empty")
        if bad:
            raise ValueError(f"profile {self.name}=={self.version}: " + "; ".join(bad))

    @property
    def key(self) -> str:
        return f"{self.name}=={self.version}"

    def covers_release(self, version: str) -> bool:
        return release_key(self.covers[0]) <= release_key(version) <= release_key(self.covers[1])

    def range_text(self) -> str:
        first, last = self.covers
        return f"{self.name} {first}" if first == last else f"{self.name} {first} .. {last}"


# a whole release number: X.Y[.Z[.W]], then post/dev/rc/a/b suffixes or a +local part, nothing else
_VERSION = re.compile(r"^\s*v?(\d{1,9}(?:\.\d{1,9}){0,3})"
                      r"((?:[.-]?(?:post|dev|rc|a|b)\d{0,9})*)(?:\+[0-9A-Za-z.]{1,64})?\s*$")
_SUFFIX = re.compile(r"(post|dev|rc|a|b)(\d*)")
_PRE_RANK = {"dev": 4, "a": 3, "b": 2, "rc": 1}


def _match(text: str) -> re.Match:
    m = _VERSION.match(str(text)[:200])
    if not m:
        raise EngineSpecError(f"cannot read version {str(text)[:40]!r}", None,
                              "use NAME==X.Y[.Z], e.g. sglang==0.5.9 or vllm==0.11.0")
    return m


def parse_version(text: str) -> tuple[int, int, int]:
    """'0.33' -> (0, 33, 0); '0.5.9.post1' -> (0, 5, 9): post releases share their release."""
    parts = [int(p) for p in _match(text).group(1).split(".")][:3]
    return tuple(parts + [0] * (3 - len(parts)))  # type: ignore[return-value]


@functools.lru_cache(maxsize=4096)  # pure, and asked for ~100k times per matrix
def release_key(text: str) -> tuple[int, ...]:
    """An order over releases as the engines publish them: '0.9.0.1' after '0.9.0', '0.4.4.post2'
    after '0.4.4.post1', and a pre-release ('0.5.10rc0', '0.5.10.dev3') before its release,
    pre-releases in order among themselves (dev, a, b, rc; '1.3.0rc2' before '1.3.0rc10').
    '0.33' and '0.33.0' are the same release; a +local part is ignored."""
    m = _match(text)
    parts = [int(p) for p in m.group(1).split(".")]
    parts += [0] * (4 - len(parts))
    post, pre = 0, 0
    for kind, number in _SUFFIX.findall(m.group(2)):
        if kind == "post":
            post = int(number or 0)
        elif not pre:  # dev < a < b < rc, each by its number (1.3.0rc2 before 1.3.0rc10)
            pre = -_PRE_RANK[kind] * 10**6 + min(int(number or 0), 10**6 - 1)
    return (*parts, pre if pre else post)


def is_plain_release(text: str) -> bool:
    """No pre-release or local part: a build that could be a published release."""
    m = _match(text)
    return not re.search(r"dev|rc|a|b", m.group(2)) and "+" not in str(text)


def releases_where(profiles, has) -> tuple[str, str]:
    """The first and last release of the PROFILES (oldest first) for which HAS holds; the
    callers ask for fields that hold over contiguous ranges."""
    mine = [p for p in profiles if has(p)]
    return mine[0].covers[0], mine[-1].covers[1]


def later_range(prev: EngineProfile, first: str, last: str, evidence: str,
                cites: dict[str, str], **changes) -> EngineProfile:
    """The profile of the range after `prev`, read in its own code (EVIDENCE): `prev` with the
    fields that changed, each cited (a change without a citation is refused)."""
    uncited = [f for f in changes if f not in cites]
    if uncited:
        raise ValueError(f"{prev.name} {first}..{last}: no citation for {uncited}")
    return replace(prev, version=last, covers=(first, last), cites={**prev.cites, **cites},
                   evidence=evidence, **changes)


def earlier_range(prev: EngineProfile, first: str, last: str, cites: dict[str, str],
                  **changes) -> EngineProfile:
    """The profile of the range before `prev`: `prev` with the fields that differ there, each
    with its citation (a change without one is refused, so every field change stays cited)."""
    uncited = [f for f in changes if f not in cites]
    if uncited:
        raise ValueError(f"{prev.name} {first}..{last}: no citation for {uncited}")
    return replace(prev, version=last, covers=(first, last), cites={**prev.cites, **cites},
                   evidence=f"release survey: fields compared at every tag {first}..{last}",
                   **changes)
