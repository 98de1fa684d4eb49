"""Issue #27, the front door: what a new user trips on, each held to the behaviour asked for.

1. aux layer ids past the target's last layer: accept, report and notebooks 03/04's entry points
   say TARGET_MISMATCH (exit 2, no traceback), as inspect does;
2. every finding of every command carries its next step and a copy-pasteable command;
3. negative / repeated aux ids and a target model given as the draft are named as such;
4. one engine grammar: NAME==VERSION, NAME:VERSION, a bare NAME; a bad name in one line;
7. --version, the README's "accept length 1.0" section run as written, its outputs git-ignored.
"""

import importlib.metadata
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DRAFTS, REPO, SAMPLES, TARGET_CONFIG
from eagle3_nb.cli import build_parser, main
from eagle3_nb.errors import Eagle3NbError

TARGET = SAMPLES / "target"
PROMPTS = SAMPLES / "prompts.jsonl"
README = REPO / "README.md"
BROKEN_LOG = REPO / "tests" / "recordings" / "sglang-0.5.23-broken-decode.log"


def draft_with_aux_ids(tmp_path: Path, ids: list[int]) -> Path:
    """The bundled flat draft with eagle_config.eagle_aux_hidden_state_layer_ids = IDS."""
    draft = tmp_path / f"draft-{'_'.join(map(str, ids))}"
    shutil.copytree(DRAFTS / "layers0-flat", draft)
    config = json.loads((draft / "config.json").read_text())
    config["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": ids}
    (draft / "config.json").write_text(json.dumps(config))
    return draft


def run(capsys, *args) -> tuple[int, str, str]:
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


# ----------------------------------------------------------------------------- 1. no crash

@pytest.fixture
def past_the_target(tmp_path):
    return draft_with_aux_ids(tmp_path, [0, 9, 3])   # the bundled target has 8 layers


def test_inspect_names_ids_past_the_target(capsys, past_the_target):
    rc, out, _ = run(capsys, "inspect", past_the_target, "--target-config", TARGET_CONFIG,
                     "--no-stats", "--json")
    mismatch = [f for f in json.loads(out)["findings"] if f["code"] == "TARGET_MISMATCH"]
    assert rc == 1 and mismatch and "[9]" in mismatch[0]["message"]


@pytest.mark.parametrize("extra", [[], ["--what-if"], ["--hidden-states", SAMPLES / "target"]])
def test_accept_says_target_mismatch_and_exits_2(capsys, past_the_target, extra):
    rc, out, err = run(capsys, "accept", past_the_target, "--target", TARGET, "--n-samples", 1,
                       "--max-new-tokens", 2, *extra)
    assert rc == 2 and out == ""
    assert "TARGET_MISMATCH" in err and "[9] name no layer of this target" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_report_refuses_before_writing_anything(capsys, past_the_target, tmp_path):
    out_dir = tmp_path / "report"
    rc, _, err = run(capsys, "report", past_the_target, "--target", TARGET, "--out", out_dir)
    assert rc == 2 and "TARGET_MISMATCH" in err and not out_dir.exists()


def test_notebooks_03_and_04_entry_points_say_the_same(past_the_target):
    from eagle3_nb.checks.acceptance import check_acceptance
    from eagle3_nb.checks.hidden import check_hidden_states
    from eagle3_nb.checks.options import AcceptanceOptions, HiddenStateOptions

    for call in (lambda: check_hidden_states(past_the_target, TARGET, PROMPTS,
                                             HiddenStateOptions(n_samples=1)),
                 lambda: check_acceptance(past_the_target, TARGET, PROMPTS,
                                          AcceptanceOptions(n_samples=1, max_new_tokens=2))):
        with pytest.raises(Eagle3NbError, match="TARGET_MISMATCH"):
            call()


def test_no_wiring_reads_a_layer_the_target_lacks(tmp_path):
    """ids up to L are valid hidden_states indices; the kit's own `layers_plus_one` wiring
    must not then read hidden_states[L + 1] (an IndexError in what-if)."""
    from eagle3_nb.session import named_wirings

    named = named_wirings(draft_with_aux_ids(tmp_path, [0, 4, 8]), TARGET)
    deepest = named.target_info.num_hidden_layers
    for name, wiring in named.presets.items():
        assert max(wiring.layer_ids or [0]) <= deepest, (name, wiring.layer_ids)


# ----------------------------------------------------------------------------- 2. next steps

