#!/usr/bin/env python3
"""Take in a new engine release: what changed for EAGLE-3 since the newest release the kit read.

    python tools/release_intake.py vllm 0.34.0            # stage everything, write the report
    python tools/release_intake.py vllm 0.34.0 --write    # also replace the kit's data files

1. downloads the wheels of VERSION and of the newest release the kit has read (the `read` field
   of eagle3_nb/engines/<engine>/__init__.py) into .cache/wheels/ (pip download, no deps);
2. grafts both into a scratch git directory (engine_survey.py --graft-wheel) and diffs the
   watched files (engine_survey.py's watch list) definition by definition, on the AST;
3. runs capture_table.py and drafting_defaults.py on the two releases and merges the result
   into the kit's tables: an open range that still holds at VERSION stays open, a change closes
   it at VERSION and opens a new one, a new architecture gets a range from VERSION. The scratch
   rows for the newest read release must agree with what the kit's tables already say for it;
   every disagreement is reported and blocks --write;
4. builds the side environment (tools/engine_env.sh) and
5. probes every bundled sample draft in it (tools/engine_truth.py);
6. writes a Markdown report (.cache/intake/<engine>-<VERSION>.md) of what a person must decide.

The merged tables go to .cache/intake/<engine>-<VERSION>/ (staging); --write replaces
eagle3_nb/engines/<engine>/data/{capture,drafting}.json and docs/target-capture.md (temp file
+ rename). The tool proposes: it never edits profiles.py or releases.py. Python 3.11, stdlib
only (release_fields.py, when the kit imports, adds the profile-field markers).
"""

from __future__ import annotations

import argparse
import ast
import copy
import fnmatch
import glob
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time

TOOLS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TOOLS)
ENGINES_DIR = os.path.join(ROOT, "eagle3_nb", "engines")
DOC_PATH = os.path.join(ROOT, "docs", "target-capture.md")
STATE_KEYS = ("status", "rule", "hook", "delegate", "final_boundary", "note")
NOT_SERVED = {"status": "not_served", "rule": None, "hook": None, "final_boundary": None}

# Which profile fields (eagle3_nb/engines/profile.py) each watch of engine_survey.py can move:
# the fallback when release_fields.py's markers cannot run, and the "read these" list beside them.
WATCH_FIELDS = {
    "vllm": {
        "draft model": "architectures, renames, key_resolution, unknown_keys, d2t_param, fc_aux_count, "
                       "flags, has_input_norm, has_fc_norm, drop_when_off, qkv_bias, mla",
        "eagle proposer": "embed_policy, lm_head_policy, aux_id_sources, reads_use_aux_hidden_state, "
                          "d2t_reading",
        "speculative config": "capture_switch, dialects, speculators_layer_types, flags, "
                              "draft_model_type_errors",
        "aux layer ids": "aux_id_sources, aux_rules, aux_sorted, graphs_use_default_ids",
        "eagle3 interface": "aux_rules, last_layer_capturable, final_boundary_families, target_allowlist",
        "spec-decode metrics": "(no profile field: the metrics readers in engines/vllm/)",
    },
    "sglang": {
        "draft model": "architectures, decoder_param, max_layers, renames, key_resolution, unknown_keys, "
                       "fc_aux_count, flags, has_input_norm, has_fc_norm, mla",
        "eagle workers": "embed_policy, lm_head_policy, d2t_reading, graphs_use_default_ids",
        "spec info": "d2t_reading",
        "hot_token_id / d2t": "d2t_param, d2t_reading",
        "aux layer ids": "aux_id_sources, aux_rules",
        "target capture": "aux_rules, last_layer_capturable, final_boundary_families",
        "server args": "capture_switch, context_override, target_allowlist",
        "accept-rate metrics": "(no profile field: the log readers in engines/sglang/)",
    },
}


class IntakeError(Exception):
    """Reported as one line on stderr, exit status 2."""


def load_tool(name: str):
    """tools/ is not a package: load a sibling tool by path, once (shared with the others)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, os.path.join(TOOLS, name + ".py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


es = load_tool("engine_survey")
ct = load_tool("capture_table")
dd = load_tool("drafting_defaults")


def version_key(version: str) -> tuple:
    return es.release_key("v" + version)


# ---------------------------------------------------------------- what the kit has read

def _literal_call_keyword(path: str, keyword: str):
    """The literal value of KEYWORD=... in any call of the module (the Engine record)."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == keyword:
                    return ast.literal_eval(kw.value)
    return None


