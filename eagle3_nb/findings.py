"""Findings: the kit's answers, each with a stable code a person and a script can rely on."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITY_ORDER = {ERROR: 0, WARNING: 1, INFO: 2}
# d2t formats: the answers notebook 02 gives (vocab.VocabMapping.format), stable in its JSON
OFFSET, ABSOLUTE, MISSING, IDENTITY, AMBIGUOUS, INVALID = (
    "offset", "absolute", "missing", "identity", "ambiguous", "invalid")
# correct offsets with arange subtracted once more (a mistaken "fix" for absolute ids)
ARANGE_SUBTRACTED = "arange_subtracted"
LOW_COVERAGE = 0.85   # below this share of target tokens in the draft vocab, warn
# findings that mean the engine does not start with this draft: the verdict is a load error
STARTUP_FAILURES = frozenset({"LOAD_ERROR", "ENGINE_MISREADS_PATH"})
SUMMARY_VERSION = 2  # of every summary.json the notebooks and the report write (2: parts declare a kind)
# What a notebook's summary.json part may be: the report reads each by its kind, never by the keys
# it happens to hold.
SUMMARY_KINDS = ("triage", "inspection", "vocab", "hidden_states", "acceptance", "data")

# Stable codes. Never rename one; add new ones at the end of their group.
CODES: dict[str, str] = {
    # checkpoint keys and engine load plans
    "KEYS_DROPPED": "tensors the engine silently ignores",
    "PARAMS_UNLOADED": "engine parameters no checkpoint tensor fills",
    "LOAD_ERROR": "the engine refuses to start or to load the draft",
    "SHAPE_MISMATCH": "a tensor's shape differs from what the config promises",
    "CONFIG_GUESSED": "the engine's config reader guesses the config class from the path",
    "AUX_LAYERS_DEFAULTED": "the engine falls back to its default aux layer ids",
    "AUX_LAYER_CONVENTION": "the engine captures other target layers than the trainer meant",
    "AUX_COUNT_MISMATCH": "fc width, aux id count and the engine's aux count disagree",
    "FC_SKIPPED": "the hidden state reaching the draft is H wide, so the engine skips fc",
    "NAN_WEIGHTS": "NaN/Inf or never-initialised tensors",
    "CONTEXT_TOO_SHORT": "draft max_position_embeddings below the target's context",
    "REMOTE_CODE": "the directory ships code; it was not executed",
    "NORM_FLAG_AMBIGUOUS": "a norm flag is absent and engines default it differently",
    "NORM_FLAG_IGNORED": "the checkpoint sets a norm flag the engine never reads",
    "EMBED_REPLACED": "the engine swaps in the target's embeddings",
    "LM_HEAD_FROM_TARGET": "the engine borrows the target's lm_head",
    "STATS_SKIPPED": "tensors not scanned for statistics (budget or --no-stats)",
    "ENGINE_UNVERIFIED": "the kit never read this engine build: the nearest profile answered",
    "ENGINE_DISAGREES": "the installed engine's own loader did otherwise than its profile predicts",
    "ENGINE_AGREES": "the installed engine's own loader did what its profile predicts",
    "TARGET_CAPTURE_UNCHECKED": "whether the target class captures aux states was not checked",
    "ENGINE_BUG": "a known bug of this engine release affects this draft",
    "TARGET_MISMATCH": "the draft's config disagrees with the target's (vocab, width, RoPE, verifier)",
    "TARGET_QUANTIZED": "the target is quantized: its hidden states differ from full precision",
    "EMBED_DIFFERS": "the draft's own embed_tokens are not the target's",
    "DRAFT_DIFFERS": "a change from the known-good draft that matters (eagle3-nb diff)",
    "LAUNCH_SETTING": "the serving command runs this draft in a way that defeats it",
    "LOG_UNRECOGNISED": "the engine's log shows an exception no signature of the kit explains",
    "AUX_IDS_INVALID": "the aux layer ids are negative or repeated: they name no layer, or one "
                       "layer twice",
    "NOT_A_DRAFT": "the directory holds a target (or other causal LM) model, not an EAGLE-3 draft",
    "ENGINE_MISREADS_PATH": "the engine reads the draft's path name as another model format and "
                            "fails before its config.json is read",
    "ENGINE_READ_ONLY": "this engine's answer was read from its source, never checked with its "
                        "own loader",
    # vocabulary mapping (d2t / t2d)
    "D2T_MISSING": "pruned draft vocab without a d2t table",
    "D2T_ABSOLUTE": "d2t holds absolute target ids instead of offsets",
    "D2T_INVALID": "d2t is out of range, not injective, or the wrong dtype/length",
    "D2T_AMBIGUOUS": "d2t reads as offsets and as absolute ids; nothing decides",
    "T2D_MISMATCH": "t2d disagrees with d2t",
    "D2T_FIRST_N": "d2t maps the draft vocab onto the first target ids (valid, rarely intended)",
    "D2T_ARANGE_SUBTRACTED": "correct d2t offsets had arange subtracted once more",
    "LOW_VOCAB_COVERAGE": "a corpus's target tokens fall outside the draft vocab",
    # simulated acceptance on a real target
    "ACCEPT_AT_FLOOR": "as trained, the draft accepts no more than with no target state at all",
    "ACCEPT_COLLAPSES": "served as the engine would, the simulated accept length collapses",
    "ACCEPT_MISMATCH": "the engine's reported acceptance differs from the as-trained simulation",
    # first-step accuracy on real target hidden states (notebook 03)
    "HIDDEN_COLLAPSES": "served as the engine would, the draft's first-step accuracy collapses "
                        "or the run crashes",
    "HIDDEN_LAYERS_DIFFER": "the engine captures other target layers than the draft was "
                            "trained on; the measured cost depends on how alike they are",
    # training data (notebook 05, eagle3-nb data)
    "TRAIN_TEMPLATE_MISMATCH": "the training rows were templated in another thinking mode than "
                               "the target is served in",
    "LOSS_MASK_EMPTY": "training rows with no supervised token (the template's assistant header "
                       "not found)",
    "LOSS_MASK_COVERAGE": "supervised spans that miss assistant turns or cover other tokens",
    "TRAIN_ROWS_DROPPED": "rows or turns the trainer's parser drops, or regeneration marked failed",
    "TRAIN_TRUNCATED": "answers cut at the training max_length",
    "TRAIN_MAX_LENGTH_SHORT": "training max_length below the serving context or the draft's "
                              "max_position_embeddings",
    "TRAIN_DATA_SCALE": "how much the draft was trained on, next to the published recipes",
    "TRAIN_DATA_OFF_POLICY": "the supervised answers are not the target's own",
    "TRAIN_REASONING_MISMATCH": "reasoning_content or think markers disagree with how the target "
                                "is served",
    "VOCAB_MAPPING_STALE": "the draft vocab mapping was built from other data than the training "
                           "rows",
    "DUMP_MISMATCH": "hidden-state dumps disagree with the training rows or the draft config",
    "TRAIN_DOMAIN_GAP": "the serving prompts differ in domain from the training rows",
}


@dataclass
class Finding:
    code: str
    severity: str
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    engine: str | None = None  # "NAME==VERSION" of the profile it applies to, None for all

    def __post_init__(self):
        if self.code not in CODES:
            raise ValueError(f"unknown finding code {self.code!r}")
        if self.severity not in SEVERITY_ORDER:
            raise ValueError(f"unknown severity {self.severity!r}")

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "severity": self.severity, "message": self.message,
                "engine": self.engine, "evidence": self.evidence}


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Errors first, then warnings, then info; stable within a severity."""
    return sorted(findings, key=lambda f: SEVERITY_ORDER[f.severity])


