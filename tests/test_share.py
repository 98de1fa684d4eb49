"""A report to attach to a public issue: `eagle3-nb report --redact-paths` leaves no absolute
path of the machine in any file it writes (the user's name and home included) and keeps the
input hashes; `--markdown` writes summary.md, the front page in Markdown, with the findings of
summary.json.

One real run, once per module: the bundled layers0-flat draft copied into a user's home
(`HOME=<tmp>/home/zoe-e3nb`, the draft in ~/drafts, prompts in ~, the report in ~/reports), served
against the bundled tiny target."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import mistune
import pytest

from conftest import DRAFTS, REPO, SAMPLES
from test_report import ENGINES, cost_parameters

from eagle3_nb.report.redact import ELIDED, RELATIVE, redactor_for

USER = "zoe-e3nb"  # a name no page holds by chance ("alice" is in plotly.js: aliceblue)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# An absolute path where a path starts: not inside a word, a relative path or a URL.
ABSOLUTE = re.compile(r"(?<![\w./~:-])/(?:work|tmp|root|home|usr|opt|var|mnt|data|Users|srv)"
                      r"(?:/|\b)")


def cli(*args, home: Path) -> tuple[int, str, str]:
    """`eagle3-nb` as the user whose home is HOME (one torch thread: tests/test_report.py)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HOME": str(home)}
    proc = subprocess.run([sys.executable, "-m", "eagle3_nb.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=600, env=env)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("share")
    home = tmp / "home" / USER
    draft = shutil.copytree(DRAFTS / "layers0-flat", home / "drafts" / "layers0-flat")
    prompts = home / "prompts.jsonl"
    prompts.write_text("".join((SAMPLES / "prompts.jsonl").read_text().splitlines(True)[:2]))
    out = home / "reports" / "layers0-flat"
    rc, stdout, stderr = cli("report", draft, "--target", SAMPLES / "target",
                             "--engine", ENGINES[0], "--engine", ENGINES[1], "--prompts", prompts,
                             "--device", "cpu", "--out", out, "--redact-paths", "--markdown",
                             *cost_parameters(), home=home)
    assert (out / "summary.json").is_file(), stderr
    return {"rc": rc, "stdout": stdout, "stderr": stderr, "out": out, "tmp": tmp, "home": home,
            "draft": draft, "summary": json.loads((out / "summary.json").read_text())}


# ----------------------------------------------------------------------------- --redact-paths

@pytest.mark.notebook
def test_redacted_report_holds_no_absolute_path(shared):
    out, files = shared["out"], sorted(p for p in shared["out"].rglob("*") if p.is_file())
    names = {p.relative_to(out).as_posix() for p in files}
    assert {"index.html", "summary.json", "summary.md", ".eagle3-nb-report"} <= names
    assert {f"{nb}/{nb}.{ext}" for nb in ("01_checkpoint_keys", "04_acceptance")
            for ext in ("html", "ipynb")} <= names
    machine = [str(shared["tmp"]), str(REPO), str(Path.home()), os.path.realpath("/tmp"),
               str(shared["home"]), USER]
    for path in files:
        text = ANSI.sub("", path.read_text(encoding="utf-8"))
        for word in machine:
            assert word not in text, (path.relative_to(out), word)
        hits = ABSOLUTE.findall(text)
        assert not hits, (path.relative_to(out), [m for m in ABSOLUTE.finditer(text)][:3])


@pytest.mark.notebook
def test_redacted_paths_are_relative_to_the_drafts_parent(shared):
    s, out = shared["summary"], shared["out"]
    assert s["checkpoint"] == "layers0-flat" and s["out"] == "REPORT_DIR"
    assert s["inputs"]["not_hashed"] == {"target": "TARGET_DIR"}
    assert set(s["redacted_paths"]["placeholders"]) >= {"TARGET_DIR", "PROMPTS", "REPORT_DIR"}
    assert "<title>EAGLE-3 triage: layers0-flat</title>" in (out / "index.html").read_text()
    commands = [f["command"] for f in s["findings"] if f.get("command")]
    assert "eagle3-nb convert layers0-flat layers0-flat-converted --engine sglang==0.5.9" \
        in commands
    assert any("--target TARGET_DIR" in c for c in commands)
    for f in s["findings"]:
        for field in ("todo", "next_step", "command"):
            assert not ABSOLUTE.search(f.get(field) or ""), f
    nb = json.loads((out / "04_acceptance" / "04_acceptance.ipynb").read_text())
    injected = nb["metadata"]["papermill"]["parameters"]
    assert injected["checkpoint"] == "layers0-flat" and injected["target"] == "TARGET_DIR"
    assert injected["prompts"] == "PROMPTS"
    assert injected["output_dir"] == "REPORT_DIR/04_acceptance"


@pytest.mark.notebook
def test_redacted_report_keeps_the_input_hashes(shared):
    s = shared["summary"]
    files = s["inputs"]["checkpoint"]["files"]
    assert files and files == {name: hashlib.sha256((shared["draft"] / name).read_bytes())
                               .hexdigest() for name in files}
    prompts = hashlib.sha256((shared["home"] / "prompts.jsonl").read_bytes()).hexdigest()
    assert s["inputs"]["files"]["prompts"] == {"PROMPTS": prompts}


@pytest.mark.notebook
def test_the_terminal_still_names_the_real_folder(shared):
    """Only what is written is redacted: the lines printed for the user name the report."""
    assert shared["rc"] in (0, 1), shared["stderr"]
    assert f"report:  {shared['out'] / 'index.html'}" in shared["stdout"]
    assert f"markdown: {shared['out'] / 'summary.md'}" in shared["stdout"]


def test_redactor_rewrites_paths_and_nothing_else(tmp_path, monkeypatch):
    home = tmp_path / "home" / USER
    monkeypatch.setenv("HOME", str(home))
    drafts, target = home / "drafts", tmp_path / "models" / "target"
    r = redactor_for([(drafts, RELATIVE), (target, "TARGET_DIR")])
    assert r.text(f"{drafts}/mine/config.json") == "mine/config.json"
    assert r.text(f"cd {drafts} && ls") == "cd . && ls"
    assert r.text(f"--target '{target}/config.json'") == "--target 'TARGET_DIR/config.json'"
    assert r.text(f"{home}/notes.txt") == "~/notes.txt"
    assert r.text(f"{drafts}-old/x.bin") == "~/drafts-old/x.bin"   # a sibling, not the folder
    assert r.text("\x1b[0;32m/opt/env/lib/x.py\x1b[0m:3") == f"\x1b[0;32m{ELIDED}/x.py\x1b[0m:3"
    assert r.text('File "/srv/jobs/7/run.py", line 2') == f'File "{ELIDED}/run.py", line 2'
    untouched = ["https://github.com/org/repo/blob/main/x.py", "vllm/v1/worker/gpu/x.py",
                 "data_samples/target", "a/b", "sha256 " + "ab" * 32, "1/2 of the tokens"]
    assert [r.text(t) for t in untouched] == untouched
    data = {f"{target}/config.json": "ff00", "paths": [str(drafts / "mine"), 3, None]}
    assert r.data(data) == {"TARGET_DIR/config.json": "ff00", "paths": ["mine", 3, None]}


def test_redactor_rewrites_a_notebook_file_in_place(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    drafts = tmp_path / "drafts"
    nb = tmp_path / "report" / "x.ipynb"
    nb.parent.mkdir()
    nb.write_text(json.dumps({"cells": [{"outputs": [{"text": [f"saved {drafts}/d/a.json\n"]}]}],
                              "metadata": {"papermill": {"parameters": {
                                  "checkpoint": str(drafts / "d")}}}}))
    redactor_for([(drafts, RELATIVE), (nb.parent, "REPORT_DIR")]).tree(nb.parent)
    data = json.loads(nb.read_text())
    assert data["cells"][0]["outputs"][0]["text"] == ["saved d/a.json\n"]
    assert data["metadata"]["papermill"]["parameters"]["checkpoint"] == "d"


# ----------------------------------------------------------------------------- --markdown

def _text(node) -> str:
    if isinstance(node, list):
        return "".join(_text(n) for n in node)
    return node.get("raw", "") + _text(node.get("children") or [])


def _tables(markdown: str) -> dict[str, list[dict[str, str]]]:
    """Each GitHub table of MARKDOWN as rows of {header: cell text}, by the heading above it."""
    ast = mistune.create_markdown(renderer=None, plugins=["table"])(markdown)
    tables, heading = {}, None
    for node in ast:
        if node["type"] == "heading":
            heading = _text(node)
        elif node["type"] == "table":
            head, body = node["children"]
            names = [_text(c) for c in head["children"]]
            tables[heading] = [dict(zip(names, (_text(c) for c in row["children"])))
                               for row in body["children"]]
    return tables


@pytest.mark.notebook
def test_markdown_summary_has_the_findings_of_summary_json(shared):
    s = shared["summary"]
    tables = _tables((shared["out"] / "summary.md").read_text(encoding="utf-8"))
    findings = tables["Findings, errors first"]
    assert findings and list(findings[0]) == ["severity", "code", "engine", "message",
                                              "next step", "command"]
    assert {r["code"] for r in findings} == {f["code"] for f in s["findings"]}
    assert {(r["severity"], r["code"], r["message"]) for r in findings} == \
        {(f["severity"], f["code"], f["message"]) for f in s["findings"]}
    for row in findings:
        same = [f for f in s["findings"] if (f["code"], f["message"]) == (row["code"],
                                                                           row["message"])]
        engines = [f["engine"] for f in same]
        assert row["engine"] == (", ".join(engines) if any(engines) else "all")
        # the step and the command name the group's last engine
        assert row["command"] == (same[-1]["command"] or "by hand")


@pytest.mark.notebook
def test_markdown_summary_has_figures_versions_and_hashes(shared):
    s = shared["summary"]
    md = (shared["out"] / "summary.md").read_text(encoding="utf-8")
    tables = _tables(md)
    hashes = {r["input"]: r["sha256"] for r in tables["Input sha256"]}
    for name, digest in s["inputs"]["checkpoint"]["files"].items():
        assert hashes[f"checkpoint {name}"] == digest
    figures = {r["figure"]: r["value"] for r in tables["Key figures"]}
    acc = s["key_figures"]["acceptance"]
    assert figures["mean accept length (trained)"].startswith(f"{acc['mean_accept_length']:.3f}")
    for profile, verdict in s["key_figures"]["verdicts"].items():
        assert figures[f"engine {profile}"].startswith(verdict)
    assert [r["notebook"] for r in tables["Notebooks"]] == [nb["notebook"] for nb in s["notebooks"]]
    assert f"torch {s['versions']['torch']}" in md and s["verdict"]["text"] in md.replace("\\", "")


def test_markdown_cells_render_as_written():
    """A message holding table pipes, emphasis or HTML comes back from the parser as written."""
    from eagle3_nb.report.markdown import code, table, text

    message = "a | b *not bold* _nor this_ <script>x</script> [link](y) $1 + $2 ~~s~~ KEYS_DROPPED"
    command = "eagle3-nb inspect 'a|b' --engine sglang==0.5.9"
    rows = _tables("### t\n\n" + table(["message", "command"], [[text(message), code(command)]]))
    assert rows["t"] == [{"message": message, "command": command}]


# ----------------------------------------------------------------------------- dumps need --target

@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    from conftest import write_dumps

    return write_dumps(tmp_path_factory.mktemp("dumps"), n=2)


def test_dumps_without_target_are_refused_before_anything_runs(dumps, tmp_path):
    """The README's old dump recipe (--hidden-states with --target-config only) on a draft with no
    embed_tokens: exit 2 naming --target, no traceback, nothing written; not a report whose
    notebooks 03 and 04 fail."""
    out = tmp_path / "report"
    rc, stdout, stderr = cli("report", DRAFTS / "good", "--hidden-states", dumps,
                             "--target-config", SAMPLES / "target" / "config.json",
                             "--out", out, home=Path.home())
    assert rc == 2, stdout + stderr
    assert "no embed_tokens" in stderr and "--target TARGET_DIR" in stderr
    assert "03_hidden_state_shapes" in stderr and "Traceback" not in stderr
    assert not out.exists()


def test_dumps_with_target_or_own_embeddings_pass_the_preflight(dumps, tmp_path):
    from eagle3_nb.report.options import ReportOptions, resolve_options

    for draft, target in ((DRAFTS / "good", SAMPLES / "target"), (DRAFTS / "good-speculators",
                                                                  None)):
        opts = resolve_options(ReportOptions(
            checkpoint=draft, hidden_states=dumps, target=target, out=tmp_path / draft.name,
            target_config=SAMPLES / "target" / "config.json"))
        assert opts.hidden_states == dumps.resolve()


# ----------------------------------------------------------------------------- the demo, shared

@pytest.mark.parametrize("flags", [[], ["--redact-paths"], ["--markdown"],
                                   ["--redact-paths", "--markdown"]])
def test_demo_passes_redact_paths_and_markdown_to_the_report(monkeypatch, tmp_path, capsys, flags):
    import eagle3_nb.report.run as report_run
    from eagle3_nb.cli import main

    seen = {}

    def fake(opts, progress=None, kernel_name=None):
        seen["opts"] = opts
        return {"out": str(opts.out), "verdict": {"text": "ERROR: x", "line": "l", "failed": []}}
    monkeypatch.setattr(report_run, "run_report", fake)
    assert main(["demo", "--out", str(tmp_path / "demo"), *flags]) == 0
    opts = seen["opts"]
    assert (opts.redact_paths, opts.markdown) == ("--redact-paths" in flags, "--markdown" in flags)
    assert opts.command == ["eagle3-nb", "demo", "--out", str(tmp_path / "demo"), *flags]
    out, err = capsys.readouterr()
    assert (f"markdown: {tmp_path / 'demo' / 'summary.md'}" in out) == ("--markdown" in flags)
    assert all(flag in err for flag in flags)
