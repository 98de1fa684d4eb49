"""`eagle3-nb report` end to end on the bundled samples: every notebook headless, one offline HTML
page each, index.html and the merged summary.json; skipped and failing notebooks; exit codes;
bad input; the demo; notebook 00's answers; papermill's parameter help for every notebook.

Two real runs, once per module: the full report on layers0-flat with the tiny target, and a
cheap one without a target in which notebook 02 fails."""

from __future__ import annotations

import hashlib
import importlib.metadata
import html
import json
import os
import shutil
import struct
import subprocess
import sys
import zlib
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from conftest import DRAFTS, REPO, SAMPLES

from eagle3_nb import findings
from eagle3_nb.findings import SUMMARY_KINDS, summary_part
from eagle3_nb.checks import triage as triage_check
from eagle3_nb.report import options as report_options
from eagle3_nb.report import run as report_run
from eagle3_nb.report import steps as report_steps
from eagle3_nb.report import summary as report_summary
from eagle3_nb.cli import main
from eagle3_nb.report.notebooks import notebook_parameters

LAYERS0 = DRAFTS / "layers0-flat"
TARGET = SAMPLES / "target"
NOTEBOOKS = report_options.discover_notebooks()
NAMES = [nb.stem for nb in NOTEBOOKS]
NEEDS_TARGET = [nb.stem for nb in NOTEBOOKS if "target" in notebook_parameters(nb)]
ENGINES = ["sglang==0.5.9", "vllm==0.33"]



def cli(*args) -> tuple[int, str, str]:
    # One torch thread in the kernels: the tiny target gains nothing from more, and on a shared
    # 2-core machine OpenMP's spinning threads made notebooks 03/04 several times slower.
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "eagle3_nb.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=600, env=env)
    return proc.returncode, proc.stdout, proc.stderr


# The tests' own cost limits (the demo runs with the kit's defaults, eagle3_nb/defaults.py)
TEST_COST = {"n_samples": "4", "max_new_tokens": "32"}


def cost_parameters() -> list[str]:
    """-p pairs that keep notebooks 03/04 to seconds, for the notebooks that declare them:
    fewer prompts and tokens, and notebook 04 simulates two wirings instead of every one."""
    declared = {n for nb in NOTEBOOKS for n in notebook_parameters(nb)}
    wanted = {**TEST_COST, "what_if": "false", "compare_wiring": ENGINES[0]}
    return [x for name, value in wanted.items() if name in declared for x in ("-p", name, value)]


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report-full")
    prompts = tmp / "prompts.jsonl"  # two of the bundled prompts: a prompts file of our own
    prompts.write_text("".join((SAMPLES / "prompts.jsonl").read_text().splitlines(True)[:2]))
    out = tmp / "report"
    rc, stdout, stderr = cli("report", LAYERS0, "--target", TARGET, "--engine", ENGINES[0],
                             "--engine", ENGINES[1], "--prompts", prompts, "--device", "cpu",
                             "--out", out, *cost_parameters())
    return {"rc": rc, "stdout": stdout, "stderr": stderr, "out": out, "prompts": prompts,
            "summary": json.loads((out / "summary.json").read_text()),
            "index": (out / "index.html").read_text(encoding="utf-8")}


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    """No target (03 and 04 skipped); a plotly renderer that does not exist makes notebooks 01
    and 02, the ones that declare it, raise at run time (a broken input file no longer gets
    that far: the report reads every input first, tests/test_output_safety.py); --fail-on
    never."""
    out = tmp_path_factory.mktemp("report-broken") / "report"
    corpus = out.parent / "corpus.jsonl"
    corpus.write_text('{"input_ids": [1, 2, 3]}\n{"input_ids": [4, 5]}\n')
    rc, stdout, stderr = cli("report", LAYERS0, "--out", out, "--fail-on", "never",
                             "--corpus", corpus, "-p", "plotly_renderer", "bogus")
    return {"rc": rc, "stdout": stdout, "stderr": stderr, "out": out,
            "summary": json.loads((out / "summary.json").read_text()),
            "index": (out / "index.html").read_text(encoding="utf-8")}


@pytest.mark.notebook
def test_notebook_outputs_name_the_report_not_its_staging_folder(full):
    """The report builds beside --out and renames it into place; what the notebooks printed
    names the final folder."""
    pages = list(full["out"].glob("*/*.html")) + list(full["out"].glob("*/*.ipynb"))
    assert pages
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "eagle3nb-tmp" not in text, page
    assert any(str(full["out"]) in p.read_text(encoding="utf-8") for p in pages)


def _by_name(summary: dict) -> dict[str, dict]:
    return {nb["notebook"]: nb for nb in summary["notebooks"]}


# ----------------------------------------------------------------------------- HTML parsing