# A served wiring that keeps at most this share of what the trained wiring achieves collapses:
# first-step accuracy (notebook 03), accepted tokens beyond the bonus (notebook 04).
COLLAPSE_FRACTION = 0.5


def collapses(value: float | None, trained: float | None) -> bool:
    """value at most COLLAPSE_FRACTION of trained (False when either is missing or trained is 0)."""
    return bool(trained) and value is not None and value <= COLLAPSE_FRACTION * trained


def has_errors(findings: list[Finding]) -> bool:
    return any(f.severity == ERROR for f in findings)



# ----------------------------------------------------------------------------- evidence (#24)

# Every answer says which evidence it had, and names the flag of each missing piece that could
# change it: {piece: "given" | "not given (--flag)" | how it was decided}, one line at the top.
NEWEST_RELEASES = "not given, each engine's newest releases answered (--engine)"


def given(value: Any, flag: str, missing: str = "not given") -> str:
    """One piece of evidence: "given", or why not and the flag that supplies it."""
    return "given" if value else f"{missing} ({flag})"


def release_given(engines: list[str] | None) -> str:
    """Where the engine releases an answer holds for came from: named, or each one's newest."""
    return "named (--engine)" if engines else NEWEST_RELEASES


def evidence_line(had: dict[str, str] | None) -> str:
    """`evidence: checkpoint: given; tokenizer: not given (--tokenizer); ...`, or "" for none."""
    if not had:
        return ""
    return "evidence: " + "; ".join(f"{k}: {v}" for k, v in had.items())