def test_inspect_json_and_text_carry_the_next_step_and_command(capsys):
    from eagle3_nb.engines.advice import next_step

    args = ["inspect", DRAFTS / "layers0-flat", "--engine", "sglang==0.5.9", "--no-stats",
            "--target-config", TARGET_CONFIG]
    _, out, _ = run(capsys, *args, "--json")
    data = json.loads(out)
    ckpt = data["checkpoint"]
    assert data["findings"]
    for f in data["findings"]:   # the report's "what to do" function, for the finding's engine
        assert f["next_step"] == next_step(f["code"], [f["engine"]], ckpt)
        assert "command" in f
    dropped = next(f for f in data["findings"] if f["code"] == "KEYS_DROPPED")
    assert dropped["command"] == (f"eagle3-nb convert {ckpt} {ckpt}-converted "
                                  "--engine sglang==0.5.9")
    _, text, _ = run(capsys, *args)
    assert f"$ {dropped['command']}\n" in text and "next: convert a copy" in text


def test_the_commands_fill_in_what_the_command_was_given(capsys):
    """--target-config in a directory with the target's weights: the commands that need the
    target model name that directory."""
    _, out, _ = run(capsys, "inspect", DRAFTS / "layers0-flat", "--target-config",
                    TARGET_CONFIG, "--engine", "sglang==0.5.9", "--no-stats", "--json")
    aux = [f for f in json.loads(out)["findings"] if f["code"] == "AUX_LAYERS_DEFAULTED"]
    assert aux and all(f"--target {TARGET}" in f["command"] for f in aux)


@pytest.mark.parametrize("command,fragment", [
    (["vocab", DRAFTS / "d2t-absolute"], "--fix-d2t"),
    (["diff", DRAFTS / "good", DRAFTS / "layers0-flat", "--engine", "sglang==0.5.9"], None),
])
def test_every_command_s_findings_carry_them(capsys, command, fragment):
    _, out, _ = run(capsys, *command, "--json")
    findings = json.loads(out)["findings"]
    assert findings and all(f["next_step"] and "command" in f for f in findings)
    if fragment:
        assert any(fragment in (f["command"] or "") for f in findings)


def test_log_findings_carry_the_signature_s_own_step(tmp_path, capsys):
    log = tmp_path / "server.log"
    log.write_text("INFO 12-01 10:00:00 [api_server.py:1] vLLM API server version 0.34.0\n"
                   "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n"
                   "AssertionError: Tried to load weights of size torch.Size([64, 256])to a "
                   "parameter of size torch.Size([64, 192])\n")
    _, out, _ = run(capsys, "log", log, "--json")
    findings = json.loads(out)["findings"]
    assert findings and all(f["next_step"] == f["evidence"]["next_step"] for f in findings)
    _, text, _ = run(capsys, "log", log)
    assert f"next: {findings[0]['next_step'][:30]}" in text


def test_the_report_summary_findings_carry_them_too():
    from eagle3_nb.checks.load import inspect_checkpoint
    from eagle3_nb.report.steps import Step
    from eagle3_nb.report.summary import merge_findings

    data = inspect_checkpoint(DRAFTS / "d2t-absolute").to_json()
    merged = merge_findings([Step("01_checkpoint_keys", Path("01.ipynb"), {},
                                  summary={"findings": data["findings"]})], data["checkpoint"])
    d2t = next(f for f in merged if f["code"] == "D2T_ABSOLUTE")
    assert d2t["next_step"] == d2t["todo"] and d2t["command"].endswith("--fix-d2t")


def test_every_command_the_kit_suggests_is_one_its_cli_takes():
    from eagle3_nb.engines import newest_profiles
    from eagle3_nb.findings import NEXT_COMMANDS, next_command

    parser = build_parser()
    for code in NEXT_COMMANDS:
        for p in newest_profiles():
            words = shlex.split(next_command(code, [p.key], "/my draft"))
            assert words[0] == "eagle3-nb"
            parser.parse_args(words[1:])   # SystemExit on anything it does not take


# ----------------------------------------------------------------------------- 3. names

