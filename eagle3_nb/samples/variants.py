"""The sample drafts, good and broken: one builder per variant, each registered with the failure it
embodies and what each engine release is recorded to do with it (VARIANTS). The expectations were
derived by hand from DOMAIN.md and reference/ (TensorRT-LLM's from the facts its profiles cite,
docs/engine-facts-trtllm.md), not from the engine planner, so that tests can cross-check the
two."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from eagle3_nb.engines.registry import engines
from eagle3_nb.samples.configs import flat_config, speculators_config
from eagle3_nb.samples.weights import (DEFAULT_AUX_IDS, DRAFT_VOCAB, H, MAX_POSITIONS, NUM_HEADS,
                                       SEED, TARGET_VOCAB, SeededInit, Weights, eagle_names,
                                       eagle_state, prefixed, speculators_state,
                                       synthetic_token_counts, vocab_mapping, with_vocab)
from eagle3_nb.samples.writers import owned, write_config, write_draft, write_sharded

# the releases each sample's expectations are recorded for, as the engine folders name them
ENGINES = tuple(f"{e.name}=={r}" for e in engines().values() for r in e.sample_releases)
VERDICTS = {
    "ok": "the engine loads the draft and computes what was trained (warnings and info allowed)",
    "silent_failure": "the engine loads the draft, but an error-severity problem (engine-specific "
                      "or global) makes its drafts wrong",
    "load_error": "the engine refuses to start or to load the draft (LOAD_ERROR)",
}

TRIPWIRE_CODE = '''"""Tripwire, not a config class: eagle3_nb must never execute checkpoint code.