# ----------------------------------------------------------------------------- next steps

# The next thing to try per finding code ({engine}: the profile it holds for). Commands are the
# kit's own; engine facts are from docs/domain.md and the notes it cites.
NEXT_STEPS: dict[str, str] = {
    "KEYS_DROPPED": "convert a copy to the layout {engine} loads: eagle3-nb convert CKPT NEW "
                    "--engine {engine} (never in place), then serve the copy",
    "PARAMS_UNLOADED": "same fix as the dropped keys: convert a copy for {engine}; unloaded "
                       "linear weights hold uninitialised memory",
    "LOAD_ERROR": "read the message: usually a config dialect or key layout {engine} does not "
                  "read; eagle3-nb convert CKPT NEW --engine {engine}, or serve with an engine "
                  "version whose verdict is ok",
    "SHAPE_MISMATCH": "config.json and the weights disagree: re-export from the trainer, or fix "
                      "config.json in a copy",
    "CONFIG_GUESSED": "add \"model_type\": \"llama\" to config.json in a copy: then no path "
                      "decides how {engine} reads it",
    "AUX_LAYERS_DEFAULTED": "declare the layer ids training captured where {engine} reads them "
                            "({aux_ids_where}); notebook 03 shows what each choice gives",
    "AUX_LAYER_CONVENTION": "write the ids in the convention {engine} reads ({aux_ids_convention}); "
                            "compare the wirings in notebooks 03 and 04",
    "AUX_COUNT_MISMATCH": "make num_aux_hidden_states / the eagle_config id list agree with "
                          "fc's input width divided by the target hidden size",
    "FC_SKIPPED": "make the engine capture the aux layers (use_aux_hidden_state true, "
                  "{capture_switch}) so the A x H wide concat reaches fc",
    "NAN_WEIGHTS": "re-export the weights from the trainer's state: a NaN or never-trained "
                   "lm_head or embedding gives accept length 1.00",
    "CONTEXT_TOO_SHORT": "serve with a context no longer than the draft's "
                         "max_position_embeddings, or accept lower acceptance on long prompts"
                         "{context_override}",
    "REMOTE_CODE": "nothing to fix: serve without --trust-remote-code",
    "NORM_FLAG_AMBIGUOUS": "write the flag the trainer used explicitly into config.json (in a "
                           "copy) so every engine computes the trained draft",
    "NORM_FLAG_IGNORED": "{engine} computes the draft differently from training: measure the "
                         "gap with notebook 04's what-if wirings, or serve with an engine that "
                         "reads the flag",
    "EMBED_REPLACED": "nothing to do when the draft was trained with the target's embeddings "
                      "(the usual case)",
    "LM_HEAD_FROM_TARGET": "check draft_vocab_size: {engine} uses the target's lm_head",
    "STATS_SKIPPED": "scan every tensor: eagle3-nb inspect CKPT --stats-budget 8G",
    "ENGINE_UNVERIFIED": "read what changed since the profile that answered for {engine} "
                         "(python tools/engine_survey.py on the engine's history lists the "
                         "files and PRs), or check against a release the kit has a profile for "
                         "(eagle3-nb engines)",
    "TARGET_MISMATCH": "check that this draft was trained for this target (its config's sizes and "
                       "the verifier it names); retrain or pick the draft made for this target",
    "LAUNCH_SETTING": "change the serving command as the finding says ({engine})",
    "LOG_UNRECOGNISED": "inspect the draft with the log (eagle3-nb inspect CKPT --log LOG "
                        "--target-config TARGET): its findings may explain the exception; else "
                        "change one serving setting at a time (the A/B plan) and compare",
    "DRAFT_DIFFERS": "read the side-by-side table: the change named is the first suspect",
    "EMBED_DIFFERS": "copy the target's embed_tokens into a converted copy of the draft, or drop "
                     "them so the engine shares the target's (engines that take the draft's own "
                     "copy share the target's when the draft has none)",
    "TARGET_QUANTIZED": "compare hidden-state dumps of the quantized and the full-precision target "
                        "on the same prompts (eagle3-nb accept --hidden-states on each)",
    "ENGINE_BUG": "upgrade {engine} to the release the finding names as fixed, or work around "
                  "it as the finding says",
    "TARGET_CAPTURE_UNCHECKED": "pass the target's own config.json (with architectures) as "
                                "--target-config; else read the target class in {engine}'s "
                                "models folder (tools/capture_table.py lists its hook)",
    "ENGINE_DISAGREES": "trust the probe over the profile for this build: the profile (or the "
                        "installed build) differs; report the difference with the line the probe "
                        "shows so the {engine} profile can be fixed (eagle3-nb probe CKPT "
                        "--engine NAME --json)",
    "ENGINE_READ_ONLY": "where {engine} is installed, check the answer with its own loader "
                        "(eagle3-nb probe CKPT --engine {engine}); until then treat each "
                        "finding as read from the code the profile cites",
    "ENGINE_AGREES": "nothing to do: the profile's answer for {engine} is confirmed by the "
                     "installed engine",
    "D2T_ARANGE_SUBTRACTED": "repair a copy: eagle3-nb convert CKPT NEW --fix-d2t (t2d decides "
                             "it: d2t + arange is restored)",
    "D2T_FIRST_N": "rebuild d2t and t2d from the training data's token counts (the N most "
                   "frequent target ids, sorted), then retrain or check the head was trained on it",
    "D2T_MISSING": "rebuild d2t: eagle3-nb convert CKPT NEW --fix-d2t (from t2d when present), "
                   "else from the training token counts",
    "D2T_ABSOLUTE": "eagle3-nb convert CKPT NEW --fix-d2t writes offsets into a copy and "
                    "re-reads it to prove the fix",
    "D2T_INVALID": "re-export the trainer's mapping; do not patch the table by hand",
    "D2T_AMBIGUOUS": "change nothing: find the trainer's t2d or look up a few ids with the "
                     "tokenizer (notebook 02); trainers write offsets",
    "T2D_MISMATCH": "find which of d2t and t2d the trainer wrote; engines use only d2t",
    "LOW_VOCAB_COVERAGE": "the draft vocabulary caps acceptance on this corpus: retrain with a "
                          "larger draft_vocab_size or token counts from serving-like data",
    "ACCEPT_AT_FLOOR": "the weights or the training data are the problem, not the serving: "
                       "check what training fed the draft (hidden states, TTT steps, loss) and "
                       "re-export",
    "ACCEPT_COLLAPSES": "fix how {engine} serves the draft (the what-if table in notebook 04 "
                        "names the switch: layout, layer ids, EAGLE3, norm flags), not the "
                        "weights",
    "ACCEPT_MISMATCH": "find the what-if wiring in notebook 04 that reproduces the engine's "
                       "figure: it names what the engine does differently from training",
    "HIDDEN_COLLAPSES": "fix how {engine} serves the draft, not the weights: notebook 03's "
                        "wirings table says what differs (fc skipped, layer ids, parameters "
                        "left unloaded); notebook 01 names the keys and flags",
    "HIDDEN_LAYERS_DIFFER": "declare the layer ids training captured where and in the convention "
                            "{engine} reads them ({aux_ids_where}; {aux_ids_convention}); do not "
                            "judge the fix by how small the loss is on one target",
    "ENGINE_MISREADS_PATH": "serve the draft from a path the engine does not misread (the "
                            "finding names the words and the engine's own switch, where it has "
                            "one)",
    "AUX_IDS_INVALID": "write the hidden_states indices training captured (from the trainer's "
                       "run config), each once and none negative, into a copy's config.json; "
                       "then inspect the copy",
    "TRAIN_TEMPLATE_MISMATCH": "re-tokenise the conversations with the template in the serving "
                               "mode (SpecForge: a *-instruct template whose ignore_token drops "
                               "the empty think block, or --reasoning save data for thinking) "
                               "and retrain",
    "LOSS_MASK_EMPTY": "register a trainer template whose assistant_header and end_of_turn_token "
                       "occur in the target's rendered text, rebuild the dataset cache, retrain",
    "LOSS_MASK_COVERAGE": "read the span edges table: fix the template registration "
                          "(headers, train_only_last_turn) and rebuild the cache",
    "TRAIN_ROWS_DROPPED": "drop failed rows before training (validate_regenerated_data.py) and "
                          "fix role order so every assistant turn is kept",
    "TRAIN_TRUNCATED": "raise max_length (--seq-length) to cover the answers whole, or drop the "
                       "long rows",
    "TRAIN_MAX_LENGTH_SHORT": "nothing to fix for short prompts; for long serving contexts "
                              "train with a longer max_length",
    "TRAIN_DATA_SCALE": "compare with the recipes quoted; more on-policy data is the usual "
                        "next step when acceptance plateaus",
    "TRAIN_DATA_OFF_POLICY": "regenerate the answers with the target itself (temperature 0) "
                             "and retrain",
    "TRAIN_REASONING_MISMATCH": "regenerate with the reasoning mode the target is served in "
                                "(--reasoning save for thinking, disable otherwise) and validate "
                                "with --strict-think-markers",
    "VOCAB_MAPPING_STALE": "delete the cached vocab_mapping/token_freq file, rebuild it from "
                           "this data, retrain the draft head",
    "DUMP_MISMATCH": "regenerate the hidden states from these exact rows with the aux layer "
                     "ids of the draft config",
    "TRAIN_DOMAIN_GAP": "add training data like the serving prompts (regenerated by the "
                        "target), or rebuild the vocab mapping from it",
    "NOT_A_DRAFT": "pass the EAGLE-3 draft's directory (an fc weight and an Eagle3 architecture) "
                   "as the checkpoint; this directory is the target: give it as --target-config "
                   "(or --target)",
}