@pytest.mark.parametrize("with_target", [False, True])
def test_negative_and_repeated_ids_are_named_as_such(capsys, tmp_path, with_target):
    draft = draft_with_aux_ids(tmp_path, [-1, 4, 4])
    extra = ["--target-config", TARGET_CONFIG] if with_target else []
    _, out, _ = run(capsys, "inspect", draft, "--no-stats", "--json", *extra)
    findings = json.loads(out)["findings"]
    invalid = [f for f in findings if f["code"] == "AUX_IDS_INVALID"]
    assert len(invalid) == 1 and invalid[0]["severity"] == "error"
    assert "negative [-1]" in invalid[0]["message"] and "repeated [4]" in invalid[0]["message"]
    for f in findings:   # the old explanations, which named something else
        assert "deeper model" not in f["message"] and "'input to layer'" not in f["message"]


def test_negative_ids_stop_a_run_before_it_starts(capsys, tmp_path):
    rc, _, err = run(capsys, "accept", draft_with_aux_ids(tmp_path, [-1, 4, 4]), "--target",
                     TARGET, "--n-samples", 1)
    assert rc == 2 and "AUX_IDS_INVALID" in err and "Traceback" not in err


def test_a_target_given_as_the_draft_is_said_to_be_one(capsys):
    rc, out, _ = run(capsys, "inspect", TARGET, "--json")
    data = json.loads(out)
    assert rc == 1 and data["overall"] == "load_error"
    assert [f["code"] for f in data["findings"]] == ["NOT_A_DRAFT"]
    assert "this is a target model, not an EAGLE-3 draft" in data["findings"][0]["message"]
    assert data["findings"][0]["command"] == \
        f"eagle3-nb inspect DRAFT --target-config {data['checkpoint']}/config.json"
    rc, _, err = run(capsys, "accept", TARGET, "--target", TARGET)
    assert rc == 2 and "this is a target model, not an EAGLE-3 draft" in err


def test_no_bundled_draft_is_taken_for_a_target():
    from eagle3_nb.checks.target_match import not_a_draft
    from eagle3_nb.io.checkpoint import Checkpoint

    drafts = [p for p in DRAFTS.iterdir() if (p / "config.json").is_file()]
    assert len(drafts) > 10
    assert {p.name: not_a_draft(Checkpoint.open(p)) for p in drafts} == \
        {p.name: "" for p in drafts}


# ----------------------------------------------------------------------------- 4. grammar

def _profiles(capsys, *engine_args) -> list[str]:
    _, out, _ = run(capsys, "inspect", DRAFTS / "good", "--no-stats", "--json", *engine_args)
    return [e["profile"] for e in json.loads(out)["engines"]]


def test_both_forms_name_the_same_release(capsys):
    assert _profiles(capsys, "--engine", "sglang:0.5.9", "--engine", "vllm:0.33.0") == \
        _profiles(capsys, "--engine", "sglang==0.5.9", "--engine", "vllm==0.33.0")


def test_a_bare_name_is_its_newest_releases(capsys):
    newest = {p.split("==")[0]: p for p in _profiles(capsys)}   # the default's answer
    assert _profiles(capsys, "--engine", "sglang") == [newest["sglang"]]


@pytest.mark.parametrize("spec,near", [("sglan:0.5.9", "sglang"), ("vlm==0.33", "vllm")])
def test_a_bad_name_is_one_short_line_with_the_nearest(capsys, spec, near):
    rc, out, err = run(capsys, "inspect", DRAFTS / "good", "--no-stats", "--engine", spec)
    assert rc == 2 and out == "" and err.count("\n") == 1 and len(err) < 200
    assert f"did you mean {near}" in err


def test_the_notebooks_documented_example_runs(capsys):
    from eagle3_nb.engines import parse_engines

    examples = set()
    for notebook in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(notebook.read_text())["cells"]
        source = next("".join(c["source"]) for c in cells
                      if "parameters" in c.get("metadata", {}).get("tags", []))
        line = next((l for l in source.splitlines() if l.startswith("engine:")), None)
        if line:
            examples.add(re.search(r"e\.g\. ([^)\s]+)", line).group(1))
    assert examples
    for example in examples:
        assert run(capsys, "inspect", DRAFTS / "good", "--no-stats", "--engine", example)[0] \
            in (0, 1)
        assert parse_engines(example) == [example.replace(":", "==")]


def test_log_and_wiring_take_the_same_grammar(tmp_path, capsys):
    from eagle3_nb.engines import wiring_name

    log = tmp_path / "server.log"
    log.write_text("no banner here\n")
    _, out, _ = run(capsys, "log", log, "--engine", "sglang:0.5.9", "--json")
    data = json.loads(out)
    assert (data["engine"], data["version"]) == ("sglang", "0.5.9")
    assert wiring_name("sglang:0.5.9") == "sglang==0.5.9" and wiring_name("trained") == "trained"