def kit_releases(engine: str) -> list[tuple[str, str]]:
    """RELEASES of eagle3_nb/engines/<engine>/releases.py, read without importing the kit."""
    with open(os.path.join(ENGINES_DIR, engine, "releases.py"), encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    for node in tree.body:
        target = getattr(node, "target", None) or (node.targets[0] if isinstance(node, ast.Assign) else None)
        if isinstance(target, ast.Name) and target.id == "RELEASES":
            return [tuple(r) for r in ast.literal_eval(node.value)]
    raise IntakeError(f"no RELEASES in eagle3_nb/engines/{engine}/releases.py")


def newest_read(engine: str) -> str:
    """The newest release whose code the kit has read (Engine.read), else the last release."""
    read = _literal_call_keyword(os.path.join(ENGINES_DIR, engine, "__init__.py"), "read")
    return read[0] if read else kit_releases(engine)[-1][0]


# ---------------------------------------------------------------- wheels and the scratch repository

def python_for_tools() -> str:
    dev = os.path.join(ROOT, ".venv", "bin", "python")
    return dev if os.path.exists(dev) else sys.executable


def find_wheel(cache: str, engine: str, version: str) -> str | None:
    found = sorted(glob.glob(os.path.join(cache, f"{engine}-{version}-*.whl")))
    return found[0] if found else None


def download_wheel(cache: str, engine: str, version: str) -> str:
    wheel = find_wheel(cache, engine, version)
    if wheel:
        return wheel
    os.makedirs(cache, exist_ok=True)
    cmd = [python_for_tools(), "-m", "pip", "download", f"{engine}=={version}", "--no-deps",
           "--only-binary", ":all:", "--quiet", "-d", cache]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheel = find_wheel(cache, engine, version)
    if proc.returncode or wheel is None:
        tail = (proc.stderr.strip().splitlines() or ["no wheel"])[-1]
        raise IntakeError(f"pip download {engine}=={version} failed: {tail[:200]}")
    return wheel


def build_scratch(git_dir: str, engine: str, base_wheel: str, base: str, new_wheel: str, new: str) -> None:
    """A fresh bare repository: the base wheel as a first commit, the new one on top of it."""
    if os.path.exists(git_dir):
        shutil.rmtree(git_dir)
    subprocess.run(["git", "init", "-q", "--bare", git_dir], check=True)
    es.graft_wheel(git_dir, engine, base_wheel, "v" + base, None, root=True)
    es.graft_wheel(git_dir, engine, new_wheel, "v" + new, "v" + base)


def commit_date(git_dir: str, tag: str) -> str:
    return es.Repo(git_dir).commit_info(tag)[1]


# ---------------------------------------------------------------- definitions, on the AST

def definitions(source: str) -> dict[str, tuple[str, str]]:
    """Qualified name -> (AST dump without positions or docstring, source text) of every
    function and class; a class's own entry is its header and non-method statements, and
    "<module>" holds the top-level statements that define nothing (imports, constants)."""
    try:
        tree = ast.parse(source.removeprefix("\ufeff"))
    except SyntaxError:
        return {n: (t, t) for n, t in es.extract_functions_by_regex(source).items()}
    lines = source.splitlines()
    found: dict[str, tuple[str, str]] = {}
    rest = _collect(tree.body, "", lines, found)
    if rest:
        found["<module>"] = ("\n".join(rest), "\n".join(rest))
    return found


def _collect(body: list[ast.stmt], prefix: str, lines: list[str], found: dict) -> list[str]:
    """Add the definitions in BODY to FOUND; return the dumps of the other statements."""
    rest = []
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _add(found, prefix + node.name, _dump(node), lines, node)
        elif isinstance(node, ast.ClassDef):
            inner = _collect(node.body, f"{prefix}{node.name}.", lines, found)
            header = ast.dump(ast.ClassDef(node.name, node.bases, node.keywords, [], node.decorator_list))
            _add(found, prefix + node.name, "\n".join([header] + inner), lines, node)
        elif isinstance(node, (ast.If, ast.Try)) and not prefix:
            rest += [ast.dump(node.test)] if isinstance(node, ast.If) else []
            for part in (node.body, node.orelse, getattr(node, "finalbody", []),
                         *[h.body for h in getattr(node, "handlers", [])]):
                rest += _collect(part, prefix, lines, found)
        elif not _is_docstring(node):
            rest.append(ast.dump(node))
    return rest


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _dump(node: ast.AST) -> str:
    if node.body and _is_docstring(node.body[0]):
        node = copy.copy(node)
        node.body = node.body[1:]
    return ast.dump(node)


def _add(found: dict, name: str, dump: str, lines: list[str], node: ast.AST) -> None:
    key, n = name, 2
    while key in found:  # defined twice (if/else branches): keep both, numbered
        key, n = f"{name}#{n}", n + 1
    text = "\n".join(lines[node.lineno - 1:node.end_lineno])
    found[key] = (dump, text)


def diff_definitions(old_source: str, new_source: str, focus: str | None = None) -> dict:
    """Added, removed and changed definitions (an AST difference, so formatting, comments and
    docstrings do not count); with FOCUS, only those whose change touches the regex, the rest
    counted in `outside_focus`."""
    old, new = definitions(old_source), definitions(new_source)
    pattern = re.compile(focus) if focus else None

    def keep(name: str, text: str) -> bool:
        return pattern is None or bool(pattern.search(name + "\n" + text))

    every = {"added": sorted(n for n in new if n not in old),
             "removed": sorted(n for n in old if n not in new),
             "changed": sorted(n for n in new if n in old and new[n][0] != old[n][0])}
    shown = {"added": [n for n in every["added"] if keep(n, new[n][1])],
             "removed": [n for n in every["removed"] if keep(n, old[n][1])],
             "changed": [n for n in every["changed"] if keep(n, es.changed_lines(old[n][1], new[n][1]))]}
    shown["outside_focus"] = sum(len(every[k]) - len(shown[k]) for k in every)
    return shown


# ---------------------------------------------------------------- the watched files

def watched_changes(git_dir: str, engine: str, old: str, new: str) -> list[dict]:
    """Every watched file that differs between the tags, with the watches that select it and
    its definition-level difference (a file whose changes all miss every focus is marked)."""
    survey = es.Survey(es.Repo(git_dir), es.ENGINES[engine])
    by_path: dict[str, dict] = {}
    for watch in survey.engine.watches:
        paths = survey.matching(old, watch.globs, watch.grep) | survey.matching(new, watch.globs, watch.grep)
        for status, old_path, new_path in survey.changed_paths(old, new, paths):
            entry = by_path.setdefault(new_path, {"path": new_path, "old_path": old_path, "status": status,
                                                  "watches": [], "focus": []})
            entry["watches"].append(watch.name)
            entry["focus"].append(watch.focus)
    for entry in by_path.values():
        focuses = entry.pop("focus")
        focus = None if None in focuses else "|".join(f"(?:{f})" for f in focuses)
        old_text = (survey.repo.show(old, entry["old_path"]) or "") if entry["status"] != "A" else ""
        new_text = (survey.repo.show(new, entry["path"]) or "") if entry["status"] != "D" else ""
        entry.update(diff_definitions(old_text, new_text, focus))
        entry["in_focus"] = entry["status"] != "M" or any(entry[k] for k in ("added", "removed", "changed"))
    return sorted(by_path.values(), key=lambda e: e["path"])


def capture_classes(git_dir: str, engine: str, tag: str) -> set[str]:
    """'Class (path)' for every class in the model folders that defines the capture hook or
    derives from the EAGLE-3 interface (platform-specific model files included)."""
    repo, rule = es.Repo(git_dir), es.ENGINES[engine].capture
    grep = "|".join([rf"def {m}\b" for m in rule.methods] + [rf"\b{b}\b" for b in rule.bases])
    found = set()
    for path in repo.grep_files(tag, grep, list(ct.ENGINES[engine].model_dirs)):
        if path.endswith(".py"):
            found |= {f"{name} ({path})" for name in es.capture_classes_in(repo.show(tag, path) or "", rule)}
    return found


def registry_architectures(git_dir: str, engine: str, tag: str) -> set[str]:
    """Every architecture name in the model registry (vLLM: all dicts of registry.py, draft
    models included); empty for an engine without a registry file."""
    registry = ct.ENGINES[engine].registry
    if not registry:
        return set()
    return set(ct.registry_map(es.Repo(git_dir).show(tag, registry) or "", None))


def fact_evidence(git_dir: str, engine: str, tag: str) -> dict[str, list[str]]:
    """For each engine fact of capture_table.py, the files its pattern matches at TAG."""
    repo = es.Repo(git_dir)
    return {p.name: sorted(repo.grep_files(tag, p.pattern, list(p.paths))) for p in ct.ENGINES[engine].probes}


# ---------------------------------------------------------------- profile-field markers

def marker_flips(git_dir: str, engine: str, old: str, new: str, changed: list[str]) -> dict:
    """release_fields.py's markers at both tags: the fields that flip, and the unflipped ones
    whose files changed. {"error": why} when the markers cannot run (the kit does not import)."""
    try:
        rf = load_tool("release_fields")
    except Exception as exc:  # the kit may be mid-refactor; the report says so and goes on
        return {"error": f"release_fields.py not loaded: {type(exc).__name__}: {str(exc)[:200]}"}
    repo = rf.GitRepo(git_dir)
    try:
        rows = rf.evaluate(repo, rf.MARKERS[engine], [old, new])
    finally:
        repo.close()
    markers = {m.field: m for m in rf.MARKERS[engine]}
    flips = [{"field": c.field, "old": c.old, "new": c.new, "why": markers[c.field].why,
              "cite": markers[c.field].cite, "tracked": markers[c.field].tracked,
              "files": _marker_files(markers[c.field], changed)} for c in rf.change_points(rows)]
    flipped = {f["field"] for f in flips}
    touched = [m.field for m in rf.MARKERS[engine] if m.field not in flipped and _marker_files(m, changed)]
    unmarkable = [{"field": u.field, "why": u.why} for u in rf.UNMARKABLE[engine]]
    return {"flips": flips, "touched": touched, "unmarkable": unmarkable}


def _marker_files(marker, changed: list[str]) -> list[str]:
    return sorted({path for probe in marker.probes for path in changed
                   if path == probe.path or fnmatch.fnmatchcase(path, probe.path)})


# ---------------------------------------------------------------- merging the capture table

def range_at(ranges: list[dict], release: str) -> dict | None:
    key = version_key(release)
    for entry in ranges:
        if version_key(entry["from"]) <= key and (entry["until"] is None or key < version_key(entry["until"])):
            return entry
    return None


def state(entry: dict | None) -> dict:
    """The verdict of a range, comparable across tables (absent: not served)."""
    entry = entry or NOT_SERVED
    return {k: entry.get(k) for k in STATE_KEYS}


def _new_range(entry: dict | None, start: str) -> dict:
    body = {k: v for k, v in (entry or NOT_SERVED).items() if k not in ("from", "until")}
    return {"from": start, "until": None, **body}


def capture_disagreements(kit: dict, scratch: dict, base: str) -> list[str]:
    """Where the scratch table at BASE differs from what the kit's table says for BASE."""
    out = []
    for key in ("engine", "hook", "rules", "fields"):
        if kit.get(key) != scratch.get(key):
            out.append(f"table field `{key}` differs (capture_table.py changed since the table was made)")
    for arch in sorted(set(kit["architectures"]) | set(scratch["architectures"])):
        found = state(range_at(scratch["architectures"].get(arch, []), base))
        if arch in kit["architectures"]:
            said = state(range_at(kit["architectures"][arch], base))
            if said != found:
                out.append(f"{arch} at {base}: kit says {_brief(said)}; the {base} wheel gives {_brief(found)}")
        elif found["status"] != "not_served" and _kept(arch, found):
            out.append(f"{arch} at {base}: not in the kit's table; the {base} wheel gives {_brief(found)}")
    kit_facts = {f["fact"]: f for f in kit["engine_facts"]}
    for fact in scratch["engine_facts"]:
        if fact["fact"] not in kit_facts:
            out.append(f"engine fact {fact['fact']}: not in the kit's table (new in capture_table.py)")
            continue
        said, found = range_at(kit_facts[fact["fact"]]["ranges"], base), range_at(fact["ranges"], base)
        if (said or {}).get("value") != (found or {}).get("value"):
            out.append(f"engine fact {fact['fact']} at {base}: kit says {(said or {}).get('value')}; "
                       f"the {base} wheel gives {(found or {}).get('value')}")
    return out


def _kept(arch: str, verdict: dict) -> bool:
    """capture_table.py's filter: the families served with EAGLE-3, or a class that captures."""
    return bool(ct.FAMILIES.match(arch)) or verdict["status"] == "capture"


def _brief(verdict: dict) -> str:
    parts = [verdict["status"]] + [f"{k}={verdict[k]}" for k in STATE_KEYS[1:] if verdict.get(k) is not None]
    return ", ".join(parts)


def merge_capture(kit: dict, scratch: dict, base: str, new: str, intake: str) -> tuple[dict, dict]:
    """The kit's table extended to NEW with the scratch table's verdicts at NEW.

    Returns (merged table, delta): delta lists new architectures, changed ones, engine-fact
    flips and the rows the scratch table disagrees with at BASE."""
    if new in kit["releases"] or version_key(new) <= version_key(kit["releases"][-1]):
        raise IntakeError(f"{kit['engine']} {new} is not newer than the table's last release "
                          f"{kit['releases'][-1]}")
    merged = copy.deepcopy(kit)
    delta = {"new": [], "changed": [], "flips": [], "disagreements": capture_disagreements(kit, scratch, base)}
    for arch in sorted(set(kit["architectures"]) | set(scratch["architectures"])):
        at_new = range_at(scratch["architectures"].get(arch, []), new)
        if arch in kit["architectures"]:
            _extend(merged["architectures"][arch], at_new, new, arch, delta["changed"])
        elif _kept(arch, state(at_new)) and state(at_new)["status"] != "not_served":
            at_base = range_at(scratch["architectures"][arch], base)
            merged["architectures"][arch] = _first_ranges(kit["releases"][0], base, new, at_base, at_new)
            delta["new"].append((arch, state(at_new), state(at_base)))
    merged["architectures"] = dict(sorted(merged["architectures"].items()))
    scratch_facts = {f["fact"]: f for f in scratch["engine_facts"]}
    for fact in merged["engine_facts"]:
        found = scratch_facts.get(fact["fact"])
        at_new = range_at(found["ranges"], new) if found else None
        if at_new is not None and at_new["value"] != fact["ranges"][-1]["value"]:
            delta["flips"].append((fact["fact"], fact["ranges"][-1]["value"], at_new["value"]))
            fact["ranges"][-1]["until"] = new
            fact["ranges"].append({"from": new, "until": None, "value": at_new["value"]})
    _stamp_capture(merged, scratch, base, new, intake)
    return merged, delta


def _extend(ranges: list[dict], at_new: dict | None, new: str, arch: str, changed: list) -> None:
    last = ranges[-1]
    if last["until"] is not None:
        raise IntakeError(f"{arch}: its last range is closed ({last['from']}..{last['until']})")
    if state(last) == state(at_new):
        return
    changed.append((arch, state(last), state(at_new)))
    last["until"] = new
    ranges.append(_new_range(at_new, new))


def _first_ranges(first: str, base: str, new: str, at_base: dict | None, at_new: dict) -> list[dict]:
    """A class new to the table: not served before; served at BASE (read from its wheel only)
    it keeps that verdict from BASE, the releases before it were not read."""
    if state(at_base)["status"] == "not_served":
        return [{**_new_range(None, first), "until": new}, _new_range(at_new, new)]
    unread = {**_new_range(None, first), "until": base,
              "note": f"releases before {base} not read (added by a release intake from wheels)"}
    return [unread, {**_new_range(at_base, base), "until": new}, _new_range(at_new, new)]


def _stamp_capture(merged: dict, scratch: dict, base: str, new: str, intake: str) -> None:
    merged["releases"] = merged["releases"] + [new]
    source = merged["source"]
    source["tags"] = re.sub(r"\.\.v[^ ]+", f"..v{new}", source["tags"], count=1)
    if scratch["source"]["grafted_from_wheels"] and new not in source.get("grafted_from_wheels", []):
        source["grafted_from_wheels"] = source.get("grafted_from_wheels", []) + [new]
    source["release_intake"] = source.get("release_intake", []) + [intake]
    known = {n.partition(": ")[2] for n in merged.get("resolution_notes", [])}
    fresh = [n.partition(": ")[2] for n in scratch.get("resolution_notes", [])]
    merged["resolution_notes"] = merged.get("resolution_notes", []) + [
        f"from {new}: {text}" for text in dict.fromkeys(fresh) if text not in known]


# ---------------------------------------------------------------- merging the drafting table

def drafting_disagreements(kit: dict, found: dict, base: str) -> list[str]:
    said = kit["releases"].get(base)
    if said is None:
        return [f"drafting: {base} is not in the kit's table"]
    compared = dd._COMPARED[kit["engine"]] + (("tree_parts",) if "tree_parts" in said else ())
    return [f"drafting `{k}` at {base}: kit says {said[k]!r}; the {base} wheel gives {found.get(k)!r}"
            for k in compared if said.get(k) != found.get(k)]


def merge_drafting(kit: dict, found_base: dict, found_new: dict, base: str, new: str,
                   intake: str) -> tuple[dict, dict]:
    """The kit's drafting table with NEW's rule appended (and its change entry, if any)."""
    last = next(reversed(kit["releases"]))
    if new in kit["releases"] or version_key(new) <= version_key(last):
        raise IntakeError(f"drafting: {new} is not newer than the table's last release {last}")
    merged = copy.deepcopy(kit)
    step = dd.changes(kit["engine"], {last: kit["releases"][last], new: found_new})[1:]
    merged["releases"][new] = found_new
    merged["changes"] += step
    source = merged["source"]
    source["releases"] = re.sub(r"\.\.[^ ]+", f"..{new}", source["releases"], count=1)
    if not found_new["read"].startswith("git tag"):
        source["read_from_wheels"] = source.get("read_from_wheels", []) + [new]
    source["release_intake"] = source.get("release_intake", []) + [intake]
    return merged, {"changed": step[0]["changed"] if step else [],
                    "disagreements": drafting_disagreements(kit, found_base, base)}


# ---------------------------------------------------------------- writing

def write_json_atomic(data: dict, path: str, ascii_only: bool) -> str:
    """The kit's own format (capture_table.py: indent 1, UTF-8; drafting_defaults.py: indent 1,
    ASCII), through a temp file and a rename."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1, ensure_ascii=ascii_only)
        handle.write("\n")
    os.replace(tmp, path)
    return path


def write_doc_atomic(tables: list[dict], path: str) -> str:
    tmp = f"{path}.tmp{os.getpid()}"
    ct.write_doc(tables, tmp)
    os.replace(tmp, path)
    return path


def kit_table(engine: str, name: str) -> dict:
    with open(os.path.join(ENGINES_DIR, engine, "data", name), encoding="utf-8") as handle:
        return json.load(handle)


def all_capture_tables(engine: str, merged: dict) -> list[dict]:
    """Every engine's shipped capture table, ENGINE's replaced by the merged one."""
    return [merged if t["engine"] == engine else t for t in ct.load_tables()]


# ---------------------------------------------------------------- side environment and probe

def build_env(engine: str, version: str) -> dict:
    start = time.time()
    proc = subprocess.run(["bash", os.path.join(TOOLS, "engine_env.sh"), engine, version],
                          capture_output=True, text=True, cwd=ROOT)
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip() and "WARNING" not in ln]
    return {"ok": proc.returncode == 0, "seconds": round(time.time() - start),
            "tail": lines[-1][:300] if lines else ""}


def nearest_profile(engine: str, version: str) -> tuple[str | None, str]:
    """(the profile that answers for ENGINE==VERSION, its evidence), or (None, why not)."""
    code = ("from eagle3_nb.engines import resolve_engines; "
            f"p = resolve_engines(['{engine}=={version}'])[0]; print(p.based_on or p.version); print(p.evidence)")
    proc = subprocess.run([python_for_tools(), "-c", code], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return None, f"the kit does not import here ({tail[:200]})"
    name, _, evidence = proc.stdout.strip().partition("\n")
    return name, evidence


def run_probe(engine: str, version: str, out: str) -> dict:
    """tools/engine_truth.py for ENGINE==VERSION: the Agreement and Differences sections."""
    start = time.time()
    proc = subprocess.run([python_for_tools(), os.path.join(TOOLS, "engine_truth.py"),
                           "--engines", f"{engine}=={version}", "--out", out],
                          capture_output=True, text=True, cwd=ROOT)
    if proc.returncode or not os.path.exists(out):
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {"ok": False, "reason": f"engine_truth.py failed: {tail[:300]}"}
    with open(out, encoding="utf-8") as handle:
        text = handle.read()
    sections = re.split(r"^## ", text, flags=re.M)
    keep = {s.split("\n", 1)[0]: s.split("\n", 1)[1].strip() for s in sections[1:]}
    return {"ok": True, "seconds": round(time.time() - start), "setup": keep.get("Set-up", ""),
            "agreement": keep.get("Agreement", ""), "differences": keep.get("Differences", "")}


# ---------------------------------------------------------------- the report

def render_report(r: dict) -> str:
    """The intake as Markdown: the prominent lines first, the detail after."""
    engine, new, base = r["engine"], r["version"], r["base"]
    out = [f"# Release intake: {engine} {new} (against {base}, the newest release the kit has read)", "",
           f"Made by `{r['command']}` on {r['date']}. It proposes; a person decides and writes the "
           f"profile (docs/adding-a-release.md). Nothing here edits profiles.py or releases.py.", ""]
    out += _summary(r) + _watched(r) + _fields(r) + _capture(r) + _drafting(r) + _probe(r) + _next(r)
    return "\n".join(out).rstrip() + "\n"


def _summary(r: dict) -> list[str]:
    cap, draft = r["capture"], r["drafting"]
    disagree = cap["disagreements"] + draft["disagreements"]
    out = ["## Key lines", ""]
    out += [f"- **engine fact flips at {r['version']}:** " +
            ("; ".join(f"`{f}` {o} → {n}" for f, o, n in cap["flips"]) or "none")]
    out += [f"- **engine fact evidence moved** (value kept, but the files it rests on changed: read "
            f"them): `{name}`: " + _moved(m) for name, m in r["fact_evidence"].items() if m["gone"] or m["new"]]
    out += [f"- capture table: {len(cap['new'])} new architectures, {len(cap['changed'])} changed "
            "(details below)",
            "- drafting defaults: " + ("; ".join(draft["changed"]) or "no change"),
            f"- check against the kit's rows for {r['base']}: " +
            ("agree" if not disagree else f"**{len(disagree)} disagreements** (listed below; --write is refused)")]
    flips = r["markers"].get("flips")
    out += ["- profile-field markers that flip: " + (", ".join(f"`{f['field']}`" for f in flips) or "none")
            if flips is not None else f"- profile-field markers: not run ({r['markers'].get('error')})"]
    out += [f"- probe: {_probe_line(r['probe'])}",
            f"- proposed releases.py line: `(\"{r['version']}\", \"{r['wheel_date']}\")` (wheel build date)", ""]
    if "reproduced" in r:
        out += [f"- {r['version']} is in the kit's tables already (nothing merged): rebuilt from "
                "the wheels they " + ("**differ**:" if r["reproduced"] else "are the same")]
        out += [f"  - {d}" for d in r["reproduced"]]
    if disagree:
        out += ["### Disagreements with the kit's tables", ""] + [f"- {d}" for d in disagree] + [""]
    return out


def _moved(m: dict) -> str:
    kept = sorted(set(m["old"]) - set(m["gone"]))
    parts = [f"no longer in {', '.join(m['gone'])}" if m["gone"] else "",
             f"now also in {', '.join(m['new'])}" if m["new"] else "",
             f"still matched in {', '.join(kept)}" if kept else "no longer matched anywhere"]
    return "; ".join(p for p in parts if p)


def _probe_line(probe: dict) -> str:
    if not probe.get("ok"):
        return f"skipped: {probe.get('reason')}"
    cells = [ln.rstrip(" |").rsplit("| ", 1)[-1] for ln in probe["agreement"].splitlines()
             if ln.startswith("| ") and "variant" not in ln]
    line = (f"{cells.count('agree')} of {len(cells)} bundled drafts agree with the nearest profile "
            f"({probe.get('profile')}), {sum('difference' in c for c in cells)} differ")
    errors = re.findall(r"probe error: (.*)", probe["differences"])
    if errors:
        line += f", **{len(errors)} probe errors** (first: `{errors[0][:160]}`)"
    return line


def _watched(r: dict) -> list[str]:
    out = ["## Watched files that changed", "",
           "Definitions compared on the AST (formatting, comments and docstrings do not count); for a "
           "watch with a focus only definitions whose change touches it are named.", ""]
    for f in r["watched"]:
        if not f["in_focus"]:
            continue
        word = {"A": "added", "D": "deleted", "M": "modified", "R": "renamed"}.get(f["status"], f["status"])
        if f["old_path"] != f["path"]:
            word += f" from `{f['old_path']}`"
        parts = [f"{k}: {', '.join(f[k])}" for k in ("added", "removed", "changed") if f[k]]
        extra = f" (+{f['outside_focus']} outside the focus)" if f["outside_focus"] else ""
        out.append(f"- `{f['path']}` ({word}; {', '.join(f['watches'])}) — " + ("; ".join(parts) or "no definition")
                   + extra)
    quiet = [f["path"] for f in r["watched"] if not f["in_focus"]]
    if quiet:
        out += ["", f"Also modified, outside every focus: {', '.join(f'`{p}`' for p in quiet)}"]
    return out + [""]


def _fields(r: dict) -> list[str]:
    out = ["## Profile fields that need a human decision", ""]
    markers = r["markers"]
    if "error" in markers:
        out += [f"Markers not run: {markers['error']}", ""]
    else:
        out += ["Markers (tools/release_fields.py) that flip; a marker whose file was deleted or moved "
                "flips too: read the code before believing it.", ""]
        for f in markers["flips"]:
            files = f" — files changed: {', '.join(f['files'])}" if f["files"] else ""
            out.append(f"- **{f['field']}**: {f['old']} → {f['new']} ({f['why']}; last cited: {f['cite']}){files}")
        out += ["" if markers["flips"] else "- none", ""]
        if markers["touched"]:
            out += ["Markers unchanged although their files changed: " + ", ".join(f"`{t}`" for t in markers["touched"]), ""]
        out += ["Never markable, read by hand when their files changed: " +
                "; ".join(f"{u['field']}" for u in markers["unmarkable"]), ""]
    watches = sorted({w for f in r["watched"] if f["in_focus"] for w in f["watches"]})
    out += ["Fields the changed watches can move (read them):", ""]
    out += [f"- {w}: {WATCH_FIELDS.get(r['engine'], {}).get(w, '(no map)')}" for w in watches]
    return out + [""]


def _capture(r: dict) -> list[str]:
    cap = r["capture"]
    out = ["## Target architectures (capture table)", ""]
    out += [f"New at {r['version']}:", ""] + [
        f"- {a}: {_brief(v)}" + (f" (at {r['base']}: {_brief(b)})" if b["status"] != "not_served" else "")
        for a, v, b in cap["new"]] + (["- none"] if not cap["new"] else [])
    out += ["", f"Changed at {r['version']} (old range closed, new one opened):", ""] + [
        f"- {a}: {_brief(o)} → {_brief(n)}" for a, o, n in cap["changed"]] + (["- none"] if not cap["changed"] else [])
    reg = r["registry"]
    out += ["", f"Registry architectures (every dict, draft models included): added {len(reg['added'])}, "
            f"removed {len(reg['removed'])}", ""]
    out += [f"- removed: {', '.join(reg['removed']) or 'none'}", f"- added: {', '.join(reg['added']) or 'none'}"]
    cls = r["capture_classes"]
    out += ["", "Classes that define the capture hook or derive from the EAGLE-3 interface, per file "
            "(platform model files included; the table follows one import per architecture):", "",
            f"- added: {', '.join(cls['added']) or 'none'}", f"- removed: {', '.join(cls['removed']) or 'none'}"]
    return out + [""]


def _drafting(r: dict) -> list[str]:
    d = r["drafting"]
    out = ["## Drafting defaults", "", f"- {r['version']}: " + ("; ".join(d["changed"]) or "same rule as " + r["base"])]
    return out + [f"- rule at {r['version']}: `{json.dumps(d['rule'], sort_keys=True)}`", ""]


def _probe(r: dict) -> list[str]:
    env, probe = r["env"], r["probe"]
    out = ["## Side environment and probe", "",
           "- side environment: " + (f"ok ({env['tail']})" if env.get("ok") else f"failed or skipped: {env.get('tail') or env.get('reason')}")]
    if probe.get("profile") or probe.get("evidence"):
        out += [f"- nearest profile: {probe.get('profile')} ({probe.get('evidence')})"]
    if not probe.get("ok"):
        return out + [f"- probe skipped: {probe.get('reason')}", ""]
    return out + ["", probe["agreement"], "", "Differences from the nearest profile:", "", probe["differences"], ""]


def _next(r: dict) -> list[str]:
    engine = r["engine"]
    return ["## What a person does next", "",
            f"1. Read every flipped marker, moved fact and changed definition above in the {r['version']} code "
            f"(.cache/intake/{engine}-{r['version']}/scratch.git, tags v{r['base']} and v{r['version']}).",
            f"2. Extend the newest range in eagle3_nb/engines/{engine}/profiles.py (no field changed) or add a "
            f"range; every changed field cites repo, file, function and release.",
            f"3. Add `(\"{r['version']}\", \"{r['wheel_date']}\")` to eagle3_nb/engines/{engine}/releases.py and "
            f"move the Engine record's `read` in eagle3_nb/engines/{engine}/__init__.py.",
            f"4. Staged tables: {r['staging']}; `--write` replaces the kit's ({'done' if r['written'] else 'not done'}).",
            "5. `make test`.", ""]


# ---------------------------------------------------------------- the whole intake

def taken_in(engine: str, version: str) -> str | None:
    """The release before VERSION in the kit's tables when VERSION is already taken in (the
    intake then re-reads it and checks the tables), else None."""
    releases = kit_table(engine, "capture.json")["releases"]
    if version not in releases or releases.index(version) == 0:
        return None
    return releases[releases.index(version) - 1]


def intake(engine: str, version: str, base: str | None, cache: str, staging: str, report_path: str,
           write: bool, skip_env: bool, skip_probe: bool, log=print) -> tuple[dict, int]:
    before = taken_in(engine, version)
    if before is not None and write:
        raise IntakeError(f"{engine} {version} is in the kit's tables already: run without --write "
                          "to check them against its wheel")
    base = base or before or newest_read(engine)
    if version_key(version) <= version_key(base):
        raise IntakeError(f"{engine} {version} is not newer than {base}, the newest release read")
    command = f"python tools/release_intake.py {engine} {version}" + (" --write" if write else "")
    log(f"wheels: {engine} {base} and {version} into {cache}")
    wheels = download_wheel(cache, engine, base), download_wheel(cache, engine, version)
    git_dir = os.path.join(staging, "scratch.git")
    build_scratch(git_dir, engine, wheels[0], base, wheels[1], version)
    log("diffing the watched files")
    report = {"engine": engine, "version": version, "base": base, "command": command,
              "date": time.strftime("%Y-%m-%d"), "wheels": list(wheels), "staging": staging,
              "wheel_date": commit_date(git_dir, "v" + version), "written": False,
              **code_changes(git_dir, engine, "v" + base, "v" + version)}
    log("capture table and drafting defaults at both releases")
    capture, drafting = stage_tables(git_dir, engine, base, version, wheels, staging, command, report, log)
    report["env"], report["probe"] = side_checks(engine, version, staging, skip_env, skip_probe, log)
    status = finish(report, capture, drafting, write, report_path, log)
    return report, status


def code_changes(git_dir: str, engine: str, old: str, new: str) -> dict:
    """What the report says about the code: watched files, fact evidence, capture classes,
    registry names, profile-field markers."""
    watched = watched_changes(git_dir, engine, old, new)
    before, after = fact_evidence(git_dir, engine, old), fact_evidence(git_dir, engine, new)
    classes = [capture_classes(git_dir, engine, t) for t in (old, new)]
    registry = [registry_architectures(git_dir, engine, t) for t in (old, new)]
    touched = [f["path"] for f in watched] + [f["old_path"] for f in watched]
    return {"watched": watched,
            "fact_evidence": {name: _evidence_change(before[name], after[name]) for name in before},
            "capture_classes": _added_removed(*classes), "registry": _added_removed(*registry),
            "markers": marker_flips(git_dir, engine, old, new, touched)}


def capture_as_of(table: dict, release: str) -> dict:
    """The capture table as an intake left it when RELEASE was its newest release."""
    out, key = copy.deepcopy(table), version_key(release)
    out["releases"] = [r for r in out["releases"] if version_key(r) <= key]
    for arch in list(out["architectures"]):
        ranges = _ranges_as_of(out["architectures"][arch], key)
        if ranges:
            out["architectures"][arch] = ranges
        else:
            del out["architectures"][arch]
    for fact in out["engine_facts"]:
        fact["ranges"] = _ranges_as_of(fact["ranges"], key)
    return out


def _ranges_as_of(ranges: list[dict], key: tuple) -> list[dict]:
    kept = [r for r in ranges if version_key(r["from"]) <= key]
    if kept and kept[-1]["until"] is not None and version_key(kept[-1]["until"]) > key:
        kept[-1]["until"] = None
    return kept


def drafting_as_of(table: dict, release: str) -> dict:
    out, key = copy.deepcopy(table), version_key(release)
    out["releases"] = {r: rule for r, rule in out["releases"].items() if version_key(r) <= key}
    out["changes"] = [c for c in out["changes"] if version_key(c["release"]) <= key]
    return out


def reproduction_differences(capture: dict, drafting: dict, shipped_capture: dict,
                             shipped_drafting: dict, release: str) -> list[str]:
    """Where the tables rebuilt from the wheels differ from the kit's, up to RELEASE."""
    mine, theirs = capture_as_of(capture, release), capture_as_of(shipped_capture, release)
    out = [f"capture `{arch}`: rebuilt {mine['architectures'].get(arch)}, shipped "
           f"{theirs['architectures'].get(arch)}"
           for arch in sorted(set(mine["architectures"]) | set(theirs["architectures"]))
           if _comparable(mine["architectures"].get(arch)) !=
           _comparable(theirs["architectures"].get(arch))]
    if mine["engine_facts"] != theirs["engine_facts"]:
        out.append("capture engine_facts differ")
    rebuilt, kept = drafting_as_of(drafting, release), drafting_as_of(shipped_drafting, release)
    out += [f"drafting `{r}` differs" for r in sorted(set(rebuilt["releases"]) | set(kept["releases"]))
            if rebuilt["releases"].get(r, {}) | {"read": ""} != kept["releases"].get(r, {}) | {"read": ""}]
    return out


