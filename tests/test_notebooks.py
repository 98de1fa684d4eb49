"""The notebooks as CI sees them: stored clean, parameters documented, executed headless with
papermill on the bundled samples (correctness lives in the summary.json each one writes),
rendered to offline HTML, and run by nbval in lax mode."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from conftest import DRAFTS, REPO, SAMPLE_ENGINES, TARGET_CONFIG

from eagle3_nb.engines import newest_profiles
from eagle3_nb.findings import NEWEST_RELEASES, evidence_line

SAMPLE_ENGINE_PARAM = ",".join(e.replace("==", ":") for e in SAMPLE_ENGINES)

NOTEBOOKS_DIR = REPO / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
NB01 = NOTEBOOKS_DIR / "01_checkpoint_keys.ipynb"
MANIFEST = DRAFTS / "manifest.json"
MAX_CELL_LINES = 12  # "a cell longer than ~10 lines is a missing function"
NB01_PARAMS = {"checkpoint": "str", "engine": "str", "target_config": "str", "stats": "bool",
               "interactive": "bool", "plotly_renderer": "str", "compare_to": "str",
               "inspection": "str", "output_dir": "str"}
# issue 2: notebook 01 runs under papermill on every bundled sample draft
# Notebook 01 under papermill on the samples whose paths through it differ (dialect, layout,
# weights format, load error, NaN stats, name:version engines, the widget); every sample's
# cells run in-process in test_catalogue.test_notebook_01_cells_on_every_sample.
SAMPLES_01 = ["good", "good-speculators", "layers0-flat", "nan-head", "pickle-bin",
              "prefix-draft-model", "sharded", "wrong-arch"]
NB02 = NOTEBOOKS_DIR / "02_d2t_mapping.ipynb"
NB02_PARAMS = {"checkpoint": "str", "tokenizer": "str", "corpus": "str", "interactive": "bool",
               "plotly_renderer": "str", "output_dir": "str"}

ids = [nb.stem for nb in NOTEBOOKS]


def _read(nb: Path):
    return nbformat.read(str(nb), as_version=4)


def _parameter_cells(nb) -> list:
    return [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]


# ----------------------------------------------------------------------------- stored form

def test_there_are_notebooks():
    assert NB01 in NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_notebook_is_stored_clean_and_thin(path):
    nb = _read(path)
    nbformat.validate(nb)
    assert len(_parameter_cells(nb)) == 1, "exactly one cell tagged `parameters`"
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# "), \
        "a title cell first"
    assert nb.metadata.get("kernelspec", {}).get("name") == "eagle3-nb"  # test_kernel.py
    assert "widgets" not in nb.metadata and "papermill" not in nb.metadata
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        assert cell.outputs == [], f"stored output in: {cell.source[:60]!r}"
        assert cell.execution_count is None
        assert "papermill" not in cell.metadata and "execution" not in cell.metadata
        n = len(cell.source.strip().splitlines())
        if "parameters" in cell.metadata.get("tags", []):
            continue  # declarations, one per line: no logic to move
        assert n <= MAX_CELL_LINES, f"{n}-line cell (move it into eagle3_nb): {cell.source[:60]!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_every_parameter_has_a_type_and_help(path):
    import papermill as pm

    params = pm.inspect_notebook(str(path))
    assert params, "papermill finds no parameters"
    src = _parameter_cells(_read(path))[0].source
    assert len(params) == sum(1 for line in src.splitlines() if line.strip()
                              and not line.strip().startswith("#")), \
        "papermill skipped a line (a '=' in a help comment?)"
    for name, p in params.items():
        assert p["inferred_type_name"] not in ("None", "", None), name
        assert p["help"].strip(), f"{name} has no help comment"
    if path == NB01:
        assert {n: p["inferred_type_name"] for n, p in params.items()} == NB01_PARAMS


@pytest.mark.notebook
def test_papermill_help_notebook_lists_the_parameters():
    proc = subprocess.run([sys.executable, "-m", "papermill", "--help-notebook", str(NB01)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for name, type_name in NB01_PARAMS.items():
        assert f"{name}: {type_name}" in proc.stdout
    assert "draft checkpoint directory" in proc.stdout
    assert "where summary.json goes" in proc.stdout


@pytest.mark.notebook
def test_notebook_02_parameters_and_help():
    import papermill as pm

    assert NB02 in NOTEBOOKS
    params = pm.inspect_notebook(str(NB02))
    assert {n: p["inferred_type_name"] for n, p in params.items()} == NB02_PARAMS
    assert params["checkpoint"]["default"] == '"../data_samples/drafts/good"'
    assert params["corpus"]["default"] == '""'
    assert params["tokenizer"]["default"] == '"../data_samples/target/tokenizer.json"'
    proc = subprocess.run([sys.executable, "-m", "papermill", "--help-notebook", str(NB02)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for name, type_name in NB02_PARAMS.items():
        assert f"{name}: {type_name}" in proc.stdout
    assert "draft checkpoint directory" in proc.stdout and "tokenizer.json" in proc.stdout
    assert "where summary.json goes" in proc.stdout


def test_notebook_02_widget_cell_is_tagged_and_alone():
    cells = [c for c in _read(NB02).cells if "vocab_lookup(" in c.source]
    assert len(cells) == 1 and "nbval-ignore-output" in cells[0].metadata.get("tags", [])
    assert cells[0].source.startswith("if interactive:")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_default_paths_exist_relative_to_the_notebook(path):
    import papermill as pm

    for name, p in pm.inspect_notebook(str(path)).items():
        default = p["default"].strip("\"'")
        if p["inferred_type_name"] == "str" and default.startswith("../"):
            assert (path.parent / default).exists(), f"{name} default {default} does not exist"


# ----------------------------------------------------------------------------- executed

_runs: dict[str, dict] = {}


def _expectations() -> dict:
    return json.loads(MANIFEST.read_text())


def run_01(sample: str, tmp_path_factory) -> dict:
    """Notebook 01 on a bundled sample, once per sample per session: the summary and paths.
    layers0-flat is also rendered to HTML; one sample keeps the widget on and one passes
    engines in the name:version form."""
    if sample in _runs:
        return _runs[sample]
    from eagle3_nb.report.notebooks import render_html, run_notebook

    out = tmp_path_factory.mktemp(f"nb01-{sample}")
    if sample == "layers0-flat":
        executed = run_notebook(NB01, out, {
            "checkpoint": str(DRAFTS / sample), "engine": SAMPLE_ENGINE_PARAM,
            "target_config": str(TARGET_CONFIG), "stats": True, "interactive": False})
        result = {"executed": executed, "summary": out / "summary.json",
                  "html": render_html(executed, executed.with_suffix(".html"))}
        result["verdict_line"] = json.loads(result["summary"].read_text())["verdict_line"]
    else:
        engine = ",".join(e.replace("==", ":") for e in _expectations()["engines"]) \
            if sample == "prefix-draft-model" else SAMPLE_ENGINE_PARAM
        executed = run_notebook(NB01, out, {
            "checkpoint": str(DRAFTS / sample), "engine": engine,
            "target_config": str(TARGET_CONFIG), "stats": True,
            "interactive": sample == "good", "output_dir": str(out)})
        result = {"executed": executed, "summary": out / "summary.json"}
    result["data"] = json.loads(Path(result["summary"]).read_text())
    _runs[sample] = result
    return result


def _codes_for(summary: dict, profile: str) -> set[str]:
    return {f["code"] for f in summary["findings"] if f["engine"] in (None, profile)}


@pytest.mark.notebook
@pytest.mark.parametrize("sample", SAMPLES_01)
def test_notebook_01_summary_matches_manifest(sample, tmp_path_factory):
    expect = _expectations()["variants"][sample]
    summary = run_01(sample, tmp_path_factory)["data"]
    assert summary["notebook"] == "01_checkpoint_keys"
    assert Path(summary["checkpoint"]) == (DRAFTS / sample).resolve()
    for profile, want in expect["expect"].items():
        assert summary["verdicts"][profile] == want["verdict"], profile
        assert set(want["codes"]) <= _codes_for(summary, profile), profile
    assert set(expect["expect_global_codes"]) <= set(summary["global_codes"])
    assert summary["n_errors"] == sum(f["severity"] == "error" for f in summary["findings"])


@pytest.mark.notebook
def test_notebook_01_layers0_flat_specifics(tmp_path_factory):
    run = run_01("layers0-flat", tmp_path_factory)
    s = run["data"]
    assert s["verdicts"]["sglang==0.5.9"] == "silent_failure"
    assert s["verdicts"]["vllm==0.33"] == "ok"
    dropped = s["engines"]["sglang==0.5.9"]["dropped"]
    assert dropped and all(k.startswith("layers.0.") for k in dropped)
    assert s["engines"]["sglang==0.5.16"]["dropped"] == []
    assert "sglang==0.5.9: silent_failure (KEYS_DROPPED, PARAMS_UNLOADED)" in run["verdict_line"]
    assert "vllm==0.33: ok" in run["verdict_line"]
    assert s["stats"]["scanned"] == s["n_tensors"]


@pytest.mark.notebook
def test_notebook_01_other_samples_specifics(tmp_path_factory):
    good = run_01("good", tmp_path_factory)["data"]
    assert not [f for f in good["findings"] if f["severity"] == "error"]
    assert set(good["verdicts"].values()) == {"ok"}
    prefix = run_01("prefix-draft-model", tmp_path_factory)["data"]
    assert prefix["layout_prefixes"] == ["draft_model."]
    assert set(prefix["verdicts"]) == set(_expectations()["engines"])  # name:version parsed
    nan = run_01("nan-head", tmp_path_factory)["data"]
    assert "lm_head.weight" in nan["stats"]["nan_or_inf"]


@pytest.mark.notebook
def test_notebook_01_widget_cell_runs_headless(tmp_path_factory):
    nb = _read(run_01("good", tmp_path_factory)["executed"])
    widget_cells = [c for c in nb.cells if "engine_explorer(data" in c.source]
    assert widget_cells and any("application/vnd.jupyter.widget-view+json" in o.get("data", {})
                                for o in widget_cells[0].outputs)


@pytest.mark.notebook
def test_notebook_01_html_report_is_offline_and_has_the_figure(tmp_path_factory):
    run = run_01("layers0-flat", tmp_path_factory)
    html = Path(run["html"]).read_text(encoding="utf-8")
    assert "plotly-graph-div" in html
    assert html.count("Plotly.newPlot") >= 1
    # plotly.js itself mentions https://cdn.plot.ly/un/ (a topojson default for geo maps, never
    # fetched for these figures); what must not appear is plotly.js loaded from a CDN
    assert 'import "https://cdn.plot.ly' not in html and 'src="https://cdn.plot.ly' not in html
    tags = [s.split(">", 1)[0] for s in html.split("<script")[1:]]
    srcs = [t for t in tags if "src=" in t]
    assert not [s for s in srcs if "http" in s], srcs  # plotly.js embedded, nothing fetched
    assert "https://cdn" not in "".join(srcs)
    assert "widget-state" not in html and "unpkg.com" not in html
    assert len(html) > 3_000_000  # the embedded plotly.js
    assert "SILENT FAILURE" in html and "DROPPED" in html
    assert "In&nbsp;[" not in html  # no input prompts


@pytest.mark.notebook
def test_run_notebook_rejects_unknown_parameters(tmp_path):
    from eagle3_nb.report.notebooks import ReportError, run_notebook

    with pytest.raises(ReportError, match="unknown parameter"):
        run_notebook(NB01, tmp_path, {"checkpont": "x"})


@pytest.mark.notebook
def test_run_notebook_reports_the_failing_cell(tmp_path):
    from eagle3_nb.report.notebooks import ReportError, run_notebook

    with pytest.raises(ReportError, match=r"CheckpointError|ConfigError|Eagle3NbError|Error"):
        run_notebook(NB01, tmp_path, {"checkpoint": str(tmp_path / "nope"), "stats": False,
                                      "interactive": False})


# ----------------------------------------------------------------------------- notebook 02

_runs02: dict[str, dict] = {}


def first_output(executed: Path) -> str:
    """The text of an executed notebook's first output, HTML entities decoded."""
    import html

    first = next(o for c in _read(executed).cells if c.cell_type == "code"
                 for o in c.get("outputs", []))
    return html.unescape(json.dumps(first.get("data") or first.get("text"), ensure_ascii=False))


