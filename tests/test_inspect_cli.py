"""`eagle3-nb inspect` contract: JSON shape, exit codes, lazy imports, untrusted input."""

import json
import subprocess
import sys

import pytest

from conftest import DRAFTS, TARGET_CONFIG

KEYS = {"checkpoint", "layout", "config", "tensors", "engines", "findings"}
ENGINE_KEYS = {"engine", "version", "keys", "unloaded_params", "aux_layers", "fc_input_width",
               "verdict"}


def inspect_json(run_cli, variant, *extra):
    rc, out, err = run_cli("inspect", DRAFTS / variant, "--target-config", TARGET_CONFIG,
                           "--json", *extra)
    assert rc in (0, 1), err
    return rc, json.loads(out)


def test_json_contract(run_cli):
    rc, data = inspect_json(run_cli, "layers0-flat", "--engine", "sglang==0.5.9",
                            "--engine", "vllm==0.33.0")
    assert rc == 1 and KEYS <= set(data)
    assert data["layout"] == "speculators"
    assert data["config"]["draft_vocab_size"] == {"value": 256, "source": "top_level"}
    assert {"name", "shape", "dtype", "file"} <= set(data["tensors"][0])
    assert [e["engine"] for e in data["engines"]] == ["sglang", "vllm"]
    for e in data["engines"]:
        assert ENGINE_KEYS <= set(e)
        assert {"name", "fate", "param"} <= set(e["keys"][0])
        assert {"ids", "source"} <= set(e["aux_layers"])
        assert set(e["fc_input_width"]) == {"engine", "checkpoint"}
    for f in data["findings"]:
        assert {"code", "severity", "message", "engine", "evidence"} <= set(f)
        assert f["engine"] in (None, "sglang==0.5.9", "vllm==0.33")
    severities = [f["severity"] for f in data["findings"]]
    assert severities == sorted(severities, key=["error", "warning", "info"].index)


def test_exit_zero_without_error_findings(run_cli):
    rc, data = inspect_json(run_cli, "good", "--engine", "sglang==0.5.23")
    assert rc == 0 and data["engines"][0]["verdict"] == "ok"


def test_human_table_lists_errors_first(run_cli):
    rc, out, _ = run_cli("inspect", DRAFTS / "layers0-flat", "--target-config", TARGET_CONFIG,
                         "--engine", "sglang==0.5.9", "--engine", "vllm==0.33")
    assert rc == 1
    assert "SILENT FAILURE" in out and "KEYS_DROPPED" in out
    first_finding = out[out.index("FINDINGS"):].splitlines()[1]
    assert "ERROR" in first_finding


@pytest.mark.parametrize("variant", ["sharded", "pickle-bin"])
def test_other_file_formats_match_the_single_file(run_cli, variant):
    _, good = inspect_json(run_cli, "good")
    _, other = inspect_json(run_cli, variant)
    assert [e["verdict"] for e in other["engines"]] == [e["verdict"] for e in good["engines"]]
    assert {t["name"] for t in other["tensors"]} == {t["name"] for t in good["tensors"]}


def test_no_stats_reads_headers_only(run_cli):
    _, data = inspect_json(run_cli, "nan-head", "--no-stats")
    assert data["stats"] is None and data["vocab"] is None
    assert "NAN_WEIGHTS" not in {f["code"] for f in data["findings"]}
    _, scanned = inspect_json(run_cli, "nan-head")
    assert "NAN_WEIGHTS" in {f["code"] for f in scanned["findings"]}


def test_stats_budget_leaves_tensors_unscanned(run_cli):
    _, data = inspect_json(run_cli, "good", "--stats-budget", "40K")
    assert data["stats"]["skipped"]
    assert "STATS_SKIPPED" in {f["code"] for f in data["findings"]}


@pytest.mark.parametrize("args,fragment", [
    (["--engine", "tgi==1.0"], "no engine called 'tgi'"),
    (["--engine", "==0.5.9"], "names no engine"),
    (["--target-config", "/nonexistent/config.json"], "target config not found"),
])
def test_bad_arguments_exit_2(run_cli, args, fragment):
    rc, out, err = run_cli("inspect", DRAFTS / "good", *args)
    assert rc == 2 and fragment in err and out == "" and "Traceback" not in err


