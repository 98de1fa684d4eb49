"""Serving advice from the engine profiles: next steps that name the engine's own facts (where it
reads aux ids and how it numbers them, its capture switch, its context override), and the engine
flags a person checks by hand, filled in from an inspection's JSON form. Every flag row names the
reference note or upstream source it comes from."""

from __future__ import annotations

from typing import Any

from eagle3_nb.engines import resolve_engine
from eagle3_nb.engines.profile import AS_IS, PLUS_ONE, EngineProfile
from eagle3_nb.engines.registry import engines as _engines
from eagle3_nb.errors import EngineSpecError
from eagle3_nb.findings import ENGINE_FACTS_UNKNOWN, next_command
from eagle3_nb.findings import next_step as generic_next_step

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


def with_advice(data: dict[str, Any], inputs: dict[str, str] | None = None,
                checkpoint: str | None = None) -> dict[str, Any]:
    """DATA (a check's JSON form) with `next_step` and `command` in every one of its findings,
    as the report's "what to do" column says them: the step for the finding's engine, the
    command filled in with the checkpoint (DATA's own unless given) and the INPUTS the command
    was given (placeholder -> value, see findings.next_command). A step or a command the
    finding brings itself (an engine log signature's step; None where the code's command would
    change nothing, checks.load) wins over the code's."""
    ckpt = checkpoint or data.get("checkpoint")
    for f in data.get("findings") or []:
        engines = [f.get("engine")]
        own = f.get("evidence") or {}
        f["next_step"] = own.get("next_step") or next_step(f["code"], engines, ckpt)
        f["command"] = own["command"] if "command" in own else \
            next_command(f["code"], engines, ckpt, inputs)
    return data


def engine_facts(engine: str) -> dict[str, str] | None:
    """What a next step needs to say about one engine release, from its profile; None when the
    name resolves to no profile (the generic text then stands)."""
    try:
        p: EngineProfile = resolve_engine(engine)
    except EngineSpecError:
        return None
    if p.eagle3_since:  # no EAGLE-3 in that release: no facts to give
        return None
    launch = (f"the launch config, never the draft's ({p.aux_ids_launch_line.split(':')[0]}, "
              f"as hidden_states index {p.aux_ids_launch_offset:+d})"
              if p.aux_ids_launch_line else "")
    where = (", then ".join(AUX_ID_PLACES[s] for s in p.aux_id_sources) or launch or
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
    answered = data.get("engines", [])
    rows: list[dict[str, str]] = []
    for name, found in _engines().items():
        mine = [e for e in answered if e["engine"] == name]
        if mine and found.flag_advice:
            rows += found.flag_advice(data, mine)
    return rows


def row(engine: str, flag: str, why: str, source: str) -> dict[str, str]:
    return {"engine": engine, "flag": flag, "why": why, "source": source}


def loads_as_is(profiles: list[dict]) -> str:
    ok = [e["profile"] for e in profiles if e["verdict"] == "ok"]
    return ", ".join(ok) if ok else "none as is: convert a copy first (eagle3-nb convert)"


def aux_text(profiles: list[dict]) -> str:
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