def _good_kept_ids():
    import numpy as np

    from eagle3_nb.io.checkpoint import Checkpoint
    from eagle3_nb.config import parse_config
    from eagle3_nb.vocab import VocabMapping

    ckpt = Checkpoint.open(DRAFTS / "good")
    t2d = VocabMapping.from_checkpoint(ckpt, parse_config(ckpt.config_raw)).t2d
    return np.flatnonzero(t2d).tolist(), np.flatnonzero(~t2d).tolist()


def run_02(case: str, tmp_path_factory) -> dict:
    """Notebook 02, once per case per session: "good" (widget on), "d2t-absolute", and
    "good-corpus" (good with a tokenizer and a text corpus where 3 of every 4 tokens are kept)."""
    if case in _runs02:
        return _runs02[case]
    from eagle3_nb.report.notebooks import run_notebook
    from test_viz_vocab import EVIL_ID, NUMBER_ID, UNK_ID, write_tokenizer

    out = tmp_path_factory.mktemp(f"nb02-{case}")
    sample = "good" if case.startswith("good") else case
    params = {"checkpoint": str(DRAFTS / sample), "interactive": case == "good",
              "output_dir": str(out)}
    if case == "good-corpus":
        tok = write_tokenizer(out / "tok")
        kept, dropped = _good_kept_ids()
        kept = [i for i in kept if i not in (EVIL_ID, NUMBER_ID)][:30]
        dropped = [i for i in dropped if i != UNK_ID][:10]
        lines = [json.dumps({"text": " ".join(f"tok{i}" for i in (kept[3 * j], kept[3 * j + 1],
                                                                   kept[3 * j + 2], dropped[j]))})
                 for j in range(10)]
        corpus = out / "corpus.jsonl"
        corpus.write_text("\n".join(lines) + "\n")
        params.update(tokenizer=str(tok.parent), corpus=str(corpus))
    executed = run_notebook(NB02, out, params)
    result = {"executed": executed, "out": out,
              "data": json.loads((out / "summary.json").read_text())}
    _runs02[case] = result
    return result