# The command that takes the next step (or shows what it needs), where the kit has one; a step
# done by hand (re-export, edit a config, change the serving command) has none. Placeholders:
# CKPT, NEW (a new directory beside it), {engine} / {engine_name}, and the inputs a command was
# given (TARGET_DIR, TARGET_CONFIG, LOG, ...) where known, else left for the reader to fill.
_CONVERT = "eagle3-nb convert CKPT NEW --engine {engine}"
_WIRINGS = "eagle3-nb report CKPT --target TARGET_DIR --engine {engine}"
_WHAT_IF = "eagle3-nb accept CKPT --target TARGET_DIR --what-if --engine {engine}"
_FIX_D2T = "eagle3-nb convert CKPT NEW --fix-d2t"
NEXT_COMMANDS: dict[str, str] = {
    "KEYS_DROPPED": _CONVERT, "PARAMS_UNLOADED": _CONVERT, "LOAD_ERROR": _CONVERT,
    "AUX_LAYERS_DEFAULTED": _WIRINGS, "AUX_LAYER_CONVENTION": _WIRINGS, "FC_SKIPPED": _WIRINGS,
    "HIDDEN_COLLAPSES": _WIRINGS, "HIDDEN_LAYERS_DIFFER": _WIRINGS,
    "NORM_FLAG_IGNORED": _WHAT_IF, "ACCEPT_COLLAPSES": _WHAT_IF,
    "ACCEPT_MISMATCH": "eagle3-nb accept CKPT --target TARGET_DIR --observed OBSERVED",
    "STATS_SKIPPED": "eagle3-nb inspect CKPT --stats-budget 8G",
    "ENGINE_UNVERIFIED": "eagle3-nb engines",
    "ENGINE_DISAGREES": "eagle3-nb probe CKPT --engine {engine_name} --json",
    "TARGET_CAPTURE_UNCHECKED": "eagle3-nb inspect CKPT --target-config TARGET_CONFIG "
                                "--engine {engine}",
    "LOG_UNRECOGNISED": "eagle3-nb inspect CKPT --log LOG --target-config TARGET_CONFIG",
    "TARGET_QUANTIZED": "eagle3-nb accept CKPT --hidden-states DUMPS_DIR --target TARGET_DIR",
    "D2T_MISSING": _FIX_D2T, "D2T_ABSOLUTE": _FIX_D2T, "D2T_ARANGE_SUBTRACTED": _FIX_D2T,
    "D2T_AMBIGUOUS": "eagle3-nb vocab CKPT --tokenizer TOKENIZER",
    "NOT_A_DRAFT": "eagle3-nb inspect DRAFT --target-config CKPT/config.json",
}


