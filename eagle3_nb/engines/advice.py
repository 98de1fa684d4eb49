"""Serving advice from the engine profiles: next steps that name the engine's own facts (where it
reads aux ids and how it numbers them, its capture switch, its context override), and the engine
flags a person checks by hand, filled in from an inspection's JSON form. Every flag row names the
reference note or upstream source it comes from."""

from __future__ import annotations

import json
from typing import Any

from eagle3_nb.engines import resolve_engine
from eagle3_nb.engines.profile import AS_IS, PLUS_ONE, EngineProfile
from eagle3_nb.errors import EngineSpecError
from eagle3_nb.findings import ENGINE_FACTS_UNKNOWN
from eagle3_nb.findings import next_step as generic_next_step

# The upstream releases the flag rows cite by file and function (read in the wheels that
# make engine-env puts under .cache/engines/); older releases: the profiles (sglang.py, vllm.py).
SGLANG_SRC = "sgl-project/sglang v0.5.23 python/sglang/srt/"
VLLM_SRC = "vllm-project/vllm v0.33.0 vllm/"

AUX_ID_PLACES = {"eagle_config": "config.json's eagle_config.eagle_aux_hidden_state_layer_ids",
                 "top_level": "config.json's top-level eagle_aux_hidden_state_layer_ids"}
AUX_RULE_TEXT = {
    PLUS_ONE: "it captures hidden_states[id + 1] on a Llama-family target: write each trained "
              "hidden_states index minus 1",
    AS_IS: "it captures hidden_states[id]: write the trained hidden_states indices as they are",
}


def next_step(code: str | None, engines: list[str | None] | None = None,
              checkpoint: str | None = None) -> str:
    """findings.next_step with the serving facts of the engine it names (the last of several)."""
    named = [e for e in engines or [] if e]
    facts = engine_facts(named[-1]) if named else None
    return generic_next_step(code, engines, checkpoint, facts)


def engine_facts(engine: str) -> dict[str, str] | None:
    """What a next step needs to say about one engine release, from its profile; None when the
    name resolves to no profile (the generic text then stands)."""
    try:
        p: EngineProfile = resolve_engine(engine)
    except EngineSpecError:
        return None
    if p.eagle3_since:  # no EAGLE-3 in that release: no facts to give
        return None
    where = (", then ".join(AUX_ID_PLACES[s] for s in p.aux_id_sources) or
             "no config at all (this release captures the defaults [2, L//2, L-3]; upgrade to "
             "choose the layers)")
    rule = p.aux_rules.get("llama")
    return {"aux_ids_where": where,
            "aux_ids_convention": AUX_RULE_TEXT.get(rule, f"its Llama-family rule is {rule}"),
            "capture_switch": p.capture_switch or ENGINE_FACTS_UNKNOWN["capture_switch"],
            "context_override": (f" ({p.context_override} lets it start)"
                                 if p.context_override else "")}


def engine_flags(data: dict[str, Any]) -> list[dict[str, str]]:
    """The serving flags to check by hand, filled in from an inspection (its JSON form): one row
    per flag with engine, flag, why and the reference note it comes from."""
    engines = data.get("engines", [])
    rows: list[dict[str, str]] = []
    if any(e["engine"] == "sglang" for e in engines):
        rows += _sglang_flags(data, [e for e in engines if e["engine"] == "sglang"])
    if any(e["engine"] == "vllm" for e in engines):
        rows += _vllm_flags(data, [e for e in engines if e["engine"] == "vllm"])
    return rows


def _row(engine: str, flag: str, why: str, source: str) -> dict[str, str]:
    return {"engine": engine, "flag": flag, "why": why, "source": source}


def _loads(profiles: list[dict]) -> str:
    ok = [e["profile"] for e in profiles if e["verdict"] == "ok"]
    return ", ".join(ok) if ok else "none as is: convert a copy first (eagle3-nb convert)"


def _aux_text(profiles: list[dict]) -> str:
    """What each engine version captures against what the draft was trained on, versions
    with the same answer together."""
    groups: dict[str, list[str]] = {}
    for e in profiles:
        aux = e.get("aux_layers") or {}
        got = aux.get("ids") if aux.get("use_aux_hidden_state", True) else "the final-norm state"
        if got is None:
            text = (f"captures {aux.get('source')} layers, unresolved without the target's "
                    "config (pass it to compare with training)")
        else:
            text = (f"captures hidden_states {got} ({aux.get('source')}), trained on "
                    f"{aux.get('trained')}" + (": MISMATCH" if got != aux.get("trained") else ""))
        groups.setdefault(text, []).append(e["profile"])
    return "; ".join(f"{', '.join(names)} {text}" for text, names in groups.items())


