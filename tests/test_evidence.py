"""The evidence decides what is simulated and ranked (#24): a named release is simulated by
default, an observed figure without a release is explained by every release range's wiring,
and a hypothesis the checkpoint's own evidence excludes is shown as ruled out, never as
consistent. On the bundled layers0-flat draft, whose layers.0.* keys SGLang up to 0.5.11 drops:
the first seed story's trap (a d2t that is fine) must not reappear. And each command says, in one
line at its top, what it had and the flag of what it did not (vocab, diff, data, log, convert,
observe, probe and the views of notebooks 00 and 01 here; notebooks 02 and 03 in their own
test files)."""

from __future__ import annotations

import json
import os
import subprocess
from itertools import takewhile
from pathlib import Path

import pytest

from eagle3_nb.checks.acceptance import evidence_engines, what_if
from eagle3_nb.checks.options import AcceptanceOptions
from eagle3_nb.engines import ENGINES
from eagle3_nb.findings import NEWEST_RELEASES
from eagle3_nb.observation import ObservedMetrics
from test_log import VLLM_UNKNOWN_KEY
from test_serving import FakeSGLang, serve  # noqa: F401  (serve: a fixture)

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "data_samples"
DRAFTS_DIR = SAMPLES / "drafts"
DRAFT = DRAFTS_DIR / "layers0-flat"


def test_which_releases_a_run_simulates_follows_the_evidence():
    named, why, had = evidence_engines(["sglang==0.5.9"], None, None)
    assert named == ["sglang==0.5.9"] and "--engine" in why and had == "named (--engine)"
    stated = ObservedMetrics(engine="sglang", source="log", version_detected="0.5.9")
    assert evidence_engines(None, None, stated)[0] == ["sglang==0.5.9"]
    engine_only = ObservedMetrics(engine="vllm", source="log")
    ranges, why, had = evidence_engines(None, None, engine_only)
    assert ranges == [p.key for p in ENGINES["vllm"].profiles] and "not known" in why
    assert had == "not known, vLLM's every release range simulated (--engine)"
    number = ObservedMetrics(engine="unknown", source="number", mean_accept_length=1.0)
    ranges, _, _ = evidence_engines(None, None, number)
    assert len(ranges) == sum(len(e.profiles) for e in ENGINES.values())
    assert evidence_engines(None, None, None)[0] is None  # each engine's newest


@pytest.mark.slow
def test_an_observed_1_0_without_a_release_points_at_the_release_not_the_d2t():
    report = what_if(DRAFT, SAMPLES / "target", SAMPLES / "prompts.jsonl",
                     AcceptanceOptions(observed=1.0, n_samples=8, max_new_tokens=16))
    assert report["evidence"].startswith("your engine release is not known")
    rows = {r["wiring"]: r for r in report["rows"]}
    assert rows["sglang==0.5.10.post1"]["consistent"]  # covers 0.5.9: layers.0.* dropped
    assert not rows["sglang==0.5.23"]["consistent"]
    for name in ("d2t_absolute", "d2t_none"):
        assert rows[name]["ruled_out"] and not rows[name]["consistent"]
    assert "d2t" not in report["explanation"].split(";")[0]
    from eagle3_nb.viz.acceptance import what_if_html

    html = what_if_html(report)  # notebook 04 and the report show the same marks
    d2t_row = html[html.index(">d2t_absolute<"):].split("</tr>")[0]
    assert "ruled out" in d2t_row and "consistent" not in d2t_row
    assert "valid offsets" in d2t_row


@pytest.mark.slow
def test_a_named_release_is_simulated_beside_trained():
    report = what_if(DRAFT, SAMPLES / "target", SAMPLES / "prompts.jsonl",
                     AcceptanceOptions(engines=["sglang==0.5.9"], n_samples=8,
                                       max_new_tokens=16),
                     wirings=["trained", "sglang==0.5.9"])
    rows = {r["wiring"]: r for r in report["rows"]}
    assert set(rows) == {"trained", "sglang==0.5.9"}
    assert rows["sglang==0.5.9"]["mean_accept_length"] < 1.1 < rows["trained"][
        "mean_accept_length"]
    assert rows["sglang==0.5.9"]["vs_trained"]["verdict"] == "lower"