def _comparable(ranges: list[dict] | None) -> list[dict] | None:
    """Ranges without the provenance an intake adds (its note, the commit that added a class)."""
    if ranges is None:
        return None
    return [{k: v for k, v in r.items() if k not in ("note", "added_by")} for r in ranges]


def _added_removed(old: set[str], new: set[str]) -> dict:
    return {"added": sorted(new - old), "removed": sorted(old - new)}


def stage_tables(git_dir: str, engine: str, base: str, version: str, wheels: tuple[str, str], staging: str,
                 command: str, report: dict, log) -> tuple[dict, dict]:
    """Both merged tables (and the capture page), written to STAGING; their deltas go to REPORT."""
    scratch = ct.build_table(git_dir, engine, "v" + base, "v" + version, keep_all=True, command=command)
    kit_capture, kit_drafting = kit_table(engine, "capture.json"), kit_table(engine, "drafting.json")
    check = version in kit_capture["releases"]
    if check:  # re-reading a release taken in: merge onto the tables as they were before it
        kit_capture, kit_drafting = capture_as_of(kit_capture, base), drafting_as_of(kit_drafting, base)
    capture, report["capture"] = merge_capture(kit_capture, scratch, base, version, command)
    rules = [dd.ANALYZE[engine](dd.WheelCode(w)).as_json() for w in wheels]
    drafting, report["drafting"] = merge_drafting(kit_drafting, rules[0], rules[1], base,
                                                  version, command)
    if check:
        shipped = kit_table(engine, "capture.json"), kit_table(engine, "drafting.json")
        report["reproduced"] = reproduction_differences(capture, drafting, *shipped, version)
    report["drafting"]["rule"] = rules[1]
    staged = [write_json_atomic(capture, os.path.join(staging, "capture.json"), False),
              write_json_atomic(drafting, os.path.join(staging, "drafting.json"), True),
              write_doc_atomic(all_capture_tables(engine, capture), os.path.join(staging, "target-capture.md"))]
    log("staged: " + ", ".join(staged))
    return capture, drafting


