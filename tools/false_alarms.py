"""The false-alarm matrix (#25): every bundled sample draft x every release range of every
registered engine x the evidence a user may bring (the target's config, its weights, a serving
command), each verdict, and what backs each error and warning.

    python tools/false_alarms.py [--out docs/false-alarms.md]

A finding is backed when the engine's real loader confirmed it (docs/engine-truth.md: the probe
agreed on that sample and release, for the codes the probe checks), when it carries its own
citation (the engine file and function, the known bug's upstream link), when its profile cites
the field that decides it, or, for a finding about the draft itself (no engine), when it states
the measured evidence it rests on. Anything else is listed as UNBACKED: a false alarm until
someone cites it (tests/test_false_alarms.py fails on it).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from eagle3_nb.checks.load import inspect_checkpoint  # noqa: E402
from eagle3_nb.engines.profile import EngineProfile  # noqa: E402
from eagle3_nb.engines.registry import engines  # noqa: E402

DRAFTS = ROOT / "data_samples" / "drafts"
TARGET = ROOT / "data_samples" / "target"
TRUTH = ROOT / "docs" / "engine-truth.md"
OUT = ROOT / "docs" / "false-alarms.md"
SERIOUS = ("error", "warning")
# the evidence a user may bring beside the draft: (column, target config, statistics on)
TARGETS = (("draft", None, False), ("+config", TARGET / "config.json", False),
           ("+weights", TARGET, True))
PROBED_TEXT = ("probe: the real loader of a release in the range agrees on this sample "
               "(docs/engine-truth.md)")
# codes the probe checks against the real loader: key fates, unwritten parameters, startup
PROBED = ("LOAD_ERROR", "KEYS_DROPPED", "PARAMS_UNLOADED")
# findings that say what the kit could not check (no survey, no profile for the build): a
# statement about the kit's evidence, never an alarm about the engine
UNCHECKED = ("TARGET_CAPTURE_UNCHECKED", "ENGINE_UNVERIFIED")
# the profile fields that decide a plan finding, by its code and the evidence it names (first
# match wins; "" matches any evidence), for its citation
FIELDS = (
    ("LOAD_ERROR", "dialect", ("dialect_error", "dialects")),
    ("LOAD_ERROR", "architecture", ("architecture_errors", "architectures")),
    ("LOAD_ERROR", "layer_model_type", ("speculators_layer_types", "draft_model_type_errors")),
    ("LOAD_ERROR", "num_hidden_layers", ("too_many_layers_error", "max_layers")),
    ("LOAD_ERROR", "keys", ("unknown_error", "unknown", "key_resolution", "load_weights")),
    ("LOAD_ERROR", "params", ("missing_params", "missing")),
    ("LOAD_ERROR", "fc_in", ("fc_width", "fc_aux_count")),
    ("KEYS_DROPPED", "", ("unknown_keys", "unknown", "key_resolution", "renames",
                          "drop_when_off")),
    ("PARAMS_UNLOADED", "", ("missing", "missing_params", "load_weights")),
    ("AUX_LAYERS_DEFAULTED", "", ("aux_ids", "aux_id_sources")),
    ("AUX_LAYER_CONVENTION", "", ("aux_ids", "aux_rules", "plus_one")),
    ("AUX_COUNT_MISMATCH", "", ("fc_width", "fc_aux_count")),
    ("FC_SKIPPED", "", ("fc_skip",)),
    ("NORM_FLAG_IGNORED", "", ("flags", "norm_before_residual", "norm_before_fc")),
    ("NORM_FLAG_AMBIGUOUS", "", ("flags", "norm_before_residual", "norm_before_fc")),
    ("CONTEXT_TOO_SHORT", "", ("context", "context_error")),
    ("EMBED_REPLACED", "", ("embed", "embed_policy")),
    ("EMBED_DIFFERS", "", ("embed", "embed_policy")),
    ("LM_HEAD_FROM_TARGET", "", ("lm_head", "lm_head_policy")),
)
# a profile read in full from one release's code, or a range whose watched files were compared
# at every tag (its evidence says which), backs the fields its range did not change with that
# reading
READ = {"code of the ": "code read in full", "release survey": "release survey of every tag"}


@dataclass
class Alarm:
    """One error or warning of one cell, with what backs it ("" when nothing does)."""
    code: str
    severity: str
    engine: str | None
    message: str
    backing: str


@dataclass
class Cell:
    sample: str
    evidence: str          # the column: what was given beside the draft
    profile: str           # NAME==VERSION
    verdict: str
    alarms: list[Alarm] = field(default_factory=list)


def profiles() -> list[EngineProfile]:
    """Every release range of every registered engine, in registry order."""
    return [p for e in engines().values() for p in e.profiles]


def samples() -> list[str]:
    return sorted(p.name for p in DRAFTS.iterdir() if (p / "config.json").is_file())


@functools.lru_cache(maxsize=1)
def probe_agreement() -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(sample, engine) -> [(release, cell)] of docs/engine-truth.md's agreement table."""
    lines = TRUTH.read_text(encoding="utf-8").splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| variant |"))
    columns = [c.strip().partition(" ") for c in lines[head].strip("|").split("|")][1:]
    out: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for line in lines[head + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        for (engine_name, _, release), cell in zip(columns, cells[1:]):
            out.setdefault((cells[0], engine_name), []).append((release, cell))
    return out


def confirmed_by_probe(sample: str, profile: EngineProfile) -> str:
    """The probed release of PROFILE's range whose real loader agreed on SAMPLE, or ""."""
    return next((release for release, cell in probe_agreement().get((sample, profile.name), ())
                 if cell == "agree" and profile.covers_release(release)), "")


def backing(f: dict, sample: str, profile: EngineProfile | None) -> str:
    """What backs finding F (its JSON form) of SAMPLE under PROFILE ("" when nothing)."""
    ev = f.get("evidence") or {}
    if profile is not None and f["code"] in PROBED:
        if confirmed_by_probe(sample, profile):
            return PROBED_TEXT
    if ev.get("cite"):
        return f"cite: {ev['cite']}"
    if f["code"] in UNCHECKED:
        return "says what was not checked, asserting nothing about the engine"
    if profile is not None:
        fields = _fields(f["code"], ev)
        cited = [_cite(profile, k) for k in fields if _cite(profile, k)]
        if cited:
            return f"profile: {cited[0]}"
        read = next((how for how in READ if profile.evidence.startswith(how)), "")
        if fields and read:
            return f"profile field {fields[0]}, as the range's {READ[read]} reads it"
    if f["engine"] is None and ev:
        return "measured on the draft: " + ", ".join(sorted(ev))
    return ""


def _fields(code: str, evidence: dict) -> tuple[str, ...]:
    for known, key, fields in FIELDS:
        if known == code and (not key or key in evidence):
            return fields
    return ()


def _cite(profile: EngineProfile, name: str) -> str:
    """The profile's citation of field NAME, following "as OTHER" to OTHER's."""
    text = profile.cites.get(name, "")
    seen = {name}
    while text.startswith("as ") and text[3:] in profile.cites and text[3:] not in seen:
        seen.add(text[3:])
        text = profile.cites[text[3:]]
    return text


def serve_command(engine_name: str, draft: Path) -> str | None:
    """The engine's own serving command for DRAFT over the bundled target, when its launch
    dialect can write one."""
    launch = engines()[engine_name].launch
    write = getattr(launch, "serve", None)
    return write(str(TARGET), str(draft)) if write else None


def _inspect(sample: str, keys: list[str], target, stats: bool, launch: str | None) -> dict:
    data = inspect_checkpoint(DRAFTS / sample, keys, target, stats=stats, launch=launch)
    return data.to_json()


def _cells(sample: str, column: str, data: dict, by_key: dict) -> list[Cell]:
    out = []
    for e in data["engines"]:
        profile = by_key[e["profile"]]
        mine = [f for f in data["findings"] if f["severity"] in SERIOUS
                and f["engine"] in (None, e["profile"])]
        alarms = [Alarm(f["code"], f["severity"], f["engine"], f["message"],
                        backing(f, sample, profile if f["engine"] else None)) for f in mine]
        out.append(Cell(sample, column, e["profile"], e["verdict"], alarms))
    return out


@functools.lru_cache(maxsize=1)
def matrix() -> tuple[Cell, ...]:
    """Every cell: sample x evidence column x profile."""
    every = profiles()
    by_key = {p.key: p for p in every}
    out: list[Cell] = []
    for sample in samples():
        for column, target, stats in TARGETS:
            data = _inspect(sample, [p.key for p in every], target, stats, None)
            out += _cells(sample, column, data, by_key)
            for name in engines():
                command = serve_command(name, DRAFTS / sample)
                if command is None:
                    continue
                keys = [p.key for p in every if p.name == name]
                data = _inspect(sample, keys, target, stats, command)
                out += _cells(sample, column + "+launch", data, by_key)
    return tuple(out)


def columns() -> list[str]:
    return [c for name, _, _ in TARGETS for c in (name, name + "+launch")]


SHORT = {"ok": "ok", "silent_failure": "SILENT", "load_error": "LOAD"}


def render() -> str:
    cells = matrix()
    lines = [
        "# False alarms: every bundled draft x every engine release range x the evidence given",
        "",
        "Generated by `python tools/false_alarms.py --out docs/false-alarms.md` (checked by "
        "tests/test_false_alarms.py). Each sample draft of data_samples/drafts is inspected "
        "against every release range of every registered engine, with the draft alone "
        "(`draft`), with the target's config (`+config`), with the target's directory and "
        "weights and tensor statistics on (`+weights`), each also with the engine's own "
        "serving command for that draft (`+launch`, where the engine's launch dialect writes "
        "one). Target: data_samples/target.",
        "",
        "Verdicts: ok, SILENT (silent failure), LOAD (load error). Consecutive ranges with "
        "the same verdicts share a row. Then every error and warning, with what backs it: "
        "`probe` (the real loader agreed, docs/engine-truth.md), `cite` (the finding's own "
        "citation), `profile` (the profile's citation of the field that decides it), "
        "`measured on the draft` (a finding about the draft's own data, with its evidence). "
        "UNBACKED marks a false alarm.",
        "",
    ]
    for sample in samples():
        lines += _sample_section(sample, [c for c in cells if c.sample == sample])
    return "\n".join(lines).rstrip() + "\n"


def _sample_section(sample: str, cells: list[Cell]) -> list[str]:
    cols = columns()
    by = {(c.profile, c.evidence): c for c in cells}
    rows: list[tuple[list[str], list[str]]] = []   # (profile keys, verdict per column)
    for p in profiles():
        verdicts = [SHORT[by[(p.key, col)].verdict] if (p.key, col) in by else "-" for col in cols]
        if rows and rows[-1][1] == verdicts and by_engine(rows[-1][0][-1]) == p.name:
            rows[-1][0].append(p.key)
        else:
            rows.append(([p.key], verdicts))
    out = [f"## {sample}", "", "| releases | " + " | ".join(cols) + " |",
           "|---" * (len(cols) + 1) + "|"]
    for keys, verdicts in rows:
        out.append(f"| {_range(keys)} | " + " | ".join(verdicts) + " |")
    out += ["", *_alarm_lines(cells), ""]
    return out


def by_engine(key: str) -> str:
    return key.partition("==")[0]


def _range(keys: list[str]) -> str:
    first, last = keys[0], keys[-1]
    return first if first == last else f"{first} .. {last.partition('==')[2]}"


def _alarm_lines(cells: list[Cell]) -> list[str]:
    """Each distinct alarm once: where it fires (profiles, columns) and what backs it, each
    backing with the profiles it holds for."""
    seen: dict[tuple, dict] = {}
    for c in cells:
        for a in c.alarms:
            name, _, version = c.profile.partition("==")
            message = _generic(a.message).replace(f"{name} {version}", f"{name} <release>")
            entry = seen.setdefault((a.severity, a.code, a.engine is None, message),
                                    {"profiles": [], "columns": [], "backing": {}})
            for where, item in ((entry["profiles"], c.profile), (entry["columns"], c.evidence),
                                (entry["backing"].setdefault(a.backing or "UNBACKED", []),
                                 c.profile)):
                if item not in where:
                    where.append(item)
    if not seen:
        return ["No error and no warning in any cell."]
    out = []
    for (severity, code, _, message), where in seen.items():
        given = ("every column" if len(where["columns"]) == len(columns())
                 else ", ".join(where["columns"]))
        out.append(f"- **{severity} {code}** on {_profile_list(where['profiles'])} "
                   f"[{given}]: {message}")
        backings = where["backing"].items()
        out += [f"  - backed by{'' if len(backings) == 1 else ' (' + _profile_list(keys) + ')'}"
                f": {back}" for back, keys in backings]
    return out


def _generic(message: str) -> str:
    """A message with the checkpoint's path removed, so the doc reads the same anywhere."""
    for where, name in ((DRAFTS, "DRAFTS"), (TARGET, "TARGET"), (ROOT, ".")):
        message = message.replace(str(where), name)
    return message


def _profile_list(keys: list[str]) -> str:
    """The profiles as runs of consecutive ranges: 'vllm 0.10.2 .. 0.34.0; sglang 0.5.23'."""
    order = [p.key for p in profiles()]
    runs: list[list[str]] = []
    for key in sorted(keys, key=order.index):
        last = runs[-1][-1] if runs else None
        if last and by_engine(last) == by_engine(key) and \
                order.index(key) == order.index(last) + 1:
            runs[-1].append(key)
        else:
            runs.append([key])
    return "; ".join(_range(run).replace("==", " ") for run in runs)


def unbacked() -> list[tuple[Cell, Alarm]]:
    return [(c, a) for c in matrix() for a in c.alarms if not a.backing]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None, help="write the markdown here (else print it)")
    args = ap.parse_args(argv)
    text = render()
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        print(text, end="")
    missing = unbacked()
    for cell, alarm in missing[:20]:
        print(f"UNBACKED {cell.sample} {cell.profile} {cell.evidence}: {alarm.code} "
              f"{json.dumps(alarm.message)[:200]}", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