class Page(HTMLParser):
    """Links, script tags, section ids, and the text of each table row by section."""

    def __init__(self):
        super().__init__()
        self.hrefs, self.scripts, self.sections, self.rows = [], [], [], {}
        self.text, self._section, self._row = [], None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a" and "href" in a:
            self.hrefs.append(a["href"])
        elif tag == "script":
            self.scripts.append(a)
        elif tag == "section":
            self._section = a.get("id")
            self.sections.append(self._section)
        elif tag == "tr":
            self._row = []

    def handle_endtag(self, tag):
        if tag == "tr" and self._row is not None:
            self.rows.setdefault(self._section, []).append(" ".join(self._row))
            self._row = None

    def handle_data(self, data):
        self.text.append(data)
        if self._row is not None and data.strip():
            self._row.append(data.strip())


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    return page


# ----------------------------------------------------------------------------- full run

@pytest.mark.notebook
def test_full_run_exit_code_and_progress(full):
    assert full["rc"] == 1, full["stderr"][-3000:]  # layers0-flat has error findings
    for i, name in enumerate(NAMES, 1):
        assert f"[{i}/{len(NAMES)}] {name} ... ok (" in full["stderr"], full["stderr"][-3000:]
    assert f"report:  {full['out'] / 'index.html'}" in full["stdout"]
    assert full["stdout"].startswith("verdict: ERROR")
    assert "sglang==0.5.9: silent_failure (KEYS_DROPPED, PARAMS_UNLOADED)" in full["stdout"]


@pytest.mark.notebook
def test_every_notebooks_summary_declares_its_kind(full):
    """The report reads each part by the kind it declares, never by the keys it holds."""
    kinds = {}
    for name in NAMES:
        part = json.loads((full["out"] / name / "summary.json").read_text())
        assert part["summary_version"] == findings.SUMMARY_VERSION, name
        kinds[name] = part["kind"]
    assert kinds == {"00_triage": "triage", "01_checkpoint_keys": "inspection",
                     "02_d2t_mapping": "vocab", "03_hidden_state_shapes": "hidden_states",
                     "04_acceptance": "acceptance"}
    assert set(kinds.values()) <= set(SUMMARY_KINDS)


def _one_cell_notebook(folder: Path, name: str, code: str) -> Path:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "eagle3-nb", "display_name": "eagle3-nb",
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell('checkpoint: str = ""\noutput_dir: str = ""',
                                          metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell(code)]
    folder.mkdir(exist_ok=True)
    nbformat.write(nb, str(folder / name))
    return folder / name


@pytest.mark.notebook
def test_a_summary_part_without_a_kind_fails_its_notebook(tmp_path):
    """A summary.json the report cannot place by its kind (one written by hand, or by another
    summary version) fails its step; a part built with findings.summary_part is read."""
    folder = tmp_path / "notebooks"
    keyless = _one_cell_notebook(folder, "10_keyless.ipynb", (
        "import json, pathlib\n"
        "pathlib.Path(output_dir, 'summary.json').write_text(json.dumps(\n"
        "    {'summary_version': 2, 'verdicts': {}, 'findings': []}))"))
    kinded = _one_cell_notebook(folder, "11_kinded.ipynb", (
        "from eagle3_nb.findings import summary_part\n"
        "from eagle3_nb.report.notebooks import write_summary\n"
        "write_summary(output_dir, '11_kinded', summary_part('vocab', '', {'format': 'offset',\n"
        "    'valid': True, 'codes': [], 'coverage': None, 'findings': []}))"))
    summary = report_run.run_report(report_options.ReportOptions(
        checkpoint=LAYERS0, out=tmp_path / "out", notebooks=[keyless, kinded], fail_on="never"),
        progress=lambda line: None)
    steps = {s["notebook"]: s for s in summary["notebooks"]}
    assert steps["10_keyless"]["status"] == "failed"
    assert "declares no kind the report reads" in steps["10_keyless"]["error"]
    assert steps["11_kinded"]["status"] == "ok"
    assert summary["key_figures"]["d2t"]["format"] == "offset"
    assert "verdicts" not in summary["key_figures"]  # never read from the keyless part


@pytest.mark.notebook
def test_full_run_notebooks_ran_in_order_with_their_own_parameters(full):
    s, out = full["summary"], full["out"]
    assert [nb["notebook"] for nb in s["notebooks"]] == NAMES
    for nb, path in zip(s["notebooks"], NOTEBOOKS):
        assert nb["status"] == "ok" and nb["seconds"] > 0 and nb["error"] is None, nb
        for kind in ("html", "ipynb", "summary"):
            assert nb[kind] and (out / nb[kind]).is_file(), (nb["notebook"], kind)
        assert nb["html"] == f"{nb['notebook']}/{nb['notebook']}.html"
        declared = notebook_parameters(path)
        assert set(nb["parameters"]) <= set(declared)
        assert nb["parameters"]["checkpoint"] == str(LAYERS0.resolve())
        if "engine" in declared:
            assert nb["parameters"]["engine"] == ",".join(ENGINES)
        if "interactive" in declared:
            assert nb["parameters"]["interactive"] is False
        written = json.loads((out / nb["summary"]).read_text())
        assert written["notebook"] == nb["notebook"]
    by = _by_name(s)
    # --target implies the target's config.json and tokenizer.json where a notebook takes them
    assert by["01_checkpoint_keys"]["parameters"]["target_config"] == str(TARGET / "config.json")
    assert by["02_d2t_mapping"]["parameters"]["tokenizer"] == str(TARGET / "tokenizer.json")
    assert by["03_hidden_state_shapes"]["parameters"]["target"] == str(TARGET)
    n = int(TEST_COST["n_samples"])
    assert by["03_hidden_state_shapes"]["parameters"]["n_samples"] == n  # -p, typed
    assert "n_samples" not in by["01_checkpoint_keys"]["parameters"]
    executed = full["out"] / "03_hidden_state_shapes" / "03_hidden_state_shapes.ipynb"
    assert f"n_samples = {n}" in executed.read_text()  # papermill injected the override