def finish(report: dict, capture: dict, drafting: dict, write: bool, report_path: str, log) -> int:
    """--write when nothing disagrees; the report and its data. The exit status."""
    status = 1 if report.get("reproduced") else 0
    if write:
        blocked = report["capture"]["disagreements"] + report["drafting"]["disagreements"]
        if blocked:
            log(f"--write refused: {len(blocked)} disagreements with the kit's rows for {report['base']}")
            status = 1
        else:
            write_kit(report["engine"], capture, drafting, log)
            report["written"] = True
    os.makedirs(os.path.dirname(report_path), exist_ok=True)
    with open(report_path, "w", encoding="utf-8") as handle:
        handle.write(render_report(report))
    with open(os.path.join(report["staging"], "intake.json"), "w", encoding="utf-8") as handle:
        json.dump(report, handle, indent=1)
    return status


def _evidence_change(old: list[str], new: list[str]) -> dict:
    return {"old": old, "new": sorted(set(new) - set(old)), "gone": sorted(set(old) - set(new))}


def side_checks(engine: str, version: str, staging: str, skip_env: bool, skip_probe: bool, log) -> tuple[dict, dict]:
    if skip_env:
        return {"ok": False, "reason": "--skip-env"}, {"ok": False, "reason": "--skip-env"}
    log(f"side environment {engine} {version} (tools/engine_env.sh)")
    env = build_env(engine, version)
    profile, evidence = nearest_profile(engine, version)
    probe = {"ok": False, "profile": profile, "evidence": evidence}
    if skip_probe:
        probe["reason"] = "--skip-probe"
    elif not env["ok"]:
        probe["reason"] = f"no side environment ({env['tail']})"
    elif profile is None:
        probe["reason"] = evidence
    else:
        log("probing every bundled sample draft (tools/engine_truth.py)")
        probe.update(run_probe(engine, version, os.path.join(staging, f"engine-truth-{version}.md")))
    return env, probe