@pytest.mark.slow
def test_accept_with_a_named_release_shows_its_wiring_by_default(run_cli):
    """The command as a user types it: --engine alone, no --wiring, no --what-if."""
    rc, out, err = run_cli("accept", DRAFT, "--target", SAMPLES / "target", "--engine",
                           "sglang==0.5.9", "--n-samples", "4", "--max-new-tokens", "8", "--json")
    assert rc == 0, err
    rows = {r["wiring"]: r for r in json.loads(out)["rows"]}
    assert set(rows) == {"trained", "sglang==0.5.9"}
    assert rows["sglang==0.5.9"]["mean_accept_length"] < 1.1 < rows["trained"][
        "mean_accept_length"]


# ----------------------------------------------------------------------------- the evidence line
# Every command says, in one line at its top, what it had and the flag of what it did not.

def _evidence_line(stdout: str) -> tuple[int, str]:
    """Where the first `evidence: ...` line of a text answer starts, and the line unwrapped."""
    lines = stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("  evidence: "))
    wrapped = takewhile(lambda line: line.startswith(" " * 12), lines[at + 1:])
    return at, " ".join(line.strip() for line in [lines[at], *wrapped])


def test_vocab_says_what_it_had_and_the_flag_for_the_rest(run_cli, tmp_path):
    rc, out, err = run_cli("vocab", DRAFTS_DIR / "good", "--json")
    assert rc == 0, err
    data = json.loads(out)
    assert data["had"] == {"checkpoint": "given", "tokenizer": "not given (--tokenizer)",
                           "corpus": "not given (--corpus)",
                           "engine release": NEWEST_RELEASES}
    assert isinstance(data["evidence"], list) and data["evidence"]  # the d2t reasons, kept
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"input_ids": [1, 2, 3, 4]}) + "\n")
    rc, out, err = run_cli("vocab", DRAFTS_DIR / "good", "--corpus", corpus,
                           "--engine", "vllm==0.33")
    assert rc == 0, err
    at, line = _evidence_line(out)
    assert at == 1  # right under the checkpoint, before the answer
    assert line == ("evidence: checkpoint: given; tokenizer: not given (--tokenizer); corpus: "
                    "given; engine release: named (--engine)")


def test_diff_says_what_it_had_and_the_flag_for_the_rest(run_cli):
    rc, out, err = run_cli("diff", DRAFTS_DIR / "good", DRAFTS_DIR / "layers0-flat", "--json")
    data = json.loads(out)
    assert data["had"] == {"known-good draft": "given", "checkpoint": "given",
                           "target config": "not given (--target-config)",
                           "target weights": "not given (--target-config TARGET_DIR)",
                           "engine release": NEWEST_RELEASES}
    rc, out, err = run_cli("diff", DRAFTS_DIR / "good", DRAFTS_DIR / "layers0-flat",
                           "--target-config", SAMPLES / "target", "--engine", "sglang==0.5.9")
    at, line = _evidence_line(out)
    assert at == 2  # under the two drafts' paths, before the differences
    assert "target config: given; target weights: given; engine release: named (--engine)" \
        in line