# What a next step says about an engine when it names none (engines.advice.next_step fills
# these from the engine's profile instead).
ENGINE_FACTS_UNKNOWN = {
    "aux_ids_where": "notebook 01's aux layers table names where each engine reads them",
    "aux_ids_convention": "notebook 01's aux layers table shows what each engine captures",
    "capture_switch": "the engine's EAGLE-3 mode, not EAGLE",
    "context_override": "",
}


def next_step(code: str | None, engines: list[str | None] | None = None,
              checkpoint: str | None = None, facts: dict[str, str] | None = None) -> str:
    """The next thing to try for a finding, with the engine and checkpoint filled in. Of
    several engines the last (the inspection lists versions oldest first) goes into the
    command; the others are named after it. `facts` are that engine's serving facts
    (engines.advice.engine_facts); without them the text points at where the kit shows them."""
    named = [e for e in engines or [] if e]
    text = NEXT_STEPS.get(code or "", "see the notebook that reported it")
    if "{engine}" in text and len(named) > 1:
        text += f" (likewise for {', '.join(named[:-1])})"
    for name, value in {**ENGINE_FACTS_UNKNOWN, **(facts or {})}.items():
        text = text.replace("{" + name + "}", value)
    ckpt = checkpoint or "CKPT"
    return (text.replace("{engine}", named[-1] if named else "the engine version you serve with")
            .replace("CKPT NEW", f"{ckpt} {ckpt}-converted").replace("CKPT", ckpt))