def test_a_release_without_a_profile_is_answered_and_marked_unverified(run_cli):
    """A release after the survey: the newest profile answers and says it is not that release."""
    rc, data = inspect_json(run_cli, "good", "--engine", "sglang==0.5.24")
    assert [e["profile"] for e in data["engines"]] == ["sglang==0.5.24"]
    unverified = [f for f in data["findings"] if f["code"] == "ENGINE_UNVERIFIED"]
    assert unverified and "sglang==0.5.23" in unverified[0]["message"]
    assert unverified[0]["engine"] == "sglang==0.5.24"


def test_remote_code_is_reported_never_executed(run_cli):
    rc, data = inspect_json(run_cli, "good-speculators")
    assert "REMOTE_CODE" in {f["code"] for f in data["findings"]}
    assert (DRAFTS / "good-speculators" / "config.py").exists()
    assert not (DRAFTS / "good-speculators" / "EXECUTED").exists()


@pytest.mark.parametrize("extra", [[], ["--no-stats"]])
def test_inspect_imports_no_torch_plotly_transformers(extra):
    code = ("import sys, io, contextlib\n"
            "from eagle3_nb.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    main(['inspect', {str(DRAFTS / 'good')!r}, '--json', *{extra!r}])\n"
            "heavy = [m for m in ('torch', 'plotly', 'transformers', 'safetensors') "
            "if m in sys.modules]\n"
            "assert not heavy, heavy\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_engines_command_lists_ranges(run_cli):
    rc, out, _ = run_cli("engines")
    assert rc == 0 and "sglang 0.5.8 .. 0.5.10.post1" in out and "vllm 0.30.0 .. 0.32.0" in out \
        and "vllm 0.33.0 " in out


def test_no_stats_never_says_ok_about_what_it_did_not_read(run_cli):
    """A NaN head under --no-stats: the weights were not scanned, so the answer is "ok as far as
    checked", with what was not checked and how to check it, in text and JSON."""
    rc, data = inspect_json(run_cli, "nan-head", "--no-stats")
    assert rc == 0 and data["overall"] == "ok_as_far_as_checked"
    assert {"tensor values", "d2t values"} <= {u["what"] for u in data["unchecked"]}
    rc, out, _ = run_cli("inspect", DRAFTS / "nan-head", "--no-stats")
    assert "NOT CHECKED" in out and "VERDICT: ok as far as checked" in out
    rc, data = inspect_json(run_cli, "nan-head", "--target-config", TARGET_CONFIG)
    assert rc == 1 and data["overall"] == "silent_failure"
    rc, data = inspect_json(run_cli, "good", "--target-config", TARGET_CONFIG)
    assert data["overall"] == "ok" and data["unchecked"] == []


def test_convert_reports_the_draft_apart_from_the_copy(run_cli, tmp_path):
    """A NaN head converted byte for byte: the copy is verified, the draft is not ok."""
    rc, out, err = run_cli("convert", DRAFTS / "nan-head", tmp_path / "out", "--engine",
                           "sglang==0.5.9", "--json")
    data = json.loads(out)
    assert rc == 1 and data["verified"] is True
    assert data["draft"]["overall"] == "silent_failure" and "NAN_WEIGHTS" in data["draft"]["errors"]


def test_an_auto_map_without_code_is_not_called_shipped_code(run_cli, tmp_path):
    import shutil
    draft = tmp_path / "d"
    shutil.copytree(DRAFTS / "good", draft)
    cfg = json.loads((draft / "config.json").read_text())
    cfg["auto_map"] = {"AutoConfig": "config.Eagle3Config"}
    (draft / "config.json").write_text(json.dumps(cfg))
    rc, out, _ = run_cli("inspect", draft, "--json", "--no-stats")
    remote = [f for f in json.loads(out)["findings"] if f["code"] == "REMOTE_CODE"]
    assert remote and "does not ship" in remote[0]["message"]
    assert "ships code" not in remote[0]["message"]