@pytest.mark.notebook
def test_notebook_02_good_is_valid_offsets(tmp_path_factory):
    s = run_02("good", tmp_path_factory)["data"]
    assert s["notebook"] == "02_d2t_mapping"
    assert Path(s["checkpoint"]) == (DRAFTS / "good").resolve()
    assert s["format"] == "offset" and s["valid"] is True and s["t2d_agrees"] is True
    assert s["codes"] == [] and s["coverage"] is None
    assert s["engines"] and all(e["n_wrong"] == 0 and e["n_out_of_range"] == 0
                                for e in s["engines"].values())
    assert {p.key for p in newest_profiles()} == set(s["engines"])  # each engine's newest
    # what it had, at the top of its output and in summary.json, with the flag of the rest
    assert s["had"] == {"checkpoint": "given", "tokenizer": "given",
                        "corpus": "not given (--corpus)", "engine release": NEWEST_RELEASES}
    assert evidence_line(s["had"]) in first_output(run_02("good", tmp_path_factory)["executed"])


@pytest.mark.notebook
def test_notebook_02_absolute_is_not_valid(tmp_path_factory):
    from eagle3_nb.io.checkpoint import Checkpoint
    ids = Checkpoint.open(DRAFTS / "d2t-absolute").read_array("d2t")  # absolute ids, stored
    out_of_range = int(((ids + range(len(ids))) >= 512).sum())          # as engines read them
    s = run_02("d2t-absolute", tmp_path_factory)["data"]
    assert s["format"] == "absolute" and s["valid"] is False
    assert "D2T_ABSOLUTE" in s["codes"] and s["n_out_of_range"] == out_of_range > 0
    assert s["engines"]["sglang==0.5.23"] == {"param": "hot_token_id", "n_wrong": 255,
                                             "n_out_of_range": out_of_range}
    newest_vllm = next(p.key for p in newest_profiles() if p.name == "vllm")
    assert s["engines"][newest_vllm]["param"] == "draft_id_to_target_id"
    assert any("equals nonzero(t2d)" in e for e in s["evidence"])


