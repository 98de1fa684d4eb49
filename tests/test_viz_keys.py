"""Notebook 01's renderers (eagle3_nb.viz.keys), its widget layer and summary digest, asserted
on the returned HTML strings and figures for real inspections of the bundled samples."""

from __future__ import annotations

import json
import re

import pytest

from conftest import DRAFTS, SAMPLE_ENGINES, TARGET_CONFIG, table_rows, write_draft_dir
from eagle3_nb.checks.load import inspect_checkpoint
from eagle3_nb.checks.load import SavedInspection
from eagle3_nb.findings import engine_codes, verdict_line
from eagle3_nb.stats import tensor_flags
from eagle3_nb.viz import keys as vk
from eagle3_nb.viz.html import HTMLString

RENDERERS = (vk.summary_html, vk.findings_html, vk.verdict_html, vk.key_table_html,
             vk.schema_diff_html, vk.stats_table_html, vk.aux_layers_html)
LAYER0_KEYS = ("layers.0.self_attn.q_proj.weight", "layers.0.mlp.down_proj.weight",
               "layers.0.input_layernorm.weight", "layers.0.hidden_norm.weight")

_cache: dict[str, dict] = {}


def inspect(sample: str, **kw) -> dict:
    """Inspection JSON of a bundled sample (every engine, bundled target, statistics), cached."""
    if not kw and sample in _cache:
        return _cache[sample]
    path = DRAFTS / sample
    if not path.is_dir():
        pytest.skip(f"bundled sample {sample} not built (make samples)")
    data = inspect_checkpoint(path, target_config=TARGET_CONFIG,
                              **{"stats": True, "engines": SAMPLE_ENGINES, **kw}).to_json()
    if not kw:
        _cache[sample] = data
    return data


def rows_of(html: str) -> list[list[tuple[str, str, str]]]:
    return table_rows(html)


def row_for(html: str, first_cell: str) -> list[tuple[str, str, str]]:
    hits = [r for r in rows_of(html) if r and r[0][0].strip() == first_cell]
    assert hits, f"no row starting with {first_cell!r}"
    return hits[0]


# ----------------------------------------------------------------------------- key table

def test_layers0_flat_key_table_shows_sglang_059_dropping_layer0():
    data = inspect("layers0-flat")
    html = vk.key_table_html(data)
    header = [c[0].replace("\n", "==") for c in rows_of(html)[0]]
    col = {name: header.index(name) for name in ("sglang==0.5.9", "sglang==0.5.16", "vllm==0.33")}
    for key in LAYER0_KEYS:
        row = row_for(html, key)
        assert row[col["sglang==0.5.9"]][0] == "DROPPED"
        assert row[col["sglang==0.5.16"]][0] == "loaded"
        assert row[col["vllm==0.33"]][0] == "loaded"
    # the hover names the engine parameter and the reason
    q = row_for(html, "layers.0.self_attn.q_proj.weight")
    assert "model.layers.0.self_attn.qkv_proj.weight" in q[col["sglang==0.5.16"]][1]
    assert "no parameter" in q[col["sglang==0.5.9"]][1]
    assert "background:#fffaeb" in html  # dropped rows are highlighted
    # unloaded parameters of sglang 0.5.9 are listed under the table
    assert "model.midlayer.self_attn.qkv_proj.weight[q,k,v]" in html


def test_key_table_single_engine_has_param_and_reason_columns():
    data = inspect("layers0-flat")
    html = vk.key_table_html(data, engines=["sglang==0.5.16"])
    header = [c[0] for c in rows_of(html)[0]]
    assert header[-2:] == ["engine parameter", "reason"]
    row = row_for(html, "layers.0.mlp.gate_proj.weight")
    assert row[3][0] == "loaded" and "gate_up_proj" in row[4][0]
    assert "sglang\n0.5.9" not in html
    with pytest.raises(ValueError, match="not in this inspection"):
        vk.key_table_html(data, engines=["sglang==9.9"])


def test_key_table_only_problems_hides_rows_every_engine_loads():
    data = inspect("layers0-flat")
    html = vk.key_table_html(data, only_problems=True)
    keys = [r[0][0] for r in rows_of(html)[1:]]
    assert "layers.0.self_attn.q_proj.weight" in keys
    assert "fc.weight" not in keys and "lm_head.weight" not in keys


