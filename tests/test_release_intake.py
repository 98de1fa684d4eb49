"""tools/release_intake.py, offline: the AST definition diff, the scratch repository built from
two tiny wheels, the capture and drafting table merges (synthetic tables and the shipped JSON),
the kit-format writer and the report."""

import importlib.util
import json
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ENGINES = REPO / "eagle3_nb" / "engines"

_spec = importlib.util.spec_from_file_location("release_intake", REPO / "tools" / "release_intake.py")
ri = importlib.util.module_from_spec(_spec)
sys.modules["release_intake"] = ri
_spec.loader.exec_module(ri)


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def shipped(engine: str, name: str) -> dict:
    return json.loads((ENGINES / engine / "data" / name).read_text(encoding="utf-8"))


# ---------------------------------------------------------------- the definition diff

OLD = src('''
    import os
    LIMIT = 3

    def helper(x):
        """Doc."""
        return x + 1

    class Loader(Base):
        kind = "a"

        def load(self, name):
            # comment
            return self.model[name]

        def gone(self):
            pass
''')


def test_formatting_comments_and_docstrings_are_no_change():
    new = src('''
        import os
        LIMIT = 3

        def helper(x):
            """Another docstring."""
            return (x +
                    1)  # same expression

        class Loader(Base):
            """Now documented."""
            kind = "a"

            def load(self, name):
                return self.model[name]

            def gone(self):
                pass
    ''')
    assert ri.diff_definitions(OLD, new) == {"added": [], "removed": [], "changed": [], "outside_focus": 0}


def test_added_removed_changed_definitions_by_qualified_name():
    new = src('''
        import os
        import re
        LIMIT = 3

        def helper(x):
            return x + 2

        class Loader(Base, Mixin):
            kind = "a"

            def load(self, name):
                return self.model[name]

            def fresh(self):
                return 1
    ''')
    diff = ri.diff_definitions(OLD, new)
    assert diff["added"] == ["Loader.fresh"]
    assert diff["removed"] == ["Loader.gone"]
    # the class entry is its header (a new base) and its own statements; <module> the imports
    assert diff["changed"] == ["<module>", "Loader", "helper"]


def test_a_focus_names_only_the_definitions_whose_change_touches_it():
    new = OLD.replace("return x + 1", "return x + 2").replace("self.model[name]", "self.aux_hidden[name]")
    diff = ri.diff_definitions(OLD, new, focus=r"aux_hidden")
    assert diff["changed"] == ["Loader.load"] and diff["outside_focus"] == 1


def test_a_file_python_cannot_parse_is_compared_by_its_blocks():
    old = "def f(x):\n    return x +\n"
    new = "def f(x):\n    return x -\n"
    assert ri.diff_definitions(old, new)["changed"] == ["f"]


# ---------------------------------------------------------------- the scratch repository

def wheel(path: Path, files: dict[str, str]) -> str:
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return str(path)


def test_two_wheels_become_two_tags_and_their_watched_changes(tmp_path):
    draft = "vllm/model_executor/models/llama_eagle3.py"
    proposer = "vllm/v1/spec_decode/eagle.py"
    old = wheel(tmp_path / "vllm-1.0.0-py3-none-any.whl", {
        draft: "class Eagle3(Base):\n    def load_weights(self, w):\n        return w\n",
        proposer: "class EagleProposer:\n    def propose(self):\n        return 1\n",
        "vllm/unwatched.py": "X = 1\n"})
    new = wheel(tmp_path / "vllm-1.1.0-py3-none-any.whl", {
        draft: "class Eagle3(Base):\n    def load_weights(self, w):\n        return list(w)\n",
        "vllm/unwatched.py": "X = 2\n"})
    git_dir = str(tmp_path / "scratch.git")
    ri.build_scratch(git_dir, "vllm", old, "1.0.0", new, "1.1.0")
    changes = {c["path"]: c for c in ri.watched_changes(git_dir, "vllm", "v1.0.0", "v1.1.0")}
    assert set(changes) == {draft, proposer}
    assert changes[draft]["status"] == "M" and changes[draft]["changed"] == ["Eagle3.load_weights"]
    assert changes[draft]["watches"] == ["draft model"]
    assert changes[proposer]["status"] == "D"
    assert changes[proposer]["removed"] == ["EagleProposer", "EagleProposer.propose"]
    # built again from scratch, not on top of the first one
    ri.build_scratch(git_dir, "vllm", old, "1.0.0", new, "1.1.0")
    assert ri.es.release_tags(ri.es.Repo(git_dir)) == ["v1.0.0", "v1.1.0"]