Importing or running this file leaves a file named EXECUTED next to it; the sample tests look
for it (and for any file the generator did not write).
"""
from pathlib import Path

Path(__file__).with_name("EXECUTED").write_text("config.py was executed\\n")
'''


@dataclass(frozen=True)
class Expect:
    verdict: str            # a key of VERDICTS
    says: str               # what the engine does, one line (README)
    codes: tuple[str, ...]  # finding codes that must appear for this engine (subset semantics)


def expect(verdict: str, says: str, *codes: str) -> Expect:
    assert verdict in VERDICTS, verdict
    return Expect(verdict, says, codes)


def per_engine(sglang_0_5_9: Expect, vllm: Expect, sglang_0_5_16: Expect | None = None,
               sglang_0_5_23: Expect | None = None, *, trtllm_1_2: Expect,
               trtllm_1_4: Expect | None = None) -> dict[str, Expect]:
    """Later SGLang releases behave like the previous one unless given, and so does TensorRT-LLM
    1.4.0rc1 after 1.2.1 (engines/trtllm/profiles.py: what changed between the ranges)."""
    s16 = sglang_0_5_16 or sglang_0_5_9
    # by engine, in the order of its sample_releases; the registry names the engines and their
    # releases, and each registered engine must have one expectation per release (strict)
    given = dict(sglang=(sglang_0_5_9, s16, sglang_0_5_23 or s16), vllm=(vllm,),
                 trtllm=(trtllm_1_2, trtllm_1_4 or trtllm_1_2))
    return {f"{e.name}=={release}": expected for e in engines().values()
            for release, expected in zip(e.sample_releases, given[e.name], strict=True)}


@dataclass(frozen=True)
class Variant:
    name: str
    failure: str
    build: Callable[[Path, Weights], None]
    expect: dict[str, Expect]
    global_codes: tuple[str, ...]
    note: str

    def manifest_entry(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "failure": self.failure,
            "expect": {engine: {"verdict": e.verdict, "codes": list(e.codes)}
                       for engine, e in self.expect.items()},
            "expect_global_codes": list(self.global_codes),
        }
        if self.note:
            entry["note"] = self.note
        return entry


VARIANTS: dict[str, Variant] = {}


def variant(name: str, failure: str, expectations: dict[str, Expect],
            global_codes: tuple[str, ...] = (), note: str = ""):
    def register(build: Callable[[Path, Weights], None]):
        VARIANTS[name] = Variant(name, failure, build, expectations, global_codes, note)
        return build
    return register


DEFAULTS_OK = expect("ok", "loads; captures the default layers hidden_states[2, 4, 5], which a "
                     "flat draft without ids was trained on", "AUX_LAYERS_DEFAULTED")
SPECULATORS_REFUSED = expect("load_error", "startup fails: SGLang reads only flat configs "
                             "(convert first)", "LOAD_ERROR")
# TensorRT-LLM builds the draft config with transformers' AutoConfig and reads flat keys only
TRT_SPECULATORS_REFUSED = expect("load_error", "startup fails: TensorRT-LLM reads only flat "
                                 "configs (convert first)", "LOAD_ERROR")
# TensorRT-LLM before PR #11010 (1.2.x) has no layers.N -> midlayer rename
TRT_LAYERS_DROPPED = expect("silent_failure", "no layers.N -> midlayer rename before PR #11010: "
                            "every layers.N.* key becomes model.layers.N.* and is dropped "
                            "silently; the draft layers run uninitialised", "KEYS_DROPPED",
                            "PARAMS_UNLOADED", "AUX_LAYERS_DEFAULTED")


@variant("good", "none: a healthy SafeAILab/SpecForge flat draft (no aux ids, so defaults)",
         per_engine(DEFAULTS_OK, DEFAULTS_OK, trtllm_1_2=DEFAULTS_OK))
def build_good(d: Path, w: Weights) -> None:
    write_draft(d, flat_config(), eagle_state(w))


@variant("good-speculators", "none: a healthy speculators draft (ships config.py: never run it)",
         per_engine(SPECULATORS_REFUSED,
                    expect("ok", "loads layers.0.*, keeps its own embed_tokens, captures "
                           "hidden_states[2, 4, 5] from the top-level ids"),
                    trtllm_1_2=TRT_SPECULATORS_REFUSED),
         global_codes=("REMOTE_CODE",),
         note="config.py is a tripwire: executing it creates EXECUTED in this directory")
def build_good_speculators(d: Path, w: Weights) -> None:
    write_draft(d, speculators_config(DEFAULT_AUX_IDS), speculators_state(w))
    (d / "config.py").write_text(TRIPWIRE_CODE, encoding="utf-8")


@variant("layers0-flat", "flat config over speculators-named layers.0.* keys (first seed story)",
         per_engine(expect("silent_failure", "drops every layers.0.* key silently (it only knows "
                           "model.midlayer.*): the decoder layer runs uninitialised",
                           "KEYS_DROPPED", "PARAMS_UNLOADED", "AUX_LAYERS_DEFAULTED"),
                    expect("ok", "accepts layers.0.* (and midlayer.*); captures the defaults",
                           "AUX_LAYERS_DEFAULTED"),
                    sglang_0_5_16=expect("ok", "layers.0.* is its own parameter name; captures the "
                                         "defaults", "AUX_LAYERS_DEFAULTED"),
                    trtllm_1_2=TRT_LAYERS_DROPPED,
                    trtllm_1_4=expect("ok", "renames layers.0.* to midlayer.* (PR #11010) and "
                                      "loads; captures the defaults", "AUX_LAYERS_DEFAULTED")))
def build_layers0_flat(d: Path, w: Weights) -> None:
    write_draft(d, flat_config(), with_vocab(w, w.core))


@variant("prefix-draft-model", "every key carries a draft_model. wrapper prefix",
         per_engine(expect("silent_failure", "drops every draft_model.* key silently except "
                           "draft_model.d2t (matched by substring): fc, layer, norm, lm_head stay "
                           "uninitialised", "KEYS_DROPPED", "PARAMS_UNLOADED",
                           "AUX_LAYERS_DEFAULTED"),
                    expect("load_error", "raises: prefixes model. and finds no module or "
                           "parameter named model.draft_model...", "LOAD_ERROR"),
                    trtllm_1_2=expect("silent_failure", "prefixes model. to every key without "
                                      "lm_head: no module asks for model.draft_model.* or "
                                      "draft_model.lm_head.weight, so every key is dropped "
                                      "silently, d2t and lm_head included", "KEYS_DROPPED",
                                      "PARAMS_UNLOADED", "AUX_LAYERS_DEFAULTED")))
def build_prefix_draft_model(d: Path, w: Weights) -> None:
    write_draft(d, flat_config(), prefixed("draft_model.", eagle_state(w)))


@variant("prefix-model", "every key carries a model. prefix, lm_head included",
         per_engine(expect("silent_failure", "loads model.* keys (tries name, then 'model.'+name), "
                           "but lm_head lives outside model.: model.lm_head.weight is dropped and "
                           "lm_head stays uninitialised", "KEYS_DROPPED", "PARAMS_UNLOADED",
                           "AUX_LAYERS_DEFAULTED"),
                    expect("load_error", "raises: adds its own model. prefix (model.model.*) and "
                           "finds no parameter model.lm_head.weight", "LOAD_ERROR"),
                    trtllm_1_2=expect("silent_failure", "prefixes model. again (model.model.*) "
                                      "and keeps model.lm_head.weight as named: no module asks "
                                      "for either, so every key is dropped silently",
                                      "KEYS_DROPPED", "PARAMS_UNLOADED", "AUX_LAYERS_DEFAULTED")),
         note="SGLang's loader tries `name`, then `model.` + name; its lm_head parameter is the "
              "top-level `lm_head.weight`, so `model.lm_head.weight` matches neither "
              "(sglang-serving.md 1.3 loader code). Every other model.* key loads.")
def build_prefix_model(d: Path, w: Weights) -> None:
    write_draft(d, flat_config(), prefixed("model.", eagle_state(w)))


@variant("aux-ids-top-level-flat", "flat config with aux ids [1, 3, 6] only at the top level "
         "(meant as output-of-layer ids: hidden_states[2, 4, 7])",
         per_engine(expect("silent_failure", "ignores top-level ids (reads eagle_config only): "
                           "captures the defaults hidden_states[2, 4, 5], not [2, 4, 7]",
                           "AUX_LAYERS_DEFAULTED"),
                    expect("silent_failure", "reads the top-level ids as hidden_states[1, 3, 6], "
                           "one layer before each trained one", "AUX_LAYER_CONVENTION"),
                    trtllm_1_2=expect("silent_failure", "never reads the draft's ids: captures "
                                      "the defaults hidden_states[2, 4, 5] unless the launch "
                                      "config says eagle3_layers_to_capture: [1, 3, 6]",
                                      "AUX_LAYERS_DEFAULTED")),
         note="target has 8 layers: defaults [2, 4, 5]; ids starting at 1 in a flat config are "
              "output-of-layer ids, i.e. hidden_states[id + 1] = [2, 4, 7]")
def build_aux_ids_top_level_flat(d: Path, w: Weights) -> None:
    write_draft(d, flat_config(eagle_aux_hidden_state_layer_ids=[1, 3, 6]), eagle_state(w))


@variant("multilayer-flat", "flat config with 2 decoder layers in speculators style "
         "(layers.1.* is a plain Llama layer: no hidden_norm)",
         per_engine(expect("load_error", "ValueError: EAGLE3 currently only supports 1 layer",
                           "LOAD_ERROR"),
                    expect("ok", "loads layers.0 (2H inputs) and layers.1 (plain, H inputs); "
                           "captures the defaults", "AUX_LAYERS_DEFAULTED"),
                    sglang_0_5_16=expect("silent_failure", "loads both layers, but layer 1's "
                                         "pre-attention norm is hidden_norm, absent here: it runs "
                                         "untrained (all ones)", "PARAMS_UNLOADED",
                                         "AUX_LAYERS_DEFAULTED"),
                    trtllm_1_2=TRT_LAYERS_DROPPED,
                    trtllm_1_4=expect("silent_failure", "renames layers.N.* to midlayer.N.*; "
                                      "layer 1 builds no input_layernorm (its key is dropped) "
                                      "and runs hidden_norm, absent here, as its pre-attention "
                                      "norm: untrained", "KEYS_DROPPED", "PARAMS_UNLOADED",
                                      "AUX_LAYERS_DEFAULTED")))
def build_multilayer_flat(d: Path, w: Weights) -> None:
    tensors = with_vocab(w, {**w.core, **w.second_layer})
    write_draft(d, flat_config(num_hidden_layers=2), tensors)


@variant("aux4-speculators", "speculators draft with 4 aux ids [2, 4, 5, 7] and fc [H, 4H] "
         "(vllm #54526)",
         per_engine(SPECULATORS_REFUSED,
                    expect("load_error", "sizes fc for 3 aux states (the Llama draft ignores "
                           "top-level ids): fc.weight [64, 256] does not fit [64, 192]",
                           "LOAD_ERROR", "AUX_COUNT_MISMATCH"),
                    trtllm_1_2=TRT_SPECULATORS_REFUSED))
def build_aux4_speculators(d: Path, w: Weights) -> None:
    tensors = {**speculators_state(w), "fc.weight": w.fc_four_aux}
    write_draft(d, speculators_config([2, 4, 5, 7]), tensors)


NAN_HEAD = expect("silent_failure", "loads and uses the draft's own NaN lm_head: NaN logits",
                  "AUX_LAYERS_DEFAULTED")


@variant("nan-head", "lm_head all NaN (speculators' never-loaded head)",
         per_engine(NAN_HEAD, NAN_HEAD, trtllm_1_2=NAN_HEAD),
         global_codes=("NAN_WEIGHTS",))
def build_nan_head(d: Path, w: Weights) -> None:
    tensors = {**eagle_state(w), "lm_head.weight": torch.full_like(w.core["lm_head.weight"],
                                                                   float("nan"))}
    write_draft(d, flat_config(), tensors)


SHORT_STARTS = expect("ok", "starts; acceptance may fall on prompts past 512 tokens",
                      "AUX_LAYERS_DEFAULTED")


@variant("short-context", "draft max_position_embeddings 512 below the target's 4096",
         per_engine(expect("load_error", "ValueError at startup: target context 4096 exceeds the "
                           "draft's 512 (unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1)",
                           "CONTEXT_TOO_SHORT"),
                    SHORT_STARTS, trtllm_1_2=SHORT_STARTS),
         note="vLLM: no startup check is documented in reference/, and none was found in "
              "TensorRT-LLM's source, so only the SGLang engines list CONTEXT_TOO_SHORT; a "
              "warning for the others would be right too")
def build_short_context(d: Path, w: Weights) -> None:
    write_draft(d, flat_config(max_position_embeddings=512), eagle_state(w))


@variant("norm-before-residual-flat", "flat config trained with norm_before_residual: true",
         per_engine(expect("silent_failure", "never reads norm_before_residual: the residual is "
                           "the un-normed fc output, unlike training", "NORM_FLAG_IGNORED",
                           "AUX_LAYERS_DEFAULTED"),
                    expect("ok", "reads norm_before_residual on the native path and applies it",
                           "AUX_LAYERS_DEFAULTED"),
                    trtllm_1_2=expect("silent_failure", "never reads norm_before_residual: "
                                      "Eagle3DecoderLayer keeps the un-normed residual, unlike "
                                      "training", "NORM_FLAG_IGNORED", "AUX_LAYERS_DEFAULTED")))
def build_norm_before_residual_flat(d: Path, w: Weights) -> None:
    write_draft(d, flat_config(norm_before_residual=True), eagle_state(w))


@variant("speculators-no-norm-flag", "speculators config without norm_before_residual",
         per_engine(SPECULATORS_REFUSED,
                    expect("ok", "loads; the absent flag means True on vLLM's speculators path "
                           "(speculators' config class defaults to False)",
                           "NORM_FLAG_AMBIGUOUS"),
                    trtllm_1_2=TRT_SPECULATORS_REFUSED),
         note="ok because the training CLI default (True) matches vLLM's; the kit cannot know "
              "which default trained these weights, hence the warning")
def build_speculators_no_norm_flag(d: Path, w: Weights) -> None:
    config = speculators_config(DEFAULT_AUX_IDS)
    del config["norm_before_residual"]
    write_draft(d, config, speculators_state(w))


@variant("d2t-missing", "pruned draft vocab (256 of 512) without d2t and t2d",
         per_engine(expect("silent_failure", "no d2t, no hot_token_id: draft ids 0..255 are used "
                           "as target ids", "AUX_LAYERS_DEFAULTED"),
                    expect("silent_failure", "draft_id_to_target_id stays zeros: draft id i "
                           "becomes target id i", "AUX_LAYERS_DEFAULTED"),
                    trtllm_1_2=expect("silent_failure", "builds d2t (draft vocab 256 < 512) but "
                                      "the checkpoint has none: the offsets keep their initial "
                                      "values, so drafted ids map to wrong targets",
                                      "PARAMS_UNLOADED", "AUX_LAYERS_DEFAULTED")),
         global_codes=("D2T_MISSING",))
def build_d2t_missing(d: Path, w: Weights) -> None:
    tensors = {k: v for k, v in eagle_state(w).items() if k not in ("d2t", "t2d")}
    write_draft(d, flat_config(), tensors)


@variant("d2t-absolute", "d2t holds absolute target ids (= nonzero(t2d)) instead of offsets",
         per_engine(expect("silent_failure", "hot_token_id = d2t + arange: ids roughly doubled, "
                           "wrong tokens, ids past 511 crash at run time", "AUX_LAYERS_DEFAULTED"),
                    expect("silent_failure", "targets = arange + d2t: ids roughly doubled, wrong "
                           "or out of range", "AUX_LAYERS_DEFAULTED"),
                    trtllm_1_2=expect("silent_failure", "draft_tokens = d2t[draft_tokens] + "
                                      "draft_tokens: ids roughly doubled, wrong or out of range",
                                      "AUX_LAYERS_DEFAULTED")),
         global_codes=("D2T_ABSOLUTE",))
def build_d2t_absolute(d: Path, w: Weights) -> None:
    tensors = {**eagle_state(w), "d2t": torch.nonzero(w.t2d).flatten()}
    write_draft(d, flat_config(), tensors)


@variant("wrong-arch", "architectures [\"LlamaForCausalLM\"] (the SafeAILab training template)",
         per_engine(expect("load_error", "loads the plain target class LlamaForCausalLM, which "
                           "is no EAGLE-3 draft (no hot_token_id, no fc): startup fails",
                           "LOAD_ERROR"),
                    expect("ok", "prefixes the architecture to Eagle3LlamaForCausalLM and loads; "
                           "captures the defaults", "AUX_LAYERS_DEFAULTED"),
                    trtllm_1_2=expect("ok", "one-model mode (the default) ignores architectures "
                                      "and builds Eagle3ForCausalLM; captures the defaults",
                                      "AUX_LAYERS_DEFAULTED")),
         note="SGLang: sglang-serving.md 1.5 says the plain class is loaded (PR #33966 open, PR "
              "#36593: architecture-specific AttributeErrors); the exact error is inferred")
def build_wrong_arch(d: Path, w: Weights) -> None:
    write_draft(d, flat_config(architectures=["LlamaForCausalLM"]), eagle_state(w))


@variant("pickle-bin", "good weights as pytorch_model.bin (torch.save of a plain tensor dict)",
         per_engine(DEFAULTS_OK, DEFAULTS_OK, trtllm_1_2=DEFAULTS_OK),
         note="the kit reads it only with torch.load(weights_only=True)")
def build_pickle_bin(d: Path, w: Weights) -> None:
    write_config(d, flat_config())
    # torch.save names its zip records after the file stem, so the name is part of determinism
    torch.save(owned(eagle_state(w)), d / "pytorch_model.bin")


@variant("sharded", "good weights over two safetensors shards with an index",
         per_engine(DEFAULTS_OK, DEFAULTS_OK, trtllm_1_2=DEFAULTS_OK))
def build_sharded(d: Path, w: Weights) -> None:
    tensors = eagle_state(w)
    layer = sorted(k for k in tensors if k.startswith("midlayer."))
    rest = sorted(k for k in tensors if not k.startswith("midlayer."))
    write_config(d, flat_config())
    write_sharded(d, tensors, [layer, rest])


@variant("d2t-leading-zeros", "none: a correct offset table that starts with a run of zeros (the "
         "first seed's 'bug' that was not one); a static sample, its head was not trained on it",
         per_engine(DEFAULTS_OK, DEFAULTS_OK, trtllm_1_2=DEFAULTS_OK))
def build_d2t_leading_zeros(d: Path, w: Weights) -> None:
    d2t, t2d = vocab_mapping(synthetic_token_counts(TARGET_VOCAB), DRAFT_VOCAB)
    write_draft(d, flat_config(), {**eagle_names(w.core), "d2t": d2t, "t2d": t2d})


@variant("trained-other-layers", "trained on hidden_states[2, 4, 5] but the speculators config "
         "declares [5, 6, 7]; every engine captures what is declared, so only a run exposes it",
         per_engine(SPECULATORS_REFUSED,
                    expect("ok", "loads and captures hidden_states[5, 6, 7] as declared"),
                    trtllm_1_2=TRT_SPECULATORS_REFUSED),
         global_codes=("REMOTE_CODE",),
         note="the checkpoint cannot show that training used other layers than declared: "
              "notebook 03's first-step accuracy under the declared wiring does")
def build_trained_other_layers(d: Path, w: Weights) -> None:
    write_draft(d, speculators_config([5, 6, 7]), speculators_state(w))


FRESH_RUNS = expect("silent_failure", "loads the layer and runs it: random attention and MLP, "
                    "so almost no draft token is accepted", "AUX_LAYERS_DEFAULTED")


@variant("fresh-layer", "the decoder layer as a conversion that could not match its keys "
         "saves it: freshly initialised (linear weights normal(0, 0.02), norms exactly 1.0)",
         per_engine(FRESH_RUNS, FRESH_RUNS, trtllm_1_2=FRESH_RUNS),
         global_codes=("NAN_WEIGHTS",))
def build_fresh_layer(d: Path, w: Weights) -> None:
    init = SeededInit(SEED + 2)  # its own draws: the other samples keep their bytes
    fresh = {k: (torch.ones_like(v) if v.dim() == 1 else init.linear(*v.shape))
             for k, v in w.core.items() if k.startswith("layers.0.")}
    write_draft(d, flat_config(), eagle_names(with_vocab(w, {**w.core, **fresh})))


RANDOM_RUNS = expect("silent_failure", "loads the random attention and MLP: every draft token "
                     "is rejected", "AUX_LAYERS_DEFAULTED")


@variant("random-init-linears", "the decoder layer's linear weights at their random "
         "initialisation under the trained norms: a conversion lost the key remap and loaded "
         "with strict=False (speculators#1114)",
         per_engine(RANDOM_RUNS, RANDOM_RUNS, trtllm_1_2=RANDOM_RUNS),
         global_codes=("NAN_WEIGHTS",),
         note="norms keep their trained values, so the fresh-layer rule (norms exactly 1.0) does "
              "not see it; the rows of a random weight all have the same norm, a trained "
              "weight's do not")
def build_random_init_linears(d: Path, w: Weights) -> None:
    init = SeededInit(SEED + 4)  # its own draws: the other samples keep their bytes
    drawn = {k: init.linear(*v.shape) for k, v in w.core.items()
             if k.startswith("layers.0.") and v.dim() == 2}
    write_draft(d, flat_config(), eagle_names(with_vocab(w, {**w.core, **drawn})))


@variant("d2t-first-n", "d2t all zeros and t2d the first 256 ids: the draft vocab is target ids "
         "0..255 (valid, but not the most frequent tokens a trainer keeps)",
         per_engine(DEFAULTS_OK, DEFAULTS_OK, trtllm_1_2=DEFAULTS_OK),
         global_codes=("D2T_FIRST_N",))
def build_d2t_first_n(d: Path, w: Weights) -> None:
    t2d = torch.zeros(TARGET_VOCAB, dtype=torch.bool)
    t2d[:DRAFT_VOCAB] = True
    tensors = {**eagle_names(w.core), "d2t": torch.zeros(DRAFT_VOCAB, dtype=torch.int64),
               "t2d": t2d}
    write_draft(d, flat_config(), tensors)


OFFSET_AS_TOKEN = expect("silent_failure", "computes target id i + d2t[i] = the offset, not "
                         "the token: almost every draft token maps to a wrong target",
                         "AUX_LAYERS_DEFAULTED")


@variant("d2t-arange-subtracted", "correct offsets with arange subtracted once more (the first "
         "seed story's mistaken repair of a table it took for absolute ids); t2d is correct",
         per_engine(OFFSET_AS_TOKEN, OFFSET_AS_TOKEN, trtllm_1_2=OFFSET_AS_TOKEN),
         global_codes=("D2T_ARANGE_SUBTRACTED",))
def build_d2t_arange_subtracted(d: Path, w: Weights) -> None:
    d2t = w.d2t - torch.arange(DRAFT_VOCAB, dtype=torch.int64)
    write_draft(d, flat_config(), {**eagle_names(w.core), "d2t": d2t, "t2d": w.t2d})


@variant("random-embed", "a speculators draft whose exporter saved random embed_tokens instead "
         "of the target's (vLLM serves the draft's own copy)",
         per_engine(SPECULATORS_REFUSED,
                    expect("silent_failure", "loads the draft's own random embed_tokens: every "
                           "input token is embedded wrong", "EMBED_DIFFERS"),
                    trtllm_1_2=TRT_SPECULATORS_REFUSED),
         global_codes=("REMOTE_CODE",),
         note="found by comparing rows with the bundled target's embed_tokens (inspect with the "
              "target directory, statistics on)")
def build_random_embed(d: Path, w: Weights) -> None:
    init = SeededInit(SEED + 3)
    tensors = {**speculators_state(w), "embed_tokens.weight": init.linear(*w.embed_tokens.shape)}
    write_draft(d, speculators_config(DEFAULT_AUX_IDS), tensors)
    (d / "config.py").write_text(TRIPWIRE_CODE, encoding="utf-8")


# Multi-latent attention sizes of the MLA draft (Kimi-K2.5-style), scaled to the tiny target
MLA_SIZES = {"q_lora_rank": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8,
             "v_head_dim": 16}


def mla_state(w: Weights) -> dict[str, torch.Tensor]:
    """The good draft with its attention swapped for DeepSeek-V2 MLA (own seed: the other
    samples keep their bytes): layers.0.self_attn.{q_a_proj, q_a_layernorm, q_b_proj,
    kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj} over [embeds, hidden], drawn to
    look trained."""
    init, m = SeededInit(SEED + 1), MLA_SIZES
    qk = m["qk_nope_head_dim"] + m["qk_rope_head_dim"]
    attn = {
        "q_a_proj.weight": init.structured(m["q_lora_rank"], 2 * H),
        "q_a_layernorm.weight": init.norm(m["q_lora_rank"]),
        "q_b_proj.weight": init.structured(NUM_HEADS * qk, m["q_lora_rank"]),
        "kv_a_proj_with_mqa.weight": init.structured(m["kv_lora_rank"] + m["qk_rope_head_dim"],
                                                     2 * H),
        "kv_a_layernorm.weight": init.norm(m["kv_lora_rank"]),
        "kv_b_proj.weight": init.structured(NUM_HEADS * (m["qk_nope_head_dim"]
                                                         + m["v_head_dim"]), m["kv_lora_rank"]),
        "o_proj.weight": init.structured(H, NUM_HEADS * m["v_head_dim"]),
    }
    core = {k: v for k, v in w.core.items() if ".self_attn." not in k}
    core.update({f"layers.0.self_attn.{k}": v for k, v in attn.items()})
    return with_vocab(w, core)


@variant("mla-draft", "none: a healthy MLA draft (Eagle3DeepseekV2ForCausalLM, the Kimi-K2.5/K2.6 "
         "EAGLE-3 drafts' class), layers.0.* names",
         per_engine(expect("load_error", "no MLA draft class before 0.5.12: the architecture is "
                           "not registered", "LOAD_ERROR"),
                    expect("ok", "deepseek_eagle3.py loads it (fused_qkv_a_proj from q_a_proj and "
                           "kv_a_proj_with_mqa); captures the defaults", "AUX_LAYERS_DEFAULTED"),
                    sglang_0_5_16=DEFAULTS_OK, trtllm_1_2=TRT_LAYERS_DROPPED,
                    trtllm_1_4=expect("ok", "builds the MLA draft from kv_lora_rank "
                                      "(architectures is not read), renames layers.0.* to "
                                      "midlayer.* and fuses q_a_proj into kv_a_proj_with_mqa; "
                                      "captures the defaults", "AUX_LAYERS_DEFAULTED")),
         note="SGLang serves it from 0.5.12 (kimi_k25_eagle3.py, PR #24826), vLLM from 0.18.0 "
              "(deepseek_eagle3.py, PR #36361), TensorRT-LLM builds Eagle3MLAttention whenever "
              "the config has kv_lora_rank (modeling_speculative.py); the kit checks its keys and "
              "shapes but does not simulate MLA attention")
def build_mla_draft(d: Path, w: Weights) -> None:
    # DeepSeek-style YaRN as the Kimi drafts carry it (factor 1: no stretch of the tiny context)
    yarn = {"type": "yarn", "factor": 1.0, "original_max_position_embeddings": MAX_POSITIONS,
            "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}
    config = flat_config(architectures=["Eagle3DeepseekV2ForCausalLM"], model_type="deepseek_v2",
                         rope_scaling=yarn, **MLA_SIZES)
    write_draft(d, config, mla_state(w))