@pytest.mark.notebook
def test_notebook_02_with_tokenizer_and_corpus_reports_coverage(tmp_path_factory):
    import numpy as np

    from eagle3_nb.io.checkpoint import Checkpoint

    run = run_02("good-corpus", tmp_path_factory)
    s = run["data"]
    assert s["format"] == "offset" and s["valid"] is True
    # expected coverage from the files: the corpus's tokens (tok{i} is target id i) against the
    # ids t2d keeps (as offsets, arange + d2t: the same for a valid table) and against d2t
    # misread as absolute ids
    ckpt = Checkpoint.open(DRAFTS / "good")
    d2t = ckpt.read_array("d2t").astype(np.int64)
    kept = set(np.flatnonzero(ckpt.read_array("t2d")).tolist())
    assert kept == set((np.arange(len(d2t)) + d2t).tolist())
    lines = (run["out"] / "corpus.jsonl").read_text().splitlines()
    tokens = [int(w[3:]) for line in lines for w in json.loads(line)["text"].split()]
    intended = sum(t in kept for t in tokens) / len(tokens)
    absolute = sum(t in set(d2t.tolist()) for t in tokens) / len(tokens)
    assert intended == 0.75  # by construction: 3 of every 4 corpus tokens are kept
    assert absolute < intended  # real text favours the right reading
    cov = s["coverage"]
    assert {k: cov[k] for k in ("intended", "as_engines_read_it", "n_tokens")} == {
        "intended": intended, "as_engines_read_it": intended, "n_tokens": len(tokens)}
    assert cov["per_reading"] == {"offsets": intended, "absolute": absolute}
    assert s["codes"] == ["LOW_VOCAB_COVERAGE"] and s["tokenizer"]
    assert s["had"]["tokenizer"] == s["had"]["corpus"] == "given"
    outputs = json.dumps([c.get("outputs", []) for c in _read(run["executed"]).cells])
    assert f"&#x27;tok{d2t[5] + 5}&#x27;" in outputs and f"{intended:.1%}" in outputs