# ---------------------------------------------------------------- the capture merge, synthetic

CAP = {"status": "capture", "rule": "as_is", "hook": "m.py A.set", "final_boundary": True}
NOCAP = {"status": "no_capture", "rule": None, "hook": None, "final_boundary": None}


def table(releases, architectures, facts=None):
    return {"engine": "vllm", "hook": "set", "rules": {}, "fields": {}, "releases": releases,
            "source": {"tags": f"v{releases[0]}..v{releases[-1]} (release tags only)",
                       "grafted_from_wheels": list(releases)},
            "engine_facts": [{"fact": name, "ranges": ranges} for name, ranges in (facts or {}).items()],
            "architectures": architectures, "resolution_notes": []}


def span(start, until, verdict, **extra):
    return {"from": start, "until": until, **verdict, **extra}


@pytest.fixture
def kit():
    return table(["1.0", "1.1"], {
        "LlamaForCausalLM": [span("1.0", None, CAP, added_by=[{"pr": 1}])],
        "Qwen3ForCausalLM": [span("1.0", "1.1", NOCAP), span("1.1", None, CAP)],
        "OldForCausalLM": [span("1.0", None, CAP)],
        "GemmaForCausalLM": [span("1.0", None, NOCAP)],
    }, {"honored": [{"from": "1.0", "until": None, "value": True}],
        "gated": [{"from": "1.0", "until": None, "value": False}]})


@pytest.fixture
def scratch():
    rule_b = {**CAP, "rule": "unknown"}
    return table(["1.1", "1.2"], {
        "LlamaForCausalLM": [span("1.1", None, CAP)],
        "Qwen3ForCausalLM": [span("1.1", "1.2", CAP), span("1.2", None, rule_b, added_by=[])],
        "OldForCausalLM": [span("1.1", "1.2", CAP), span("1.2", None, ri.NOT_SERVED)],
        "GemmaForCausalLM": [span("1.1", None, NOCAP)],
        "NewForCausalLM": [span("1.1", "1.2", ri.NOT_SERVED), span("1.2", None, CAP, added_by=[])],
        "WasServedForCausalLM": [span("1.1", "1.2", NOCAP), span("1.2", None, CAP, added_by=[])],
        "PlainForCausalLM": [span("1.1", "1.2", ri.NOT_SERVED), span("1.2", None, NOCAP)],
        "Qwen3TinyForCausalLM": [span("1.1", "1.2", ri.NOT_SERVED), span("1.2", None, NOCAP)],
    }, {"honored": [{"from": "1.1", "until": "1.2", "value": True}, {"from": "1.2", "until": None, "value": False}],
        "gated": [{"from": "1.1", "until": None, "value": False}]})


def test_merge_keeps_unchanged_ranges_open_and_splits_changed_ones(kit, scratch):
    merged, delta = ri.merge_capture(kit, scratch, "1.1", "1.2", "intake")
    archs = merged["architectures"]
    assert merged["releases"] == ["1.0", "1.1", "1.2"] and delta["disagreements"] == []
    assert archs["LlamaForCausalLM"] == kit["architectures"]["LlamaForCausalLM"]  # added_by kept
    assert archs["GemmaForCausalLM"] == kit["architectures"]["GemmaForCausalLM"]
    assert [(r["from"], r["until"], r["rule"]) for r in archs["Qwen3ForCausalLM"]] == [
        ("1.0", "1.1", None), ("1.1", "1.2", "as_is"), ("1.2", None, "unknown")]
    assert [(r["from"], r["until"], r["status"]) for r in archs["OldForCausalLM"]] == [
        ("1.0", "1.2", "capture"), ("1.2", None, "not_served")]
    assert {a for a, _, _ in delta["changed"]} == {"Qwen3ForCausalLM", "OldForCausalLM"}
    assert kit["architectures"]["OldForCausalLM"][0]["until"] is None  # the kit's table is not touched


