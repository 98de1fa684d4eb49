"""vLLM's drafting defaults rule (engines/drafting.py applies it to the table in data/drafting.json,
generated from each release's code by tools/drafting_defaults.py)."""

from __future__ import annotations

from eagle3_nb.engines.drafting import DraftingDefault, cite

EAGLE_ALGORITHMS = ("EAGLE", "EAGLE3")


def default_rule(release: str, rule: dict, architecture: str | None, algorithm: str,
                 page_size: int, note: str) -> DraftingDefault:
    if algorithm not in EAGLE_ALGORITHMS:
        raise ValueError(f"the vllm table covers the EAGLE methods, not {algorithm}")
    source = cite("vllm", rule["source"], release)
    k = rule["num_speculative_tokens"]
    if k is None:
        note += "num_speculative_tokens has no default: "
        fallbacks = []
        if rule["from_draft_n_predict"]:
            fallbacks.append("an n_predict in the draft's config.json")
        if rule["from_speculators_config"]:
            fallbacks.append("a speculators-format checkpoint's speculative_tokens")
        if fallbacks:
            note += "without " + " or ".join(fallbacks) + ", "
        note += ("startup fails unless --speculative-config sets it. " if rule["required"]
                 else "the engine's behaviour then was not read. ")
    else:
        note += f"num_speculative_tokens defaults to {k}. "
    if rule["tree"]:
        note += ("A chain (topk 1) unless speculative_token_tree is set and the TREE_ATTN attention "
                 "backend is selected.")
    else:
        note += "Always a chain (topk 1): no EAGLE tree drafting in this release."
    tokens = None if k is None else k + 1
    return DraftingDefault(k, 1, tokens, source, note.strip(), release)