@pytest.mark.notebook
def test_notebook_02_widget_cell_runs_headless(tmp_path_factory):
    nb = _read(run_02("good", tmp_path_factory)["executed"])
    cell = [c for c in nb.cells if "vocab_lookup(" in c.source][0]
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {})
               for o in cell.outputs)
    nb = _read(run_02("d2t-absolute", tmp_path_factory)["executed"])
    assert [c for c in nb.cells if "vocab_lookup(" in c.source][0].outputs == []


@pytest.mark.notebook
def test_notebook_02_html_report_is_offline_with_the_figure(tmp_path_factory):
    from eagle3_nb.report.notebooks import render_html
    from test_viz_vocab import EVIL

    for case, words in (("good-corpus", ("VALID for every engine", "75.0%")),
                        ("d2t-absolute", ("NOT VALID", "outside [0, 512)"))):
        run = run_02(case, tmp_path_factory)
        html = render_html(run["executed"], run["out"] / "02.html").read_text(encoding="utf-8")
        assert "plotly-graph-div" in html and html.count("Plotly.newPlot") == 1
        tags = [t.split(">", 1)[0] for t in html.split("<script")[1:]]
        assert not [t for t in tags if "src=" in t and "http" in t]
        assert 'src="https://cdn.plot.ly' not in html and "widget-state" not in html
        assert len(html) > 3_000_000  # plotly.js embedded
        for w in words:
            assert w in html, (case, w)
        assert EVIL not in html  # a tokenizer's script-tag token stays text
        if case == "good-corpus":
            assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    html = render_html(run_02("good", tmp_path_factory)["executed"],
                       run_02("good", tmp_path_factory)["out"] / "02.html").read_text()
    assert "interactive widget: needs a live kernel" in html and "VBox(children" not in html


# ----------------------------------------------------------------------------- nbval

@pytest.mark.notebook
def test_nbval_lax_runs_the_notebooks_as_stored():
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env", "-q",
         "-p", "no:cacheprovider", *[nb.name for nb in NOTEBOOKS]],
        cwd=NOTEBOOKS_DIR, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


# ----------------------------------------------------------------------------- kernel, HTML