def next_command(code: str | None, engines: list[str | None] | None = None,
                 checkpoint: str | None = None, inputs: dict[str, str] | None = None
                 ) -> str | None:
    """The command of a finding's next step (NEXT_COMMANDS), filled in: the checkpoint, the
    engine the step names (the last of several, as next_step), and the INPUTS the command was
    given (placeholder -> value: TARGET_DIR, TARGET_CONFIG, LOG, ...); None where the step is
    done by hand."""
    text = NEXT_COMMANDS.get(code or "")
    if text is None:
        return None
    named = [e for e in engines or [] if e]
    engine = named[-1] if named else "NAME==VERSION"
    ckpt = checkpoint or "CKPT"
    values = {"CKPT": ckpt, "NEW": f"{ckpt}-converted", **(inputs or {})}
    text = text.replace("{engine}", engine).replace("{engine_name}", engine.split("==")[0])
    return re.sub(r"\b(" + "|".join(map(re.escape, values)) + r")\b",
                  lambda m: shlex.quote(str(values[m.group(1)])), text)


# ----------------------------------------------------------------------------- verdict line

def engine_codes(data: dict[str, Any], severity: str = "error") -> dict[str, list[str]]:
    """profile -> finding codes of `severity` that hold for it (its own and the global ones),
    unique, errors-first order as in the inspection."""
    out: dict[str, list[str]] = {}
    for e in data.get("engines", []):
        codes: list[str] = []
        for f in data.get("findings", []):
            if f["severity"] == severity and f["engine"] in (None, e["profile"]) \
                    and f["code"] not in codes:
                codes.append(f["code"])
        out[e["profile"]] = codes
    return out


