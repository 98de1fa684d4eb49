"""Engine behaviour the generic checks and the converter quote in words, beside the engine code
or public measurement each text comes from. They are engine facts, so they live here and not in
the modules that print them; per-release facts are the engine folders' profiles."""

from __future__ import annotations

# quoted by checks/ and wirings
CHECKS: dict[str, str] = {
    "off_by_one_cost": (
        "How much a shifted layer costs depends on how alike the target's layers are: SGLang PR "
        "#25454 measured ~0.10 accept-length loss from an off-by-one on Kimi-K2.5, vLLM PR #43671"
        " saw MiniMax-M2's position-0 acceptance fall from ~45% to ~10%, so a mild loss here says"
        " nothing about another target"),
    "own_embed": (
        "the draft ships its own, not compared with the target's weights (vLLM serves the draft's"
        " own copy)"),
    "partial_rotary": (
        "the draft rotates another share of each head than the target; both engines apply the "
        "draft's own value (sglang llama.py LlamaAttention.__init__, vllm get_rope), so it is "
        "right only if the draft was trained with it"),
    "mrope_interleaved": (
        "the draft assigns its frequencies to the t/h/w sections in another order than the target"
        " (both engines read mrope_interleaved from the draft's own rope settings: sglang "
        "get_rope, vllm get_rope); the positions differ on prompts with images or video"),
    "mrope": (
        "an engine gives the draft M-RoPE positions only when the draft's own config has "
        "mrope_section (sglang llama_eagle3.py LlamaModel.__init__ is_mrope_enabled "
        "[0.5.7-0.5.23]; vllm llm_base_proposer.py _set_positions passes the first row of the "
        "target's M-RoPE positions [0.33.0]); text-only prompts are unaffected, prompts with "
        "images or video give the draft other positions than it was trained on unless its trainer"
        " did the same"),
    "flat_form": (
        "re-save the draft with speculators, or write the flat SGLang form"),
    "single_layer": (
        "the target's final-norm state alone (SGLang with aux capture off): fc skipped"),
}

# quoted by convert/: what each engine does with the layouts and config dialects it writes
CONVERSION: dict[str, str] = {
    "eagle_layout": (
        "--to eagle: SafeAILab/SpecForge/SGLang layout (midlayer.* keys, flat LlamaConfig)"),
    "speculators_layout": (
        "--to speculators: speculators/vLLM layout (layers.N.* keys, nested speculators config)"),
    "format_choice": (
        "use 'eagle' (SGLang/SpecForge) or 'speculators' (vLLM)"),
    "convert_target": (
        "pass --to eagle|speculators, or --engine sglang==X / vllm==X to convert for that engine"),
    "unknown_key": (
        "(SGLang drops unknown keys silently, vLLM refuses them)"),
    "num_aux_not_int": (
        "the releases that build fc from it raise (SGLang 0.5.12+, vLLM 0.22+: "
        "config_rules.NUM_AUX_READ), the others never read it"),
    "one_draft_layer": (
        "SGLang <= 0.5.9 supports exactly one draft layer (ValueError at load)"),
    "model_type_needed": (
        "SGLang's AutoConfig needs a model_type; none in transformer_layer_config, Llama assumed"),
    "flat_layer_type": (
        "{model_type!r}: SGLang serves a flat draft as {arch}; check that it supports this layer "
        "type"),
    "flat_arch": (
        "SGLang dispatches a flat EAGLE-3 draft on this class"),
    "nbr_missing": (
        "vLLM's speculators path reads a missing key as True, so the draft was served that way; "
        "written explicitly"),
    "nbr_true": (
        "norm_before_residual is true: no SGLang release reads it, SGLang always uses the "
        "un-normed residual, so this draft runs differently there (lower acceptance, no error)"),
    "nested_nbf": (
        "SGLang 0.5.23 and vLLM read the nested value first"),
    "speculators_arch": (
        "what speculators' save_pretrained writes (vLLM ignores it for this format)"),
    "speculators_type": (
        "marks the speculators format (vLLM and speculators detect it)"),
    "speculators_ids": (
        "speculators ids are hidden_states[k] (vLLM reads them so)"),
    "flat_nbr": (
        "flat (SafeAILab/SpecForge) drafts are trained with the residual taken before hidden_norm"
        " (False); explicit because vLLM's speculators path reads a missing key as True"),
    "no_verifier": (
        "no verifier in the flat source: speculators_config has no verifier block, so pass the "
        "target to vLLM explicitly (--model and --speculative-config)"),
    "auto_map": (
        "remote code: the kit never writes auto_map (vLLM does not need it)"),
    "top_level_ids": (
        "aux layer ids only at the top level of a flat config: SGLang reads only "
        "eagle_config.eagle_aux_hidden_state_layer_ids and captures its defaults (left unchanged:"
        " the source is already flat)"),
    "hidden_norm": (
        "have no hidden_norm: SGLang >= 0.5.16 uses hidden_norm as their pre-attention norm and "
        "would run it untrained (all ones), silently"),
    "flat_ids_reading": (
        "SGLang with a Llama/Qwen target adds +1 and captures the source's layers; a "
        "DeepSeek/Kimi target adds +1 only when the first id is 1"),
}