def _sglang_flags(data: dict[str, Any], profiles: list[dict]) -> list[dict[str, str]]:
    ckpt, codes = data.get("checkpoint"), {f["code"] for f in data.get("findings", [])}
    # docs/sglang-serving.md §1 (set_embed_and_head, d2t ignored, no capture
    # under EAGLE), §4.5 (CLI flags, auto-chosen (steps, topk, draft tokens)), PR #21272
    rows = [
        _row("SGLang", "--speculative-algorithm EAGLE3",
             "not EAGLE: with EAGLE no aux states are captured, the target's head replaces the "
             "draft's and d2t is ignored; accept length ~1.0 with no error",
             SGLANG_SRC + "speculative/eagle_worker_v2.py EagleDraftWorker.init_lm_head "
             "(set_embed_and_head unless EAGLE3), init_token_map; python/sglang/srt/"
             "model_executor/model_runner_components/spec_aux_hidden_state.py "
             "_resolve_eagle_aux_hidden_state (captures only under is_eagle3()); sglang PR "
             "#21272; docs/sglang-serving.md §1, §2, §4.5"),
        _row("SGLang", f"--speculative-draft-model-path {ckpt}",
             f"the directory inspected here (or your converted copy); loads as is on: "
             f"{_loads(profiles)}", SGLANG_SRC + "arg_groups/speculative_hook.py "
             "_handle_eagle_family; docs/sglang-serving.md §4.5"),
        _row("SGLang", "--speculative-num-steps, --speculative-eagle-topk, "
             "--speculative-num-draft-tokens",
             "set all three or none (only some: assertion); unset, SGLang picks (5, 4, 8) for "
             "Llama targets and (3, 1, 4) otherwise; with topk 1 draft tokens = steps + 1. "
             "Compare accept lengths only at equal settings",
             SGLANG_SRC + "arg_groups/speculative_hook.py _handle_eagle_family "
             "(the all-or-none assert), _auto_choose_speculative_params (there from 0.5.16; in "
             "0.5.9 and 0.5.12.post1 python/sglang/srt/server_args.py "
             "auto_choose_speculative_params); "
             "docs/sglang-serving.md §4.5"),
        _row("SGLang", "eagle_config.eagle_aux_hidden_state_layer_ids (draft config.json)",
             "SGLang reads aux layer ids only from the nested eagle_config. "
             + _aux_text(profiles),
             SGLANG_SRC + "model_executor/model_runner_components/"
             "spec_aux_hidden_state.py _resolve_eagle_aux_hidden_state (eagle_config only); "
             "each release's reader: eagle3_nb/engines/sglang.py; docs/domain.md 'Aux layer "
             "ids'; docs/sglang-serving.md §2"),
    ]
    if "CONTEXT_TOO_SHORT" in codes:
        rows.append(_row("SGLang", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
                         "the draft's max_position_embeddings is below the target's context: "
                         "startup fails without it, acceptance drops on long prompts with it",
                         SGLANG_SRC + "configs/model_config.py "
                         "ModelConfig._derive_context_length; docs/sglang-serving.md §4.5"))
    if "REMOTE_CODE" in codes:
        rows.append(_row("SGLang", "no --trust-remote-code",
                         "the checkpoint ships code; SGLang would import it",
                         SGLANG_SRC + "utils/hf_transformers/config.py get_config (passes "
                         "trust_remote_code to its config parser); docs/domain.md SGLang"))
    return rows


def _vllm_flags(data: dict[str, Any], profiles: list[dict]) -> list[dict[str, str]]:
    ckpt = data.get("checkpoint")
    spec = f'{{"method": "eagle3", "model": {json.dumps(ckpt)}, "num_speculative_tokens": K}}'
    # docs/speculators-and-vllm.md §4 (config ingestion, method auto-detection,
    # verifier must be a remote repo id in 0.33, aux ids read as hidden_states[id])
    rows = [
        _row("vLLM", f"--speculative-config '{spec}'",
             'method must be "eagle3": vLLM infers it only when the draft path contains "eagle3"; '
             f"loads as is on: {_loads(profiles)}",
             VLLM_SRC + "config/speculative.py SpeculativeConfig.__post_init__ (method from "
             "the draft path); docs/speculators-and-vllm.md §4"),
        _row("vLLM", "num_speculative_tokens",
             "the draft depth K; compare accept lengths only at equal K (vLLM's mean acceptance "
             "length = 1 + accepted / drafts)",
             VLLM_SRC + "v1/spec_decode/metrics.py SpecDecodingLogging.log; docs/domain.md "
             "vLLM; docs/speculators-and-vllm.md §4"),
        _row("vLLM", "aux layer ids", "vLLM captures hidden_states[id] with no offset. "
             + _aux_text(profiles),
             VLLM_SRC + "model_executor/models/interfaces.py EagleModelMixin."
             "_maybe_add_hidden_state (called from LlamaModel.forward in models/llama.py); "
             "each release's reader: eagle3_nb/engines/vllm.py; docs/domain.md 'Aux layer ids'"),
    ]
    if (data.get("config") or {}).get("dialect") == "speculators":
        rows.append(_row("vLLM", "--model TARGET with --speculative-config",
                         "a speculators config names its verifier; in 0.33 a local verifier path "
                         "raises, so pass the target and the speculative config explicitly",
                         VLLM_SRC + "transformers_utils/config.py maybe_override_with_speculators "
                         "(\"Speculators verifier must name a remote model repository\"); "
                         "docs/speculators-and-vllm.md §4"))
    return rows