def test_merge_adds_new_architectures_that_capture_or_belong_to_a_family(kit, scratch):
    merged, delta = ri.merge_capture(kit, scratch, "1.1", "1.2", "intake")
    archs = merged["architectures"]
    assert "PlainForCausalLM" not in archs  # never captures, not a family
    assert [(r["from"], r["until"], r["status"]) for r in archs["Qwen3TinyForCausalLM"]] == [
        ("1.0", "1.2", "not_served"), ("1.2", None, "no_capture")]
    assert [(r["from"], r["until"], r["status"]) for r in archs["NewForCausalLM"]] == [
        ("1.0", "1.2", "not_served"), ("1.2", None, "capture")]
    served = archs["WasServedForCausalLM"]  # served at 1.1 (read from its wheel), unread before
    assert [(r["from"], r["until"], r["status"]) for r in served] == [
        ("1.0", "1.1", "not_served"), ("1.1", "1.2", "no_capture"), ("1.2", None, "capture")]
    assert "not read" in served[0]["note"]
    assert {a for a, _, _ in delta["new"]} == {"Qwen3TinyForCausalLM", "NewForCausalLM", "WasServedForCausalLM"}
    for ranges in archs.values():  # every class tiles every release, as the shipped tables do
        assert ranges[0]["from"] == "1.0" and ranges[-1]["until"] is None
        assert all(a["until"] == b["from"] for a, b in zip(ranges, ranges[1:]))


def test_merge_flips_engine_facts(kit, scratch):
    merged, delta = ri.merge_capture(kit, scratch, "1.1", "1.2", "intake")
    facts = {f["fact"]: f["ranges"] for f in merged["engine_facts"]}
    assert delta["flips"] == [("honored", True, False)]
    assert facts["honored"] == [{"from": "1.0", "until": "1.2", "value": True},
                                {"from": "1.2", "until": None, "value": False}]
    assert facts["gated"] == [{"from": "1.0", "until": None, "value": False}]
    assert merged["source"]["tags"].endswith("..v1.2 (release tags only)")
    assert merged["source"]["release_intake"] == ["intake"]


def test_rows_that_disagree_at_the_base_release_are_reported(kit, scratch):
    scratch["architectures"]["GemmaForCausalLM"] = [span("1.1", None, CAP)]
    scratch["architectures"]["MissingForCausalLM"] = [span("1.1", None, CAP)]
    scratch["engine_facts"][1]["ranges"][0]["value"] = True
    _, delta = ri.merge_capture(kit, scratch, "1.1", "1.2", "intake")
    text = "\n".join(delta["disagreements"])
    assert "GemmaForCausalLM at 1.1: kit says no_capture" in text
    assert "MissingForCausalLM at 1.1: not in the kit's table" in text
    assert "engine fact gated at 1.1" in text
    assert len(delta["disagreements"]) == 3


def test_a_release_not_newer_than_the_table_is_refused(kit, scratch):
    with pytest.raises(ri.IntakeError, match="not newer"):
        ri.merge_capture(kit, scratch, "1.0", "1.1", "intake")


# ---------------------------------------------------------------- the merges on the shipped tables

def same_release_scratch(kit: dict, base: str, new: str) -> dict:
    """What the scratch table of an unchanged release would hold: every verdict at BASE, again at NEW."""
    scratch = table([base, new], {}, {})
    for arch, ranges in kit["architectures"].items():
        at = ri.range_at(ranges, base)
        if at["status"] != "not_served":
            scratch["architectures"][arch] = [{**ri._new_range(at, base)}]
    scratch["engine_facts"] = [{**f, "ranges": [{"from": base, "until": None,
                                                "value": ri.range_at(f["ranges"], base)["value"]}]}
                               for f in kit["engine_facts"]]
    for key in ("engine", "hook", "rules", "fields"):
        scratch[key] = kit[key]
    return scratch


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_an_identical_release_keeps_every_range_and_only_extends(engine):
    kit = shipped(engine, "capture.json")
    base, new = kit["releases"][-1], kit["releases"][-1] + ".99"
    merged, delta = ri.merge_capture(kit, same_release_scratch(kit, base, new), base, new, "intake")
    assert delta == {"new": [], "changed": [], "flips": [], "disagreements": []}
    assert merged["architectures"] == kit["architectures"]
    assert merged["engine_facts"] == kit["engine_facts"]
    assert merged["releases"] == kit["releases"] + [new]