# ----------------------------------------------------------------------------- 7. expected

def test_version_comes_from_the_package_metadata():
    proc = subprocess.run([sys.executable, "-m", "eagle3_nb.cli", "--version"],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout == f"eagle3-nb {importlib.metadata.version('eagle3_nb')}\n"


def readme_outputs() -> list[str]:
    """Every file or folder the README's commands write into the working directory."""
    text = README.read_text(encoding="utf-8")
    blocks = "\n".join(re.findall(r"```bash\n(.*?)```", text, re.S))
    found = re.findall(r"--out (\S+)", blocks) + re.findall(r"output_dir (\S+)", blocks)
    found += re.findall(r"papermill \S+\.ipynb (\S+\.ipynb)", blocks)
    found += re.findall(r"mkdir (\w+)", blocks)
    return sorted({f for f in found if not f.isupper() and not f.startswith(("~", "/"))})


@pytest.mark.skipif(not (REPO / ".git").exists(), reason="not a git checkout")
def test_reports_and_the_readme_s_outputs_are_git_ignored():
    outputs = readme_outputs()
    assert {"report-draft", "observed.json", "out.ipynb"} <= set(outputs)
    for path in ["reports/demo/", *outputs]:
        is_dir = path.endswith("/") or "." not in path
        candidate = f"{path.rstrip('/')}/index.html" if is_dir else path   # what is written
        proc = subprocess.run(["git", "check-ignore", "-q", candidate], cwd=REPO)
        assert proc.returncode == 0, f"{candidate} is not git-ignored"


SECTION = "## My draft is at accept length 1.0: what do I run?"


def symptom_commands() -> list[str]:
    section = README.read_text(encoding="utf-8").split(SECTION, 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line.strip() for line in block.replace("\\\n", " ").splitlines()
            if line.strip() and not line.strip().startswith("#")]


def test_the_section_covers_each_evidence_set_and_is_honest_about_training_data():
    section = README.read_text(encoding="utf-8").split(SECTION, 1)[1].split("\n## ", 1)[0]
    for evidence in ("checkpoint alone", "target's config.json", "the server's log",
                     "target's weights"):
        assert evidence in section
    assert "the training data" in section and "eagle3-nb data TRAIN_DIR" in section
    assert all(c.startswith(".venv/bin/eagle3-nb ") for c in symptom_commands())


@pytest.mark.slow
def test_the_section_s_commands_run_as_written(tmp_path):
    """The placeholders become the bundled broken draft, target and a SGLang log at accept
    length 1.0; exit 0 or 1 (findings), never 2 or a traceback."""
    places = {"TARGET_DIR": TARGET, "DRAFT": DRAFTS / "layers0-flat", "TARGET": TARGET,
              "SERVER_LOG": BROKEN_LOG}
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    outputs: dict[str, str] = {}
    for command in symptom_commands():
        for name, path in places.items():   # TARGET_DIR before TARGET
            command = re.sub(rf"\b{name}\b", str(path), command)
        command = command.replace(".venv/bin/eagle3-nb", f"{sys.executable} -m eagle3_nb.cli")
        proc = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True,
                              timeout=900, env=env)
        assert proc.returncode in (0, 1), f"{command}\n{proc.stderr[-2000:]}"
        assert "Traceback" not in proc.stderr
        sub = command.split()[3]   # the subcommand -> all it printed
        outputs[sub] = outputs.get(sub, "") + proc.stdout
    assert "$ eagle3-nb convert" in outputs["inspect"]
    assert "accept length 1.0" in outputs["log"]
    assert re.search(r"observed 1\.00 is consistent with: .*sglang==0\.5\.9", outputs["accept"])


def test_every_readme_command_that_answers_for_an_engine_names_its_release():
    """#24: a command without the release answers for each engine's newest, which may not be
    the user's: the README's commands all pass it (or a log that names it), so that they agree
    with each other and with the demo."""
    text = README.read_text(encoding="utf-8")
    commands = [line.strip() for block in re.findall(r"```bash\n(.*?)```", text, re.S)
                for line in block.replace("\\\n", " ").splitlines()
                if re.match(r"\s*\.venv/bin/eagle3-nb (inspect|vocab|accept|report) ", line)]
    assert len(commands) > 10
    silent = [c for c in commands
              if not re.search(r"--engine \S|--log \S|--observed \S+\.(log|prom|json)", c)]
    assert silent == []