@pytest.mark.notebook
def test_full_run_findings_are_merged_and_ordered(full):
    s, out = full["summary"], full["out"]
    findings = s["findings"]
    ranks = [report_summary.SEVERITY_ORDER[f["severity"]] for f in findings]
    assert ranks == sorted(ranks) and ranks[0] == 0
    # every finding of every notebook's summary.json is in the merged list, with its notebook
    merged = {(f["code"], f["severity"], f["engine"], f["message"]): f for f in findings}
    for nb in s["notebooks"]:
        for f in json.loads((out / nb["summary"]).read_text()).get("findings", []):
            entry = merged[(f["code"], f["severity"], f["engine"], f["message"])]
            assert nb["notebook"] in entry["notebooks"]
    dropped = merged[next(k for k in merged if k[0] == "KEYS_DROPPED" and k[2] == ENGINES[0])]
    assert dropped["notebooks"][:2] == ["00_triage", "01_checkpoint_keys"]
    assert f"--engine {ENGINES[0]}" in dropped["todo"] and dropped["meaning"]
    assert all(f["todo"] for f in findings)
    # the front page's "what to do" column carries the command that does the step
    assert dropped["command"] and html.escape(f"$ {dropped['command']}") in full["index"]
    assert "03_hidden_state_shapes" in NAMES  # notebook 03's own finding on the dropped layer
    collapse = merged[next(k for k in merged if k[0] == "HIDDEN_COLLAPSES")]
    assert collapse["engine"] == ENGINES[0] and "03_hidden_state_shapes" in collapse["notebooks"]
    v = s["verdict"]
    assert v["worst_severity"] == "error" and v["failed"] == [] and v["skipped"] == []
    assert v["codes"]["error"][:2] == ["KEYS_DROPPED", "PARAMS_UNLOADED"]  # 04 may add more
    assert v["text"].startswith("ERROR: errors KEYS_DROPPED, PARAMS_UNLOADED")
    assert v["counts"]["error"] == sum(f["severity"] == "error" for f in findings) > 0
    assert s["exit_code"] == 1 and s["fail_on"] == "error"


@pytest.mark.notebook
def test_full_run_key_figures(full):
    k = full["summary"]["key_figures"]
    assert k["verdicts"] == {ENGINES[0]: "silent_failure", ENGINES[1]: "ok"}
    assert k["aux_layers"][ENGINES[1]]["captured"] == [2, 4, 5]
    assert k["d2t"]["format"] == "offset" and k["d2t"]["valid"] is True
    acc = k["first_step_accuracy"]
    assert acc["single_layer"]["fc_applied"] is False
    assert acc["single_layer"]["accuracy"] < 0.5 * acc["trained"]["accuracy"]
    assert set(ENGINES) <= set(acc)
    assert "04_acceptance" in NAMES
    a = k["acceptance"]
    assert a["wiring"] == "trained" and a["mean_accept_length"] > 1
    assert a["compare"]["mean_accept_length"] < a["mean_accept_length"]