def test_data_says_what_it_had_and_the_flag_for_the_rest(run_cli):
    rc, out, err = run_cli("data", SAMPLES / "training" / "specforge", "--draft",
                           DRAFTS_DIR / "good", "--json")
    assert rc in (0, 1), err
    had = json.loads(out)["had"]
    assert had["training data"] == had["draft"] == had["training config"] == "given"
    assert had["tokenizer"] == "not given (--tokenizer or --target)"
    assert had["served chat template"] == "not given (--chat-template)"
    assert had["target"] == "not given (--target)"
    assert had["serving prompts"] == "not given (--prompts)"
    assert had["training dumps"] == "not given (--hidden-states)"
    rc, out, err = run_cli("data", SAMPLES / "training" / "specforge", "--tokenizer",
                           SAMPLES / "target")
    at, line = _evidence_line(out)
    assert at == 1  # under the training data's path, before the rows read
    assert "; tokenizer: given;" in line and "draft: not given (--draft)" in line


# vLLM 0.34.0's own loader error on the bundled prefix-draft-model sample (tests/test_log.py)
VLLM_CRASH = ("INFO 12-01 10:00:00 [api_server.py:1] vLLM API server version 0.34.0\n"
              f"ERROR 12-01 10:00:09 [core.py:1] {VLLM_UNKNOWN_KEY}\n")


def test_log_says_what_it_had_and_the_flag_for_the_rest(run_cli, tmp_path):
    log = tmp_path / "server.log"
    log.write_text(VLLM_CRASH, encoding="utf-8")
    rc, out, err = run_cli("log", log, "--json")
    assert rc == 1, err
    assert json.loads(out)["had"] == {
        "log": "given", "engine": "from the log", "engine release": "from the log",
        "server arguments": "not in the log (eagle3-nb inspect DRAFT --log LOG --launch COMMAND)",
        "checkpoint": "not given (eagle3-nb inspect DRAFT --log LOG)"}
    log.write_text(VLLM_CRASH.split("\n", 1)[1], encoding="utf-8")  # no banner: no release
    rc, out, err = run_cli("log", log, "--engine", "vllm")
    at, line = _evidence_line(out)
    assert at == 1  # under the log's path, before what it says
    assert "engine: named (--engine); engine release: not given (--engine vllm==VERSION)" in line


def test_convert_says_what_the_copys_verdicts_rest_on(run_cli, tmp_path):
    rc, out, err = run_cli("convert", DRAFT, tmp_path / "copy", "--engine", "sglang==0.5.9",
                           "--json")
    assert rc == 0, err
    assert json.loads(out)["had"] == {"checkpoint": "given",
                                      "target config": "not given (--target-config)",
                                      "target weights": "not given (--target-config TARGET_DIR)",
                                      "engine release": "named (--engine)"}
    rc, out, err = run_cli("convert", DRAFT, tmp_path / "copy2", "--to", "eagle",
                           "--target-config", SAMPLES / "target")
    at, line = _evidence_line(out)
    assert at == 1  # under "wrote DST", before the verdicts it qualifies
    assert ("target config: given; target weights: given; engine release: "
            f"{NEWEST_RELEASES}") in line


def test_observe_says_what_its_figures_rest_on(serve, tmp_path, capsys):
    from eagle3_nb.cli import main
    from eagle3_nb.observed.metrics import parse_observed

    url = serve(FakeSGLang("sglang-0.5.23-generate.json"))
    out = tmp_path / "observed.json"
    assert main(["observe", "sglang", url, "--n-samples", "2", "--json", "--out", str(out)]) == 0
    had = json.loads(capsys.readouterr().out)["details"]["had"]
    assert had == {"server": "given", "prompts": "not given, the bundled ones sent (--prompts)",
                   "engine release": "from the server", "server arguments": "from the server"}
    assert parse_observed(out).details["had"] == had  # kept where --observed reads it back
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"prompt": "Say hello."}) + "\n")
    assert main(["observe", "sglang", url, "--prompts", str(prompts), "--version", "0.5.23"]) == 0
    at, line = _evidence_line(capsys.readouterr().out)
    assert at == 1  # under the headline figures
    assert "prompts: given; engine release: named (--version)" in line