def test_a_change_on_the_shipped_table_closes_only_its_range():
    kit = shipped("vllm", "capture.json")
    base, new = kit["releases"][-1], "9.0.0"
    scratch = same_release_scratch(kit, base, new)
    llama = scratch["architectures"]["LlamaForCausalLM"][0]
    scratch["architectures"]["LlamaForCausalLM"] = [{**llama, "until": new},
                                                    {**llama, "from": new, "rule": "unknown"}]
    merged, delta = ri.merge_capture(kit, scratch, base, new, "intake")
    before, after = kit["architectures"]["LlamaForCausalLM"], merged["architectures"]["LlamaForCausalLM"]
    assert after[:-2] == before[:-1] and after[-2] == {**before[-1], "until": new}
    assert after[-1]["from"] == new and after[-1]["rule"] == "unknown" and after[-1]["until"] is None
    assert [a for a, _, _ in delta["changed"]] == ["LlamaForCausalLM"]
    assert {a: r for a, r in merged["architectures"].items() if a != "LlamaForCausalLM"} == \
        {a: r for a, r in kit["architectures"].items() if a != "LlamaForCausalLM"}


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_drafting_merge_appends_the_release_and_its_change(engine):
    kit = shipped(engine, "drafting.json")
    base = next(reversed(kit["releases"]))
    rule = {**kit["releases"][base], "read": "wheel x.whl"}
    merged, delta = ri.merge_drafting(kit, rule, rule, base, "9.0.0", "intake")
    assert list(merged["releases"]) == list(kit["releases"]) + ["9.0.0"]
    assert merged["changes"] == kit["changes"] and delta == {"changed": [], "disagreements": []}
    assert merged["source"]["read_from_wheels"][-1] == "9.0.0"

    key = "required" if engine == "vllm" else "auto_requires_unset"
    flipped = {**rule, key: not rule[key]}
    merged, delta = ri.merge_drafting(kit, flipped, flipped, base, "9.0.0", "intake")
    assert merged["changes"][-1] == {"release": "9.0.0", "changed": [f"{key}: {rule[key]} -> {not rule[key]}"]}
    assert delta["disagreements"] == [f"drafting `{key}` at {base}: kit says {rule[key]!r}; "
                                      f"the {base} wheel gives {(not rule[key])!r}"]


@pytest.mark.parametrize("engine, name, ascii_only", [
    ("vllm", "capture.json", False), ("sglang", "capture.json", False),
    ("vllm", "drafting.json", True), ("sglang", "drafting.json", True)])
def test_the_writer_keeps_the_kits_file_format(tmp_path, engine, name, ascii_only):
    path = ri.write_json_atomic(shipped(engine, name), str(tmp_path / "sub" / name), ascii_only)
    assert Path(path).read_bytes() == (ENGINES / engine / "data" / name).read_bytes()
    assert [p.name for p in (tmp_path / "sub").iterdir()] == [name]  # no temp file left behind


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_the_newest_read_release_comes_from_the_engine_record(engine):
    from eagle3_nb.engines import ENGINES as RECORDS
    assert ri.newest_read(engine) == RECORDS[engine].read[0]  # read without importing the kit
    assert ri.kit_releases(engine) == list(RECORDS[engine].releases)


# ---------------------------------------------------------------- the report

def report(**over) -> dict:
    r = {"engine": "vllm", "version": "1.2", "base": "1.1", "command": "python tools/release_intake.py vllm 1.2",
         "date": "2026-12-03", "wheel_date": "2026-11-16", "staging": "/s", "written": False,
         "watched": [{"path": "vllm/a.py", "old_path": "vllm/a.py", "status": "M", "watches": ["draft model"],
                      "added": ["A.f"], "removed": [], "changed": ["A.g"], "outside_focus": 2, "in_focus": True},
                     {"path": "vllm/b.py", "old_path": "vllm/b.py", "status": "M", "watches": ["eagle3 interface"],
                      "added": [], "removed": [], "changed": [], "outside_focus": 1, "in_focus": False}],
         "capture": {"new": [("NewForCausalLM", CAP, ri.state(None))],
                     "changed": [("OldForCausalLM", ri.state(CAP), ri.state(None))],
                     "flips": [("draft_layer_ids_honored", True, False)], "disagreements": []},
         "drafting": {"changed": ["required: True -> False"], "disagreements": [], "rule": {"required": False}},
         "fact_evidence": {"draft_layer_ids_honored": {"old": ["x.py", "y.py"], "new": [], "gone": ["x.py"]}},
         "capture_classes": {"added": ["B (vllm/models/b/amd/model.py)"], "removed": []},
         "registry": {"added": [], "removed": ["PEagleDraftModel"]},
         "markers": {"flips": [{"field": "aux_id_sources", "old": "top", "new": "none", "why": "w", "cite": "c",
                                "tracked": "range", "files": ["vllm/a.py"]}], "touched": [], "unmarkable": []},
         "env": {"ok": True, "tail": "ready"},
         "probe": {"ok": False, "reason": "the kit does not import here", "profile": None, "evidence": ""}}
    r.update(over)
    return r