def test_prefix_draft_model_errors_are_red_and_prefix_is_reported():
    data = inspect("prefix-draft-model")
    table = vk.key_table_html(data)
    header = [c[0].replace("\n", "==") for c in rows_of(table)[0]]
    fc = row_for(table, "draft_model.fc.weight")
    assert fc[header.index("sglang==0.5.23")][0] == "DROPPED"
    assert fc[header.index("vllm==0.33")][0] == "ERROR"
    assert "background:#fef3f2" in table  # error rows red
    assert "prefix draft_model." in vk.summary_html(data)


# ----------------------------------------------------------------------------- untrusted input

EVIL_KEY = "<script>alert(1)</script>"
EVIL_ARCH = '<img src=x onerror="alert(2)">'


@pytest.fixture(scope="module")
def evil(tmp_path_factory):
    root = tmp_path_factory.mktemp("evil") / "draft"
    cfg = {"architectures": [EVIL_ARCH], "model_type": "llama", "hidden_size": 8,
           "num_attention_heads": 2, "intermediate_size": 16, "vocab_size": 32,
           "draft_vocab_size": 32, "num_hidden_layers": 1}
    tensors = {"fc.weight": {"dtype": "F32", "shape": [8, 24], "data_offsets": [0, 768]},
               EVIL_KEY: {"dtype": "F32", "shape": [2], "data_offsets": [768, 776]}}
    write_draft_dir(root, tensors, cfg)
    return inspect_checkpoint(root, SAMPLE_ENGINES, TARGET_CONFIG, stats=True).to_json()


def test_checkpoint_strings_are_escaped_everywhere(evil):
    for render in RENDERERS:
        html = render(evil)
        assert EVIL_KEY not in html and "<img" not in html, render.__name__
        assert "<script" not in html.lower(), render.__name__
    for render in (vk.key_table_html, vk.schema_diff_html, vk.stats_table_html, vk.findings_html):
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in render(evil), render.__name__
    assert "&lt;img src=x onerror=&quot;alert(2)&quot;&gt;" in vk.summary_html(evil)


def test_norms_figure_shows_evil_names_as_text(evil):
    import plotly.io as pio

    fig = vk.tensor_norms_figure(evil)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in fig.data[0].x
    html = pio.to_html(fig, include_plotlyjs=False, full_html=False)
    assert "<script>alert" not in html and "</script><script>alert" not in html


# ----------------------------------------------------------------------------- findings, verdicts

def test_findings_errors_first_and_grouped_across_engines():
    data = inspect("layers0-flat", engines=SAMPLE_ENGINES + ["sglang==0.4.10"])
    html = vk.findings_html(data)
    rows = rows_of(html)[1:]
    severities = [r[0][0].lower() for r in rows]
    assert severities == sorted(severities, key=["error", "warning", "info"].index)
    dropped = [r for r in rows if r[1][0] == "KEYS_DROPPED"]
    assert len(dropped) == 1  # sglang 0.4.10 and 0.5.9 share one message
    assert "sglang==0.5.9" in dropped[0][2][0] and "sglang==0.4.10" in dropped[0][2][0]
    assert "tensors the engine silently ignores" in dropped[0][1][1]  # code meaning on hover
    every = [r for r in rows if r[1][0] == "AUX_LAYERS_DEFAULTED"]
    assert every and every[0][2][0] == "every engine"


def test_findings_engine_filter_and_info_toggle():
    data = inspect("layers0-flat")
    only = vk.findings_html(data, engine="vllm==0.33")
    assert "KEYS_DROPPED" not in only and "AUX_LAYERS_DEFAULTED" in only
    quiet = vk.findings_html(data, show_info=False)
    assert "EMBED_REPLACED" not in quiet and "info finding(s) hidden" in quiet


def test_global_findings_are_labelled_checkpoint_wide():
    html = vk.findings_html(inspect("nan-head"))
    row = [r for r in rows_of(html) if r[1][0] == "NAN_WEIGHTS"][0]
    assert row[0][0] == "ERROR" and row[2][0] == "all (checkpoint)"
    assert "lm_head.weight" in row[3][0]