@pytest.mark.notebook
def test_full_run_provenance(full):
    s = full["summary"]
    assert s["kind"] == "eagle3-nb report" and s["unused_options"] == []
    versions = s["versions"]
    assert set(versions) == {"python", *report_summary.PACKAGES}
    for name in report_summary.PACKAGES:
        assert versions[name] == importlib.metadata.version(name)
    assert versions["python"] == ".".join(map(str, sys.version_info[:3]))

    def sha(path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()

    files = s["inputs"]["checkpoint"]["files"]
    assert files == {"config.json": sha(LAYERS0 / "config.json"),
                     "model.safetensors": sha(LAYERS0 / "model.safetensors")}
    hashed = s["inputs"]["files"]
    assert hashed["target_config"] == {str(TARGET / "config.json"): sha(TARGET / "config.json")}
    assert hashed["tokenizer"] == {str(TARGET / "tokenizer.json"): sha(TARGET / "tokenizer.json")}
    prompts = full["prompts"].resolve()
    assert hashed["prompts"] == {str(prompts): sha(prompts)}
    assert s["inputs"]["not_hashed"] == {"target": str(TARGET)}
    assert s["command"][:3] == ["eagle3-nb", "report", str(LAYERS0)]
    assert "--fail-on" not in s["command"] and s["command"].count("--engine") == 2


@pytest.mark.notebook
def test_index_html_verdict_findings_and_links(full):
    out, html = full["out"], full["index"]
    page = parse(html)
    assert page.sections == ["verdict", "notebooks", "findings", "figures", "inputs"]
    text = " ".join(page.text)
    assert "ERROR:" in text and "silent failure" in text
    assert full["summary"]["verdict"]["text"] in text
    assert not page.scripts and "http://" not in html and "https://" not in html  # offline
    for nb in full["summary"]["notebooks"]:
        assert nb["html"] in page.hrefs
    for href in page.hrefs:
        assert not href.startswith(("/", "file:")) and (out / href).is_file(), href
    # findings table: severities never go back up (error, then warning, then info)
    severities = [row.split()[0] for row in page.rows["findings"][1:]]
    assert severities and severities[0] == "error"
    ranks = [report_summary.SEVERITY_ORDER[s] for s in severities]
    assert ranks == sorted(ranks)
    dropped = next(r for r in page.rows["findings"] if "KEYS_DROPPED" in r)
    assert ENGINES[0] in dropped and "eagle3-nb convert" in dropped and "00_triage" in dropped
    figures = " ".join(page.rows["figures"])
    assert "d2t format offset" in figures and "single_layer" in figures
    assert hashlib.sha256((LAYERS0 / "config.json").read_bytes()).hexdigest() in html


@pytest.mark.notebook
def test_notebook_pages_are_offline(full):
    for nb in full["summary"]["notebooks"]:
        html = (full["out"] / nb["html"]).read_text(encoding="utf-8")
        srcs = [t.split(">", 1)[0] for t in html.split("<script")[1:] if "src=" in
                t.split(">", 1)[0]]
        assert not [t for t in srcs if "http" in t], (nb["notebook"], srcs)
        assert "widget-state" not in html
    nb03 = (full["out"] / "03_hidden_state_shapes" / "03_hidden_state_shapes.html").read_text()
    assert "Plotly.newPlot" in nb03 and "First-step" in nb03


@pytest.mark.notebook
def test_notebook_00_summary_and_page(full):
    out = full["out"] / "00_triage"
    s = json.loads((out / "summary.json").read_text())
    assert s["notebook"] == "00_triage" and s["verdicts"][ENGINES[0]] == "silent_failure"
    assert s["top_findings"][0]["severity"] == "error" and s["top_findings"][0]["todo"]
    flags = [f["flag"] for f in s["engine_flags"]]
    assert "--speculative-algorithm EAGLE3" in flags
    assert any('"method": "eagle3"' in f for f in flags)
    html = (out / "00_triage.html").read_text(encoding="utf-8")
    for words in ("Engine flags to check by hand", "next thing to try",
                  "--speculative-algorithm EAGLE3", "silent failure"):
        assert words in html, words


# ----------------------------------------------------------------------------- skipped, failed

@pytest.mark.notebook
def test_skipped_and_failed_notebooks(broken):
    s, out = broken["summary"], broken["out"]
    assert broken["rc"] == 0, broken["stderr"][-3000:]  # --fail-on never
    by = _by_name(s)
    assert by["00_triage"]["status"] == "ok"
    for name in ("01_checkpoint_keys", "02_d2t_mapping"):
        failed = by[name]
        assert failed["status"] == "failed" and failed["exception"] and failed["cell"]
        assert failed["error"].startswith(f"cell [{failed['cell']}] raised {failed['exception']}:")
        assert "bogus" in failed["error"]
        assert f"{name} ... FAILED" in broken["stderr"]
        page = (out / failed["html"]).read_text(encoding="utf-8")
        assert "An Exception was encountered" in page and failed["exception"] in page
        assert (out / failed["ipynb"]).is_file() and failed["summary"] is None
    corpus = (out.parent / "corpus.jsonl").resolve()
    assert s["inputs"]["files"]["corpus"] == {
        str(corpus): hashlib.sha256(corpus.read_bytes()).hexdigest()}
    assert "[3/" in broken["stderr"]
    for name in NEEDS_TARGET:
        skipped = by[name]
        assert skipped["status"] == "skipped" and "no --target" in skipped["reason"]
        assert "--target DIR" in skipped["enable"] and skipped["html"] is None
        assert not (out / name).exists()
        assert f"{name} ... skipped" in broken["stderr"]
    v = s["verdict"]
    assert v["failed"] == ["01_checkpoint_keys", "02_d2t_mapping"]
    assert v["skipped"] == NEEDS_TARGET
    assert s["exit_code"] == 0 and "FAILED:" in v["text"] and "02_d2t_mapping" in v["text"]
    rows = parse(broken["index"]).rows["notebooks"]
    row02 = next(r for r in rows if r.startswith("02_d2t_mapping"))
    assert "FAILED" in row02 and by["02_d2t_mapping"]["exception"] in row02
    row03 = next(r for r in rows if r.startswith(NEEDS_TARGET[0]))
    assert "skipped" in row03 and "--target DIR" in row03
    assert s["inputs"]["files"].get("target_config") is None  # no bundled default slipped in
    assert by["01_checkpoint_keys"]["parameters"]["target_config"] == ""


def test_exit_code_follows_fail_on():
    def verdict(errors=0, warnings=0, failed=()):
        return {"counts": {"error": errors, "warning": warnings, "info": 3},
                "failed": list(failed)}
    cases = [(verdict(), 0, 0, 0), (verdict(warnings=1), 0, 1, 0), (verdict(errors=1), 1, 1, 0),
             (verdict(failed=["02"]), 1, 1, 0)]
    for v, on_error, on_warning, never in cases:
        assert report_summary.exit_code(v, "error") == on_error
        assert report_summary.exit_code(v, "warning") == on_warning
        assert report_summary.exit_code(v, "never") == never


# ----------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("args, words", [
    (["{tmp}/no-such-draft"], "no such directory"),
    (["{draft}", "--target", "{tmp}/no-target"], "--target"),
    (["{draft}", "--target", "{tmp}"], "no config.json in the target"),
    (["{draft}", "--corpus", "{tmp}/none.jsonl"], "--corpus"),
    (["{draft}", "--observed", "{tmp}/metrics.log"], "--observed"),
    (["{draft}", "--engine", "tgi==1.0"], "no engine called 'tgi'"),
    (["{draft}", "-p", "checkpont", "x"], "no notebook declares parameter(s) ['checkpont']"),
    (["{draft}", "-p", "n_samples", "many"], "'many' is not of type int"),
    (["{draft}", "-p", "target", "{tmp}"], "use --target instead"),
    (["{draft}", "--num-steps", "0"], "--num-steps"),
    pytest.param(["{draft}", "--device", "cuda"], "no GPU", marks=pytest.mark.skipif(
        __import__("torch").cuda.is_available(), reason="a GPU is visible")),
    (["{draft}", "--out", "{draft}/report"], "inside the checkpoint"),
    (["{draft}", "--launch", "echo hello"], "starts no SGLang or TensorRT-LLM or vLLM server"),
])
def test_bad_input_exits_2_and_writes_nothing(args, words, tmp_path, capsys):
    draft = tmp_path / "draft"
    shutil.copytree(LAYERS0, draft)
    before = sorted(p.name for p in draft.iterdir())
    argv = [a.format(tmp=tmp_path, draft=draft) for a in args]
    if "--out" not in argv:
        argv += ["--out", str(tmp_path / "out")]
    assert main(["report", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("eagle3-nb: error:") and err.count("\n") == 1 and words in err, err
    assert not (tmp_path / "out").exists()
    assert sorted(p.name for p in draft.iterdir()) == before


def test_non_empty_out_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["report", str(LAYERS0), "--out", str(out)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert main(["report", str(LAYERS0), "--out", str(out), "--overwrite"]) == 2
    assert "not report output" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    assert (out / "notes.txt").read_text() == "mine"


def test_overwrite_replaces_only_an_earlier_report(tmp_path):
    earlier = tmp_path / "earlier"
    (earlier / "01_checkpoint_keys").mkdir(parents=True)
    (earlier / "index.html").write_text("old")
    (earlier / "01_checkpoint_keys" / "01_checkpoint_keys.html").write_text("old")
    (earlier / report_options.MARKER).write_text("")  # the marker of a report older than its list
    with pytest.raises(report_options.OutputExistsError):
        report_options.check_out(earlier, overwrite=False)
    report_options.check_out(earlier, overwrite=True)
    # a file the report did not write is never deleted, marker or not (before: rmtree)
    (earlier / "anything.txt").write_text("inside a marked report")
    with pytest.raises(report_options.OutputExistsError, match="anything.txt"):
        report_options.check_out(earlier, overwrite=True)
    old_demo = tmp_path / "old-demo"  # what the notebook-01-only demo used to leave
    old_demo.mkdir()
    for name in ("01_checkpoint_keys.html", "01_checkpoint_keys.ipynb", "summary.json"):
        (old_demo / name).write_text("x")
    report_options.check_out(old_demo, overwrite=True)
    report_options.check_out(tmp_path / "new", overwrite=False)


# ----------------------------------------------------------------------------- units

def test_parameters_per_notebook_and_skips():
    opts = report_options.ReportOptions(checkpoint=LAYERS0, hidden_states=Path("/dumps"))
    with_dumps = {"target": {}, "hidden_states": {}}
    assert report_steps.skip_reason(with_dumps, opts) is None
    why, how = report_steps.skip_reason({"target": {}}, opts)
    assert "--hidden-states alone" in why and "--target DIR" in how
    assert report_steps.skip_reason({"checkpoint": {}}, opts) is None
    assert report_steps.coerce("3", "int", "n") == 3 and report_steps.coerce("no", "bool", "b") is False
    assert report_steps.coerce(4, "str", "s") == "4" and report_steps.coerce("1.5", "float", "f") == 1.5
    values = report_steps.report_values(opts)
    assert values["target_config"] == "" and values["tokenizer"] == ""  # never bundled defaults
    assert values["prompts"] is None and values["engine"] == ""  # each engine's newest


def test_options_no_notebook_takes_are_reported():
    opts = report_options.ReportOptions(checkpoint=LAYERS0, observed="1.02", wiring="trained",
                                notebooks=[REPO / "notebooks" / "01_checkpoint_keys.ipynb"])
    assert report_steps.unused_options(opts) == ["--observed", "--wiring"]


def test_next_step_names_the_engine_and_checkpoint():
    text = findings.next_step("KEYS_DROPPED", ["sglang==0.4.10", "sglang==0.5.9"], "/d/x")
    assert "eagle3-nb convert /d/x /d/x-converted --engine sglang==0.5.9" in text
    assert "likewise for sglang==0.4.10" in text
    assert "the engine version you serve with" in findings.next_step("KEYS_DROPPED")
    assert set(findings.CODES) <= set(findings.NEXT_STEPS)  # every code has a next step


def test_key_figures_read_an_acceptance_summary():
    step = report_steps.Step("04_acceptance", Path("04_acceptance.ipynb"), {}, status="ok")
    step.summary = summary_part("acceptance", step.name, {
        "headline": {"wiring": "trained", "mean_accept_length": 2.5},
        "compare": {"wiring": "sglang==0.5.9", "mean_accept_length": 1.07},
        "what_if": {"observed_accept_length": 1.03, "explanation": "because",
                    "rows": [{"wiring": "single_layer", "mean_accept_length": 1.0,
                              "consistent": True, "error": None}]}})
    a = report_summary.key_figures([step])["acceptance"]
    assert a["mean_accept_length"] == 2.5 and a["compare"]["mean_accept_length"] == 1.07
    assert a["observed"] == 1.03 and a["what_if"]["single_layer"]["consistent"] is True
    from eagle3_nb.viz.triage import _acceptance_table
    html = _acceptance_table(a)
    for words in ("mean accept length (trained)", "2.5", "the engine reported", "because",
                  "single_layer", "matches"):
        assert words in html, words
    step.summary = summary_part("acceptance", step.name, {"headline": "not a dict",
                                                          "what_if": None})  # not crashed on
    assert report_summary.key_figures([step])["acceptance"]["mean_accept_length"] is None


def test_key_figures_label_dump_accuracy_and_unmeasured_wirings():
    step = report_steps.Step("03_hidden_state_shapes", Path("03.ipynb"), {}, status="ok")
    row = {"accuracy": None, "width": None, "fc_applied": None, "error": None}
    step.summary = summary_part("hidden_states", step.name, {
        "reference": "recorded tokens (teacher-forced)", "wirings": [
            {"wiring": {"name": "trained"}, **row, "accuracy": 0.4, "width": 192,
             "fc_applied": True},
            {"wiring": {"name": "layers_plus_one"}, **row, "unmeasured": "the dump lacks 6"}]})
    k = report_summary.key_figures([step])
    assert k["first_step_reference"] == "recorded tokens (teacher-forced)"
    from eagle3_nb.viz.triage import _accuracy_table
    html = _accuracy_table(k["first_step_accuracy"], k["first_step_reference"])
    assert "against recorded tokens (teacher-forced)" in html and "the dump lacks 6" in html
    live = report_steps.Step("03_hidden_state_shapes", Path("03.ipynb"), {}, status="ok",
                       summary=summary_part("hidden_states", "03",
                                            {"wirings": step.summary["wirings"][:1]}))
    assert "greedy" in report_summary.key_figures([live])["first_step_reference"]


@pytest.mark.parametrize("sample, flag", [("good-speculators", "--model TARGET"),
                                          ("short-context",
                                           "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")])
def test_engine_flags_follow_the_inspection(sample, flag):
    from eagle3_nb.checks.load import inspect_checkpoint

    data = inspect_checkpoint(DRAFTS / sample, target_config=TARGET / "config.json",
                              stats=False).to_json()
    flags = [r["flag"] for r in triage_check.engine_flags(data)]
    assert any(flag in f for f in flags), flags
    assert all(r["source"] for r in triage_check.engine_flags(data))


def test_demo_runs_the_report_on_layers0_flat(monkeypatch, tmp_path, capsys):
    seen = {}

    def fake(opts, progress=None, kernel_name=None):
        seen["opts"] = opts
        return {"out": str(opts.out), "verdict": {"text": "ERROR: x", "line": "l", "failed": []}}
    monkeypatch.setattr(report_run, "run_report", fake)
    assert main(["demo", "--out", str(tmp_path / "demo")]) == 0
    opts = seen["opts"]
    assert opts.checkpoint == DRAFTS / "layers0-flat" and opts.target == SAMPLES / "target"
    assert opts.overwrite and opts.fail_on == "never"
    assert "sglang==0.5.9" in opts.engines    # the release that drops its keys: the story
    out = capsys.readouterr().out
    assert f"report:  {tmp_path / 'demo' / 'index.html'}" in out and "verdict: ERROR" in out


# ----------------------------------------------------------------------------- papermill help

@pytest.mark.notebook
def test_papermill_help_notebook_documents_every_parameter():
    papermill = Path(sys.executable).parent / "papermill"
    for nb in NOTEBOOKS:
        proc = subprocess.run([str(papermill), "--help-notebook", str(nb)], capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        params = notebook_parameters(nb)
        assert params, nb.name
        for name, p in params.items():
            assert p["inferred_type_name"] not in (None, "", "None"), (nb.name, name)
            assert p["help"].strip(), (nb.name, name)
            assert f"{name}: {p['inferred_type_name']}" in proc.stdout, (nb.name, name)
            assert p["help"].strip()[:40] in proc.stdout, (nb.name, name)


# ----------------------------------------------------------------------------- browser

def read_png(path: Path) -> np.ndarray:
    """8-bit RGB/RGBA PNG -> array [h, w, channels] (the five PNG row filters, no library)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    assert depth == 8 and ctype in (2, 6)
    bpp = 3 if ctype == 2 else 4
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + w * bpp)
    out = np.zeros((h, w * bpp), np.uint8)
    prev = np.zeros(w * bpp, np.int64)
    for y in range(h):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int64)
        if f == 0:
            cur = line
        elif f == 1:
            cur = np.cumsum(line.reshape(w, bpp), axis=0).reshape(-1) % 256
        elif f == 2:
            cur = (line + prev) % 256
        else:
            cur = np.array(_unfilter_row(f, line.tolist(), prev.tolist(), bpp), np.int64)
        out[y], prev = cur, cur
    return out.reshape(h, w, bpp)


def _unfilter_row(f: int, line: list[int], prev: list[int], bpp: int) -> list[int]:
    cur = [0] * len(line)
    for x, v in enumerate(line):
        a = cur[x - bpp] if x >= bpp else 0
        b, c = prev[x], prev[x - bpp] if x >= bpp else 0
        if f == 3:
            cur[x] = (v + (a + b) // 2) & 255
        else:  # Paeth
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            cur[x] = (v + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    return cur


@pytest.mark.notebook
@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium not installed")
def test_pages_render_in_headless_chromium(full, tmp_path):
    shots = {}
    for name, page in (("index", full["out"] / "index.html"),
                       ("nb03", full["out"] / "03_hidden_state_shapes" /
                        "03_hidden_state_shapes.html")):
        png = tmp_path / f"{name}.png"
        subprocess.run(["chromium", "--headless", "--disable-gpu", "--no-sandbox",
                        "--virtual-time-budget=10000", f"--screenshot={png}",
                        "--window-size=1200,2400", page.as_uri()],
                       capture_output=True, timeout=180)
        assert png.is_file(), name
        shots[name] = read_png(png)[..., :3].astype(int)
    for name, img in shots.items():
        colours = np.unique(img.reshape(-1, 3)[::7], axis=0)
        assert len(colours) > 20, name  # not a blank page
    red = shots["index"]
    assert ((red[..., 0] > 150) & (red[..., 1] < 80) & (red[..., 2] < 80)).sum() > 500  # badges
    img = shots["nb03"]  # plotly drew the accuracy bars offline (a large saturated blue area)
    blue = (img[..., 2] > 150) & (img[..., 0] < 100) & (img[..., 2] - img[..., 1] > 60)
    assert blue.sum() > 20_000, blue.sum()


def test_observed_without_a_target_is_said_to_be_unused_and_read_on_its_own():
    opts = report_options.resolve_options(report_options.ReportOptions(checkpoint=LAYERS0,
                                                               observed="1.0"))
    steps = report_steps.plan_steps(opts)
    assert "--observed" in report_steps.unused_options(opts, steps)
    assert "04_acceptance takes it but is skipped" in report_steps.skipped_takers("--observed", steps)
    assert "structural failure" in report_steps.observed_floor_note("1.0")
    assert report_steps.observed_floor_note("2.4") == ""


def test_the_verdict_says_what_the_inspection_did_not_check():
    steps = [report_steps.Step("01_checkpoint_keys", REPO / "notebooks" / "01_checkpoint_keys.ipynb",
                             {}, status="ok",
                             summary=summary_part("inspection", "01_checkpoint_keys", {
                                 "verdicts": {"vllm==0.33": "ok"},
                                 "unchecked": [{"what": "the target"}]}))]
    figures = report_summary.key_figures(steps)
    verdict = report_summary.overall_verdict([], steps, figures)
    assert verdict["worst_severity"] == "ok"
    assert "not checked: the target" in verdict["text"]


# ----------------------------------------------------------------------------- report --launch

SGLANG_EAGLE = ("python -m sglang.launch_server --model-path /models/target "
                "--speculative-algorithm EAGLE --speculative-draft-model-path /models/draft "
                "--speculative-num-steps 3 --speculative-eagle-topk 4 "
                "--speculative-num-draft-tokens 8")


def test_launch_goes_to_notebook_00_and_a_file_is_made_absolute(tmp_path, monkeypatch):
    (tmp_path / "serve.sh").write_text(SGLANG_EAGLE + "\n")
    monkeypatch.chdir(tmp_path)
    opts = report_options.resolve_options(report_options.ReportOptions(
        checkpoint=LAYERS0, out=tmp_path / "r", launch="serve.sh"))
    assert opts.launch == str(tmp_path / "serve.sh")
    steps = {s.name: s for s in report_steps.plan_steps(opts)}
    assert steps["00_triage"].parameters["launch"] == opts.launch
    assert "--launch" not in report_steps.unused_options(opts, list(steps.values()))


@pytest.mark.notebook
def test_report_launch_findings_reach_the_front_page(tmp_path):
    """Before: report had no --launch; inspect --launch was the only way to see these."""
    opts = report_options.ReportOptions(checkpoint=LAYERS0, out=tmp_path / "r", launch=SGLANG_EAGLE,
                                    engines=["sglang==0.5.23"], fail_on="never",
                                    notebooks=[REPO / "notebooks" / "00_triage.ipynb"])
    summary = report_run.run_report(opts, progress=lambda line: None)
    launch = [f for f in summary["findings"] if f["code"] == "LAUNCH_SETTING"]
    assert launch and launch[0]["severity"] == "error"
    assert launch[0]["evidence"]["launch"]["num_steps"] == 3
    index = (tmp_path / "r" / "index.html").read_text(encoding="utf-8")
    assert "LAUNCH_SETTING" in index and "--speculative-algorithm is EAGLE" in index


def test_a_findings_own_step_wins_on_the_front_page():
    """A finding that brings its own next step (a log signature's, or convert ruled out:
    checks.load) is told that step in the report, not its code's default."""
    own = {"code": "KEYS_DROPPED", "severity": "error", "engine": ENGINES[0], "message": "m",
           "notebooks": ["01_checkpoint_keys"], "next_step": "the finding's own step",
           "command": None}
    group = report_summary.group_findings([own], str(LAYERS0))[0]
    assert group["todo"] == "the finding's own step" and group["command"] is None
    step = report_steps.Step("01_checkpoint_keys", Path("01_checkpoint_keys.ipynb"), {})
    step.summary = {"findings": [{**own, "evidence": {"next_step": "the finding's own step",
                                                       "command": None}}]}
    merged = report_summary.merge_findings([step], str(LAYERS0))[0]
    assert merged["todo"] == "the finding's own step" and merged["command"] is None



# sgl-project/sglang#8230's own line: index out of bounds while capturing the draft's CUDA
# graph, a crash no signature explains (tests/test_log.py THREADS)
UNEXPLAINED_CRASH = ('/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:93: operator(): block: '
                     '[0,0,0], thread: [0,0,0] Assertion `-sizes[i] <= index && index < sizes[i] '
                     '&& "index out of bounds"` failed.\n')


@pytest.mark.notebook
def test_an_unexplained_crash_gets_its_ab_plan_in_notebook_00_and_on_the_front_page(tmp_path):
    from eagle3_nb.checks.log import check_log_text
    from eagle3_nb.viz.html import esc

    log = tmp_path / "server.log"
    log.write_text(UNEXPLAINED_CRASH)
    expected = check_log_text(UNEXPLAINED_CRASH, "sglang==0.5.23").ab_plan
    assert expected  # the reading itself offers a plan
    out = tmp_path / "r"
    summary = report_run.run_report(report_options.ReportOptions(
        checkpoint=LAYERS0, out=out, log=log, engines=["sglang==0.5.23"], fail_on="never",
        notebooks=[REPO / "notebooks" / "00_triage.ipynb"]), progress=lambda line: None)
    assert summary["key_figures"]["ab_plan"] == expected
    index = (out / "index.html").read_text(encoding="utf-8")
    page = (out / "00_triage" / "00_triage.html").read_text(encoding="utf-8")
    for html in (index, page):
        assert "A/B plan for the crash in the log" in html
        for row in expected:
            assert esc(row["setting"]) in html and esc(row["rules_out"]) in html


def test_no_ab_plan_section_without_an_unexplained_crash(tmp_path):
    from eagle3_nb.viz.triage import index_html

    summary = {"checkpoint": "d", "findings": [], "key_figures": {"ab_plan": []},
               "verdict": {"text": "OK", "worst_severity": "ok", "counts": {}, "failed": [],
                           "skipped": []}, "notebooks": []}
    assert "A/B plan" not in index_html(summary, [])