def test_the_report_puts_flips_and_moves_first():
    text = ri.render_report(report())
    key_lines = text.split("## Key lines", 1)[1].split("\n## ", 1)[0]
    assert "**engine fact flips at 1.2:** `draft_layer_ids_honored` True → False" in key_lines
    assert "`draft_layer_ids_honored`: no longer in x.py; still matched in y.py" in key_lines
    assert "drafting defaults: required: True -> False" in key_lines
    assert "check against the kit's rows for 1.1: agree" in key_lines
    assert "profile-field markers that flip: `aux_id_sources`" in key_lines
    assert "probe: skipped: the kit does not import here" in key_lines
    assert '`("1.2", "2026-11-16")`' in key_lines
    assert "- `vllm/a.py` (modified; draft model) — added: A.f; changed: A.g (+2 outside the focus)" in text
    assert "Also modified, outside every focus: `vllm/b.py`" in text
    assert "- NewForCausalLM: capture, rule=as_is" in text and "- OldForCausalLM: capture" in text
    assert "- removed: PEagleDraftModel" in text and "B (vllm/models/b/amd/model.py)" in text
    assert "profiles.py" in text.split("## What a person does next")[1]


def test_the_report_lists_disagreements_and_a_probe_that_ran():
    probe = {"ok": True, "profile": "vllm==0.33", "evidence": "e", "setup": "",
             "agreement": "| variant | vllm 1.2 |\n|---|---|\n| good | agree |\n| nan-head | 1 difference |\n"
                          "| sharded | probe error |",
             "differences": "- **nan-head** on vllm 1.2: ...\n- **sharded** on vllm 1.2: probe error: "
                            "RuntimeError: boom"}
    cap = {**report()["capture"], "disagreements": ["GemmaForCausalLM at 1.1: kit says no_capture"]}
    text = ri.render_report(report(capture=cap, probe=probe, markers={"error": "no kit"}))
    assert "**1 disagreements** (listed below; --write is refused)" in text
    assert "### Disagreements with the kit's tables\n\n- GemmaForCausalLM at 1.1" in text
    assert ("probe: 1 of 3 bundled drafts agree with the nearest profile (vllm==0.33), 1 differ, "
            "**1 probe errors** (first: `RuntimeError: boom`)") in text
    assert "profile-field markers: not run (no kit)" in text and "- **nan-head** on vllm 1.2" in text


# ---------------------------------------------------------------- re-reading a release taken in

def test_the_tables_as_of_a_release_end_there_with_their_last_ranges_open():
    capture = ri.capture_as_of(shipped("vllm", "capture.json"), "0.33.0")
    assert capture["releases"][-1] == "0.33.0"
    for arch, ranges in capture["architectures"].items():
        assert ranges[-1]["until"] is None, arch
        assert all(ri.version_key(r["from"]) <= ri.version_key("0.33.0") for r in ranges), arch
    drafting = ri.drafting_as_of(shipped("vllm", "drafting.json"), "0.33.0")
    assert list(drafting["releases"])[-1] == "0.33.0"


def test_merging_onto_the_tables_before_a_release_rebuilds_the_shipped_ones():
    """What the check of a release taken in relies on: the merge inverts the truncation, and a
    planted difference in the rebuilt table is reported."""
    kit, drafting = shipped("vllm", "capture.json"), shipped("vllm", "drafting.json")
    merged, _ = ri.merge_capture(ri.capture_as_of(kit, "0.33.0"), kit, "0.33.0", "0.34.0", "test")
    rules = drafting["releases"]
    rebuilt, _ = ri.merge_drafting(ri.drafting_as_of(drafting, "0.33.0"), rules["0.33.0"],
                                   rules["0.34.0"], "0.33.0", "0.34.0", "test")
    assert ri.reproduction_differences(merged, rebuilt, kit, drafting, "0.34.0") == []
    merged["architectures"]["LlamaForCausalLM"][-1]["rule"] = "plus_one"
    found = ri.reproduction_differences(merged, rebuilt, kit, drafting, "0.34.0")
    assert len(found) == 1 and "LlamaForCausalLM" in found[0]


def test_writing_a_release_taken_in_is_refused(tmp_path):
    with pytest.raises(ri.IntakeError, match="in the kit's tables already"):
        ri.intake("vllm", "0.34.0", None, str(tmp_path), str(tmp_path / "s"),
                  str(tmp_path / "r.md"), True, True, True, log=lambda line: None)