def test_verdict_badges_per_engine():
    data = inspect("layers0-flat")
    html = vk.verdict_html(data)
    text = re.sub(r"<[^>]+>", "|", html)
    assert re.search(r"sglang==0\.5\.9\|+SILENT FAILURE\|+KEYS_DROPPED, PARAMS_UNLOADED", text)
    assert re.search(r"vllm==0\.33\|+OK\|", text)
    assert html.count("SILENT FAILURE") >= 2
    assert "LOAD ERROR" in vk.verdict_html(inspect("good-speculators"))


# ----------------------------------------------------------------------------- schema, stats

def test_schema_diff_marks_missing_and_mismatched(tmp_path):
    root = write_draft_dir(tmp_path / "d", {
        "fc.weight": {"dtype": "F32", "shape": [8, 16], "data_offsets": [0, 512]}})
    data = inspect_checkpoint(root, SAMPLE_ENGINES, stats=False).to_json()
    html = vk.schema_diff_html(data)
    fc = row_for(html, "SHAPE MISMATCH")
    assert fc[1][0] == "fc.weight" and fc[3][0] == "[8, 24]" and fc[4][0] == "[8, 16]"
    assert "font-weight:600" in fc[4][2]
    missing = [r for r in rows_of(html) if r[0][0] == "MISSING"]
    assert any(r[1][0] == "layers.0.self_attn.q_proj.weight" for r in missing)
    assert "ok" not in [r[0][0] for r in rows_of(html)]
    good = vk.schema_diff_html(inspect("good"), hide_ok=True)
    assert "matching tensor(s) hidden" in good


def test_stats_table_flags_nan_head():
    data = inspect("nan-head")
    html = vk.stats_table_html(data)
    row = row_for(html, "lm_head.weight")
    assert "NaN/Inf" in row[-1][0]
    nan_col = [c[0] for c in rows_of(html)[0]].index("NaN")
    assert int(row[nan_col][0].replace(",", "")) > 0
    assert "Not scanned" not in html  # the default budget covers these small samples


def test_stats_table_without_stats_and_over_budget():
    off = vk.stats_table_html(inspect("good", stats=False))
    assert "not scanned (stats=False)" in off
    tight = inspect("good", stats_budget=4096)
    html = vk.stats_table_html(tight)
    assert tight["stats"]["skipped"]
    assert "Not scanned" in html
    for name in tight["stats"]["skipped"]:
        assert f">{name}<" in html


def test_tensor_flags_rules():
    base = {"name": "layers.0.mlp.up_proj.weight", "dtype": "F32", "numel": 4, "n_nan": 0,
            "n_inf": 0, "n_zero": 0, "min": -1.0, "max": 1.0, "constant": False}
    assert tensor_flags(base) == []
    assert tensor_flags({**base, "n_nan": 1})[0] == ("NaN/Inf", "error")
    assert "all zeros" in tensor_flags({**base, "n_zero": 4, "min": 0.0, "max": 0.0,
                                           "constant": True})[0][0]
    assert "constant" in tensor_flags({**base, "min": 0.5, "max": 0.5, "constant": True})[0][0]
    norm = {**base, "name": "norm.weight", "min": 1.0, "max": 1.0, "constant": True}
    assert tensor_flags(norm) == [("all 1.0: untouched norm?", "warning")]
    assert tensor_flags({**base, "dtype": "I64", "n_nan": 1}) == []


# ----------------------------------------------------------------------------- figure

def test_norms_figure_one_bar_per_scanned_float_tensor():
    data = inspect("nan-head")
    stats = data["stats"]["stats"]
    floats = [n for n, s in stats.items() if s["dtype"] in ("F16", "BF16", "F32", "F64")]
    fig = vk.tensor_norms_figure(data)
    bar = fig.data[0]
    assert len(fig.data) == 1 and len(bar.x) == len(floats) == len(bar.y)
    assert set(bar.x) == set(floats)
    assert fig.layout.yaxis.type == "log"
    i = list(bar.x).index("lm_head.weight")
    assert bar.marker.color[i] == "#b42318" and bar.text[i] == "NaN/Inf"
    others = [c for j, c in enumerate(bar.marker.color) if j != i]
    assert "#b42318" not in others
    std = vk.tensor_norms_figure(data, metric="std", log=False)
    assert std.layout.yaxis.type == "linear"
    k = list(std.data[0].x).index("fc.weight")
    assert std.data[0].y[k] == pytest.approx(stats["fc.weight"]["std"])
    assert {b.label for m in fig.layout.updatemenus for b in m.buttons} == {
        "L2 norm", "std", "log", "linear"}
    with pytest.raises(ValueError):
        vk.tensor_norms_figure(data, metric="mean")


