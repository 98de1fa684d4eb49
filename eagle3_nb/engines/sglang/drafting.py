"""SGLang's drafting defaults rule (engines/drafting.py applies it to the table in data/drafting.json,
generated from each release's code by tools/drafting_defaults.py)."""

from __future__ import annotations

from eagle3_nb.engines.drafting import DraftingDefault, cite

# SGLang folds NEXTN into EAGLE before choosing; these take the EAGLE defaults.
EAGLE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN")


def default_rule(release: str, rule: dict, architecture: str | None, algorithm: str, page_size: int,
            note: str) -> DraftingDefault:
    source = cite("sglang", rule["source"], release)
    if algorithm == "STANDALONE" and rule["standalone"] is not None:
        steps, topk, tokens = rule["standalone"]
        note += "STANDALONE gets its own defaults whatever the target. "
    elif algorithm in EAGLE_ALGORITHMS or algorithm == "STANDALONE":
        if algorithm == "STANDALONE":
            note += f"sglang {release} has no STANDALONE branch: the EAGLE rule is used. "
        if not rule["auto"]:
            steps, topk, tokens = rule["other"]
            note += "The ServerArgs field defaults, the same for every target. "
        elif architecture is None:
            steps, topk, tokens = rule["other"]
            note += "Target architecture not given: the catch-all branch. "
        elif architecture in rule["by_architecture"]:
            steps, topk, tokens = rule["by_architecture"][architecture]
            note += f"{architecture} has its own branch. "
        else:
            steps, topk, tokens = rule["other"]
            note += f"{architecture} falls to the catch-all branch. "
    else:
        raise ValueError(f"sglang's default drafting rule covers EAGLE, EAGLE3, NEXTN and STANDALONE, "
                         f"not {algorithm}")
    if rule["page_size_forces_topk1"] and page_size > 1 and topk > 1:
        topk = 1
        note += f"page_size {page_size} > 1 lowers topk to 1. "
    if rule["chain_tokens_forced"] and topk == 1 and tokens != steps + 1:
        note += f"topk 1 sets num_draft_tokens to num_steps + 1 (not {tokens}). "
        tokens = steps + 1
    elif topk == 1 and tokens > steps + 1:
        note += (f"num_draft_tokens {tokens} is kept although a chain of {steps} steps has only "
                 f"{steps + 1} tokens (this release does not adjust it). ")
    if rule["auto"]:
        when = "--speculative-num-steps is not given"
        if "speculative_adaptive" in (rule["auto_when"] or ""):
            when += " and --speculative-adaptive is off"
        note += f"Applies when {when}"
        note += (" (then topk and num_draft_tokens must be unset too, or startup fails)."
                 if rule["auto_requires_unset"] else ".")
    else:
        note += "Each flag not given keeps its field default."
    return DraftingDefault(steps, topk, tokens, source, note.strip(), release)
