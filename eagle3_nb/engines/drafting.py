"""The drafting settings an engine release uses when the user does not set them.

The data (engines/data/drafting_<engine>.json) is generated from each release's own code by
tools/drafting_defaults.py: SGLang's `auto_choose_speculative_params` (server_args.py; since
0.5.14 `_auto_choose_speculative_params` in srt/arg_groups/speculative_hook.py), which picks
(num_steps, eagle_topk, num_draft_tokens) from the target's `architectures[0]`, and vLLM's
SpeculativeConfig, where `num_speculative_tokens` has no default for an EAGLE-3 draft.

Numbers follow SGLang's names: num_steps draft forwards, topk beams per step, num_draft_tokens
verified tokens counting the last committed one (a chain of k drafted tokens is (k, 1, k + 1)).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from eagle3_nb.engines.profile import release_key

DATA = Path(__file__).resolve().parent / "data"
REPOSITORY = {"sglang": "github.com/sgl-project/sglang", "vllm": "github.com/vllm-project/vllm"}
# SGLang folds NEXTN into EAGLE before choosing; these take the EAGLE defaults.
SGLANG_EAGLE = ("EAGLE", "EAGLE3", "NEXTN")
VLLM_EAGLE = ("EAGLE", "EAGLE3")


@dataclass(frozen=True)
class DraftingDefault:
    num_steps: int | None         # draft forwards per round (vLLM: num_speculative_tokens)
    topk: int | None              # branches kept per step (1: a chain)
    num_draft_tokens: int | None  # tokens verified per round, counting the committed one;
                                  # None: the engine makes the user set it
    source: str                   # repository, file:function, and the release read
    note: str
    release: str | None = None    # the surveyed release whose rule this is


@lru_cache(maxsize=None)
def drafting_table(engine: str) -> dict:
    path = DATA / f"drafting_{engine}.json"
    if not path.is_file():
        return {"releases": {}}
    return json.loads(path.read_text(encoding="utf-8"))


def _surveyed(engine: str, version: str) -> tuple[str, str]:
    """(the surveyed release whose rule applies, a note when it is not VERSION itself)."""
    releases = sorted(drafting_table(engine)["releases"], key=release_key)
    if not releases:
        raise ValueError(f"no drafting table for {engine}: run tools/drafting_defaults.py")
    key = release_key(version)
    older = [r for r in releases if release_key(r) <= key]
    if not older:
        raise ValueError(f"{engine} {version} predates EAGLE-3 in {engine} "
                         f"(first release with it: {releases[0]})")
    release = older[-1]
    if release_key(release) == key:
        return release, ""
    if release == releases[-1]:
        return release, (f"{engine} {version} is newer than the newest release surveyed ({release}): "
                         f"its code was not read; {release}'s rule is assumed. ")
    return release, (f"{engine} {version} was not surveyed (not a published release?): "
                     f"the rule of {release}, the release before it, is used. ")


def _cite(engine: str, source: str, release: str) -> str:
    tag = f"v{release}"
    return f"{REPOSITORY[engine]} {source} @ {tag}"


def default_drafting(engine: str, version: str, architecture: str | None,
                     algorithm: str = "EAGLE3", page_size: int = 1) -> DraftingDefault:
    """What ENGINE VERSION drafts for a target whose config.json `architectures[0]` is
    ARCHITECTURE when none of the drafting flags is given. PAGE_SIZE matters for SGLang releases
    that lowered topk to 1 when page_size > 1 (0.4.4.post4 to 0.4.8.post1)."""
    engine = engine.lower()
    if engine not in REPOSITORY:
        raise ValueError(f"unknown engine {engine!r}: sglang or vllm")
    release, note = _surveyed(engine, version)
    rule = drafting_table(engine)["releases"][release]
    if engine == "sglang":
        return _sglang(release, rule, architecture, algorithm.upper(), page_size, note)
    return _vllm(release, rule, algorithm.upper(), note)


def _sglang(release: str, rule: dict, architecture: str | None, algorithm: str, page_size: int,
            note: str) -> DraftingDefault:
    source = _cite("sglang", rule["source"], release)
    if algorithm == "STANDALONE" and rule["standalone"] is not None:
        steps, topk, tokens = rule["standalone"]
        note += "STANDALONE gets its own defaults whatever the target. "
    elif algorithm in SGLANG_EAGLE or algorithm == "STANDALONE":
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


def _vllm(release: str, rule: dict, algorithm: str, note: str) -> DraftingDefault:
    if algorithm not in VLLM_EAGLE:
        raise ValueError(f"the vllm table covers the EAGLE methods, not {algorithm}")
    source = _cite("vllm", rule["source"], release)
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