def test_norms_figure_without_stats_is_empty_with_a_note():
    fig = vk.tensor_norms_figure(inspect("good", stats=False))
    assert len(fig.data[0].x or ()) == 0
    assert "stats=True" in fig.layout.annotations[0].text


# ----------------------------------------------------------------------------- aux layers

def test_aux_layers_mismatch_for_top_level_ids():
    data = inspect("aux-ids-top-level-flat")
    html = vk.aux_layers_html(data)
    vllm = row_for(html, "vllm==0.33")
    assert vllm[3][0] == "[1, 3, 6]" and vllm[4][0] == "[2, 4, 7]"
    assert vllm[5][0] == "MISMATCH"
    sgl = row_for(html, "sglang==0.5.9")
    assert sgl[3][0] == "[2, 4, 5]" and "from default" in sgl[1][0]
    assert "target has 8 layers" in html
    assert html.count("hidden_states[7]: trained, not captured") >= 1


def test_aux_layers_all_match_on_good():
    html = vk.aux_layers_html(inspect("good"))
    assert "MISMATCH" not in html and html.count(">match<") == len(inspect("good")["engines"])


# ----------------------------------------------------------------------------- contract

def test_renderers_return_html_strings_and_display(monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    data = inspect("good")
    for render in RENDERERS:
        html = render(data)
        assert isinstance(html, HTMLString) and isinstance(html, str)
        assert html._repr_html_() == str(html)
        assert "http" not in html and "src=" not in html and "<script" not in html
        assert "class=" not in html  # inline styles only
        assert render(data, display=True) == html
    assert len(shown) == len(RENDERERS)
    assert all(isinstance(s, IPython.display.HTML) for s in shown)


def test_verdict_line_and_summary():
    data = inspect("layers0-flat")
    line = verdict_line(data)
    assert "sglang==0.5.9: silent_failure (KEYS_DROPPED, PARAMS_UNLOADED)" in line
    assert "vllm==0.33: ok" in line
    assert engine_codes(data)["sglang==0.5.16"] == []
    s = SavedInspection(data).summary()
    json.dumps(s)
    assert s["verdicts"]["sglang==0.5.9"] == "silent_failure"
    assert set(s["engines"]["sglang==0.5.9"]["dropped"]) >= set(LAYER0_KEYS)
    assert s["n_errors"] == sum(f["severity"] == "error" for f in data["findings"])


def test_engine_explorer_rerenders_for_the_selection():
    pytest.importorskip("ipywidgets")
    from eagle3_nb.widgets import engine_choices, engine_explorer, render_engine

    data = inspect("layers0-flat")
    assert engine_choices(data)[0] == "all" and "sglang==0.5.9" in engine_choices(data)
    box = engine_explorer(data)
    pick, problems = box.children[0].children
    view = box.children[1]
    assert "sglang\n0.5.9" not in view.value and "sglang<br>0.5.9" in view.value
    pick.value = "vllm==0.33"
    assert view.value == render_engine(data, "vllm==0.33")
    assert "KEYS_DROPPED" not in view.value and "engine parameter" in view.value
    problems.value = True
    assert view.value == render_engine(data, "vllm==0.33", only_problems=True)
    with pytest.raises(ValueError):
        engine_explorer(data, engine="nope==1")


def test_parse_engines():
    from eagle3_nb.engines import parse_engines

    assert parse_engines("all") == ["all"] and parse_engines("") is None
    assert parse_engines("sglang:0.5.9, vllm==0.33") == ["sglang==0.5.9", "vllm==0.33"]
    assert parse_engines("sglang 0.5.16") == ["sglang==0.5.16"]