@pytest.mark.slow
def test_probe_says_which_release_it_ran(tmp_path):
    """The installed engine's own loader, in its side environment (make engine-env)."""
    env = ROOT / ".cache" / "engines" / "sglang-0.5.23"
    if not (env / ".ready").is_file():
        pytest.skip("no sglang 0.5.23 side environment (make engine-env ENGINE=sglang "
                    "VERSION=0.5.23)")
    run = [str(env / "bin" / "python"), "-P", "-m", "eagle3_nb.cli", "probe",
           str(DRAFTS_DIR / "good"), "--engine", "sglang"]
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([*run, "--json"], capture_output=True, text=True, cwd=tmp_path,
                       env=environ, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    had = json.loads(r.stdout)["had"]
    assert had["checkpoint"] == "given" and had["target config"] == "not given (--target-config)"
    assert had["engine release"].startswith("the installed 0.5.23")
    r = subprocess.run([*run, "--target-config", str(SAMPLES / "target")], capture_output=True,
                       text=True, cwd=tmp_path, env=environ, timeout=600)
    at, line = _evidence_line(r.stdout)
    assert at == 1 and "target config: given" in line, r.stderr[-2000:]


def test_notebooks_00_and_01_say_what_the_inspection_had():
    """Notebook 00's verdict and notebook 01's checkpoint box carry the inspection's evidence
    line, with the flag of each missing piece (the report's front page already did)."""
    from eagle3_nb.checks.load import inspect_checkpoint
    from eagle3_nb.viz.keys import summary_html
    from eagle3_nb.viz.triage import verdict_html

    data = inspect_checkpoint(DRAFT, engines=["sglang==0.5.9"], stats=False).to_json()
    for html in (verdict_html(data), summary_html(data)):
        assert "evidence: checkpoint: given; target config: not given (--target-config)" in html
        assert "engine release: named (--engine)" in html and "log: not given (--log)" in html


def test_accept_says_what_its_figures_rest_on(run_cli, tmp_path):
    """Both accept answers, the one wiring measured and the what-if, start with the evidence
    line, and a run without --engine says the release is not known rather than guessing."""
    rc, out, err = run_cli("accept", DRAFT, "--target", SAMPLES / "target", "--n-samples", "2",
                           "--max-new-tokens", "4", "--num-steps", "2", "--json")
    assert rc == 0, err
    assert json.loads(out)["had"] == {
        "checkpoint": "given", "target weights": "given (run live)",
        "prompts": "not given, the bundled ones simulated (--prompts)",
        "engine release": "not given, each engine's newest releases simulated (--engine)",
        "launch command": "not given, the drafting settings defaulted (--launch)",
        "observed figure": "not given (--observed)"}
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"prompt": "Say hello to the reader."}) + "\n")
    rc, out, err = run_cli("accept", DRAFT, "--target", SAMPLES / "target", "--prompts", prompts,
                           "--observed", "1.0", "--n-samples", "1", "--max-new-tokens", "4",
                           "--num-steps", "2", "--wiring", "trained")
    assert rc == 0, err
    at, line = _evidence_line(out)
    assert at == 1  # under the line that says which releases were simulated, before the table
    assert out.startswith("your engine release is not known")
    assert ("prompts: given; engine release: not known, every engine's every release range "
            "simulated (--engine); launch command: not given, the drafting settings defaulted "
            "(--launch); observed figure: given") in line


def test_notebook_04_says_what_its_figures_rest_on():
    from eagle3_nb.checks.acceptance import acceptance_evidence
    from eagle3_nb.viz.acceptance import measured_on_html

    had = acceptance_evidence(SAMPLES / "target", SAMPLES / "prompts.jsonl",
                              AcceptanceOptions(engines=["vllm==0.34.0"], observed=1.2))
    html = measured_on_html({"settings": "chain of 4 draft steps", "had": had})
    assert "measured on: chain of 4 draft steps" in html
    assert ("evidence: checkpoint: given; target weights: given (run live); prompts: not given, "
            "the bundled ones simulated (--prompts); engine release: named (--engine)") in html
