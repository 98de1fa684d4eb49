"""The false-alarm matrix (#25): every bundled sample draft x every release range of every
registered engine x (the draft alone, the target's config, the target's weights) x (with and
without the engine's serving command). Every error and warning must be backed: confirmed by
the engine's real loader (docs/engine-truth.md) or by a citation of the condition that holds
(tools/false_alarms.py says which). The bundled `good` draft gets no alarm beyond what its
evidence states, and docs/false-alarms.md is the matrix as the tool writes it now."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from conftest import DRAFTS, SAMPLES
from eagle3_nb.engines.launch import read_launch
from eagle3_nb.engines.registry import engines

TOOL = Path(__file__).resolve().parent.parent / "tools" / "false_alarms.py"
spec = importlib.util.spec_from_file_location("false_alarms", TOOL)
fa = importlib.util.module_from_spec(spec)
sys.modules["false_alarms"] = fa
spec.loader.exec_module(fa)

MANIFEST = json.loads((DRAFTS / "manifest.json").read_text(encoding="utf-8"))


def test_every_error_and_warning_is_backed_by_the_loader_or_a_citation():
    missing = [f"{c.sample} {c.profile} [{c.evidence}] {a.severity} {a.code}: {a.message[:120]}"
               for c, a in fa.unbacked()]
    assert missing == [], "\n".join(missing[:10])


def test_the_matrix_covers_every_sample_every_registered_range_and_every_evidence():
    cells = fa.matrix()
    keys = {p.key for e in engines().values() for p in e.profiles}
    samples = {d.name for d in DRAFTS.iterdir() if (d / "config.json").is_file()}
    for column, _, _ in fa.TARGETS:
        got = {(c.sample, c.profile) for c in cells if c.evidence == column}
        assert got == {(s, k) for s in samples for k in keys}, column
    served = {name for name in engines() if fa.serve_command(name, DRAFTS / "good")}
    assert served == {name for name, e in engines().items() if e.launch}   # none left out
    launched = {c.profile for c in cells if c.evidence.endswith("+launch")}
    assert launched == {p.key for name in served for p in engines()[name].profiles}


def test_each_engines_serving_command_reads_back_as_that_engine_serving_the_draft():
    for name in engines():
        command = fa.serve_command(name, DRAFTS / "good")
        if command is None:
            continue
        launch = read_launch(command)
        assert launch.engine == name
        # a --config file (TensorRT-LLM's YAML) names the draft; the target is on the command line
        target = None if engines()[name].launch.read_text else str(SAMPLES / "target")
        assert launch.draft == str(DRAFTS / "good") and launch.model == target
        assert (launch.method or "").lower() == "eagle3"


def test_the_good_draft_gets_no_alarm_beyond_what_its_evidence_states():
    """Warnings: only the codes its manifest expects (no aux ids declared, so the defaults),
    or a statement of what the kit could not check for that release (no capture survey).
    Errors: only a cited known bug of that release, or that release's recorded startup failure
    for the draft's architecture name; every other release serves it: ok."""
    every = {p.key: p for e in engines().values() for p in e.profiles}
    expected = {c for e in MANIFEST["variants"]["good"]["expect"].values() for c in e["codes"]}
    expected |= set(fa.UNCHECKED)
    arch = json.loads((DRAFTS / "good" / "config.json").read_text())["architectures"][0]
    for cell in (c for c in fa.matrix() if c.sample == "good"):
        profile = every[cell.profile]
        warnings = {a.code for a in cell.alarms if a.severity == "warning"}
        assert warnings <= expected, (cell.profile, cell.evidence, warnings)
        errors = [a for a in cell.alarms if a.severity == "error"]
        recorded = arch in profile.architecture_errors
        for a in errors:
            assert a.code == "ENGINE_BUG" or (a.code == "LOAD_ERROR" and recorded), \
                (cell.profile, cell.evidence, a.code, a.message)
        if not errors:
            assert cell.verdict == "ok", (cell.profile, cell.evidence)


def test_the_published_matrix_is_the_one_the_tool_writes_now():
    assert fa.OUT.read_text(encoding="utf-8") == fa.render(), \
        "docs/false-alarms.md is stale: python tools/false_alarms.py --out docs/false-alarms.md"


def test_a_local_speculators_verifier_is_refused_only_where_the_release_refuses_it(tmp_path):
    """#25: vLLM refuses a local verifier from 0.33.0 (maybe_override_with_speculators, read in
    the 0.32.0 and 0.33.0 wheels). The refusal is a cited profile field, so 0.30.0-0.32.0, which
    serve the local verifier, are not told they fail."""
    import shutil

    from eagle3_nb.checks.load import inspect_checkpoint
    from eagle3_nb.engines import resolve_engine

    draft = tmp_path / "draft"
    shutil.copytree(DRAFTS / "good-speculators", draft)
    raw = json.loads((draft / "config.json").read_text())
    raw["speculators_config"]["verifier"]["name_or_path"] = str(SAMPLES / "target")
    (draft / "config.json").write_text(json.dumps(raw))
    for release, refused in (("0.30.0", False), ("0.32.0", False), ("0.33.0", True),
                             ("0.34.0", True)):
        engine = f"vllm=={release}"
        data = inspect_checkpoint(draft, [engine], stats=False,
                                  launch=f"vllm serve {draft}").to_json()
        errors = [f for f in data["findings"] if f["code"] == "LAUNCH_SETTING"]
        assert bool(errors) == refused, engine
        profile = resolve_engine(engine)
        assert profile.refuses_local_verifier == refused
        cite = profile.cites["refuses_local_verifier"]
        assert "maybe_override_with_speculators" in cite and \
            ("[0.33.0]" if refused else "[0.32.0]") in cite
        if refused:
            assert errors[0]["evidence"]["cite"] == cite