def write_kit(engine: str, capture: dict, drafting: dict, log) -> None:
    paths = [write_json_atomic(capture, ct.data_path(engine), False),
             write_json_atomic(drafting, os.path.join(ENGINES_DIR, engine, "data", "drafting.json"), True),
             write_doc_atomic(all_capture_tables(engine, capture), DOC_PATH)]
    log("wrote " + ", ".join(os.path.relpath(p, ROOT) for p in paths))


# ---------------------------------------------------------------- command line

def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("engine", choices=sorted(ct.ENGINES))
    parser.add_argument("version", help="the new release, e.g. 0.34.0")
    parser.add_argument("--base", help="the release to compare with (default: the newest the kit has read)")
    parser.add_argument("--cache", default=os.path.join(ROOT, ".cache", "wheels"), help="wheel cache")
    parser.add_argument("--staging", help="where the merged tables go (default: .cache/intake/ENGINE-VERSION/)")
    parser.add_argument("--report", help="the report (default: .cache/intake/ENGINE-VERSION.md)")
    parser.add_argument("--write", action="store_true",
                        help="replace eagle3_nb/engines/ENGINE/data/{capture,drafting}.json and docs/target-capture.md")
    parser.add_argument("--skip-env", action="store_true", help="no side environment, no probe")
    parser.add_argument("--skip-probe", action="store_true", help="build the side environment, do not probe")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    where = os.path.join(ROOT, ".cache", "intake", f"{args.engine}-{args.version}")
    staging, report = args.staging or where, args.report or where + ".md"
    log = lambda line: print(f"release_intake: {line}", file=sys.stderr, flush=True)
    try:
        _, status = intake(args.engine, args.version, args.base, args.cache, staging, report, args.write,
                           args.skip_env, args.skip_probe, log)
    except (IntakeError, es.SurveyError, dd.ParseFailure) as error:
        print(f"release_intake: error: {error}", file=sys.stderr)
        return 2
    print(report)
    return status


if __name__ == "__main__":
    sys.exit(main())