def test_resolve_kernel_prefers_this_environment(monkeypatch):
    import jupyter_client.kernelspec as ks
    from eagle3_nb.report.notebooks import resolve_kernel

    class Spec:
        def __init__(self, argv):
            self.argv = argv

    def fake(specs):
        class KSM:
            def find_kernel_specs(self):
                return {name: f"/k/{name}" for name in specs}

            def get_kernel_spec(self, name):
                return Spec(specs[name])
        return KSM

    here = [sys.executable, "-m", "ipykernel_launcher"]
    monkeypatch.setattr(ks, "KernelSpecManager", fake({"python3": ["python", "-m", "x"]}))
    assert resolve_kernel() == "python3"
    monkeypatch.setattr(ks, "KernelSpecManager", fake({"python3": ["/elsewhere/bin/python"],
                                                       "eagle3-nb": here}))
    assert resolve_kernel() == "eagle3-nb"  # a stale python3 spec would run another env
    monkeypatch.setattr(ks, "KernelSpecManager", fake({"eagle3-nb": here}))
    assert resolve_kernel() == "eagle3-nb"  # the kit's kernel, as the notebooks declare
    assert resolve_kernel("eagle3-nb") == "eagle3-nb"
    monkeypatch.setattr(ks, "KernelSpecManager", fake({}))
    assert resolve_kernel("eagle3-nb") == "python3"  # not installed: the native kernel, this env
    monkeypatch.setattr(ks, "KernelSpecManager", fake({"eagle3-nb": ["/elsewhere/bin/python"],
                                                       "python3": ["python", "-m", "x"]}))
    assert resolve_kernel() == "python3"  # the kit's kernel of another env is not taken
    assert resolve_kernel("other") == "other"


@pytest.mark.notebook
def test_widget_output_becomes_a_note_in_html(tmp_path_factory, tmp_path):
    from eagle3_nb.report.notebooks import render_html

    html = render_html(run_01("good", tmp_path_factory)["executed"], tmp_path / "r.html")
    text = html.read_text(encoding="utf-8")
    assert "VBox(children" not in text and "interactive widget: needs a live kernel" in text


# ----------------------------------------------------------------------------- static renders

def _html_outputs(executed: Path, marker: str) -> str:
    """The text/html outputs of the executed cells whose source contains `marker`."""
    cells = [c for c in _read(executed).cells if c.cell_type == "code" and marker in c.source]
    return "".join(o.get("data", {}).get("text/html", "") for c in cells for o in c.outputs)


@pytest.mark.notebook
def test_widget_sections_show_a_static_render_in_the_notebook_and_the_report(tmp_path_factory,
                                                                            tmp_path):
    """The widget's first view, drawn statically before it: what the offline page shows where
    the widget is dead (#17), not only the note that a kernel is needed."""
    from eagle3_nb.report.notebooks import render_html

    run = run_01("good", tmp_path_factory)
    static = _html_outputs(run["executed"], "engine_view_html(")
    assert "Static render of the widget below, opened on engine sglang==" in static
    assert "fc.weight" in static and "d2t" in static  # the key table of that engine
    page = render_html(run["executed"], tmp_path / "01.html").read_text(encoding="utf-8")
    assert page.index("opened on engine sglang==") < page.index("interactive widget: needs a")

    run = run_02("good", tmp_path_factory)
    static = _html_outputs(run["executed"], "lookup_view_html(")
    assert "opened on <code>d:0</code>" in static and "Lookup: d:0" in static
    page = render_html(run["executed"], tmp_path / "02.html").read_text(encoding="utf-8")
    assert "Lookup: d:0" in page and "draft id 0" in page


@pytest.mark.notebook
def test_notebook_01_without_compare_to_says_so(tmp_path_factory):
    run = run_01("good", tmp_path_factory)
    assert "no known-good draft given" in _html_outputs(run["executed"], "diff_html(")
    assert run["data"]["diff"] is None


@pytest.mark.notebook
def test_notebook_01_compare_to_a_known_good_draft(tmp_path_factory):
    """Notebook 01 on nan-head with compare_to the good sample: the diff section and summary.json
    name what changed (the NaN lm_head) and against what."""
    from eagle3_nb.report.notebooks import run_notebook

    out = tmp_path_factory.mktemp("nb01-compare")
    executed = run_notebook(NB01, out, {
        "checkpoint": str(DRAFTS / "nan-head"), "engine": SAMPLE_ENGINE_PARAM,
        "target_config": str(TARGET_CONFIG), "stats": False, "interactive": False,
        "compare_to": str(DRAFTS / "good"), "output_dir": str(out)})
    html = _html_outputs(executed, "diff_html(")
    assert "Against a known-good draft" in html and "lm_head.weight" in html
    diff = json.loads((out / "summary.json").read_text())["diff"]
    assert Path(diff["good"]) == (DRAFTS / "good").resolve()
    assert Path(diff["other"]) == (DRAFTS / "nan-head").resolve()
    assert any("lm_head.weight" in f["message"] and f["code"] == "DRAFT_DIFFERS"
               for f in diff["findings"])