def verdicts(data: dict[str, Any]) -> dict[str, str]:
    return {e["profile"]: e["verdict"] for e in data.get("engines", [])}


def verdict_line(data: dict[str, Any], sep: str = "; ") -> str:
    """'sglang==0.5.9: silent_failure (KEYS_DROPPED, PARAMS_UNLOADED); vllm==0.33: ok; ...'
    Non-ok verdicts list the error codes behind them; ok verdicts list warnings, if any."""
    errors, warnings = engine_codes(data, "error"), engine_codes(data, "warning")
    parts = []
    for profile, verdict in verdicts(data).items():
        if verdict != "ok" and errors[profile]:
            parts.append(f"{profile}: {verdict} ({', '.join(errors[profile])})")
        elif verdict == "ok" and warnings[profile]:
            parts.append(f"{profile}: ok (warnings: {', '.join(warnings[profile])})")
        else:
            parts.append(f"{profile}: {verdict}")
    return sep.join(parts)


def summary_part(kind: str, notebook: str, body: dict[str, Any]) -> dict[str, Any]:
    """One notebook's summary.json part: its kind and the summary version first, then BODY."""
    if kind not in SUMMARY_KINDS:
        raise ValueError(f"unknown summary kind {kind!r}; known: {SUMMARY_KINDS}")
    return {"summary_version": SUMMARY_VERSION, "kind": kind, "notebook": notebook,
            **{k: v for k, v in body.items() if k not in ("summary_version", "kind", "notebook")}}


def part_kind(part: Any) -> str | None:
    """The kind a summary.json part declares, or None when it declares none the kit writes (or
    was written by another summary version)."""
    if not isinstance(part, dict) or part.get("summary_version") != SUMMARY_VERSION:
        return None
    kind = part.get("kind")
    return kind if kind in SUMMARY_KINDS else None


def group_findings(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Identical findings of several engines as one group, in first-seen order: the code,
    severity and message they share, the engines they hold for (None: checkpoint-wide) and the
    findings themselves. The one grouping every view and the report use."""
    groups: dict[tuple, dict[str, Any]] = {}
    for f in findings:
        group = groups.setdefault((f["code"], f["severity"], f["message"]), {
            "code": f["code"], "severity": f["severity"], "message": f["message"],
            "engines": [], "members": []})
        group["engines"].append(f.get("engine"))
        group["members"].append(f)
    return list(groups.values())
