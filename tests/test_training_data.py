"""`eagle3-nb data`: the training-data readers, the checks on each bundled variant, the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TouchOnUnpickle
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.io.training_data import discover, iter_rows, read_train_config

TRAINING = Path(__file__).resolve().parent.parent / "data_samples" / "training"
TOKENIZER = TRAINING.parent / "target"
TEMPLATE = TRAINING / "chat_template.jinja"


# ----------------------------------------------------------------------------- readers

def test_discover_sorts_the_bundled_files_by_kind():
    spec = discover(TRAINING / "specforge")
    assert [p.name for p in spec.conversations] == ["train.jsonl"]
    assert [p.name for p in spec.configs] == ["config.yaml"] and not spec.tokens
    tokens = discover(TRAINING / "speculators")
    assert [p.name for p in tokens.tokens] == ["data.jsonl"] and not tokens.conversations
    stale = discover(TRAINING / "stale-mapping")
    assert [p.name for p in stale.mappings] == ["vocab_mapping.pt"]
    assert [p.name for p in discover(TRAINING / "dumps-mismatched").dumps] == ["hs_0.safetensors"]


def test_rows_stream_with_a_row_bound_and_roles_normalised(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps({"conversations": [
        {"from": "human", "value": f"q{i}"}, {"from": "gpt", "value": "a"}]}) for i in range(5)))
    rows = list(iter_rows(path, max_rows=3))
    assert len(rows) == 3
    assert rows[2].conversation == [{"role": "user", "content": "q2"},
                                    {"role": "assistant", "content": "a"}]


def test_a_bad_line_is_a_clear_error(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"input_ids": [1, 2], "loss_mask": [0, 1]}\n{not json\n')
    with pytest.raises(Eagle3NbError, match="line 2 is not JSON"):
        list(iter_rows(path))
    path.write_text('{"input_ids": [1, 2], "loss_mask": [0]}\n')
    with pytest.raises(Eagle3NbError, match="loss_mask 1"):
        list(iter_rows(path))


def test_the_specforge_config_keys_are_read():
    cfg = read_train_config(TRAINING / "truncated" / "config.yaml")
    assert (cfg.chat_template, cfg.max_length, cfg.num_epochs) == ("qwen3-instruct", 176, 10)


# ----------------------------------------------------------------------------- checks

def check(variant: str, **kw):
    from eagle3_nb.checks.data import check_data

    kw.setdefault("serve_thinking", False)
    return check_data(TRAINING / variant, tokenizer=TOKENIZER, chat_template=TEMPLATE,
                      **kw).to_json()


def codes(data, *severities) -> list[str]:
    return [f["code"] for f in data["findings"] if f["severity"] in severities]


def finding(data, code: str) -> dict:
    return next(f for f in data["findings"] if f["code"] == code)


@pytest.mark.parametrize("variant", ["specforge", "speculators"])
def test_the_good_sets_give_no_error_and_no_warning(variant):
    data = check(variant, draft=None, prompts=TRAINING.parent / "prompts.jsonl")
    assert codes(data, "error", "warning") == []
    assert data["stats"]["supervised_tokens"] > 0 and data["stats"]["empty_rows"] == 0


def test_check1_think_markers_supervised_when_served_non_thinking():
    data = check("thinking-template")
    f = finding(data, "TRAIN_TEMPLATE_MISMATCH")
    assert f["severity"] == "error" and f["evidence"]["think_supervised"] == 12
    assert "<think>" in f["evidence"]["examples"][0]["span"]
    assert data["stats"]["rerendered"] == 12  # stored tokens compared with the served render


def test_check1_no_think_markers_when_served_thinking():
    f = finding(check("specforge", serve_thinking=True), "TRAIN_TEMPLATE_MISMATCH")
    assert f["severity"] == "error" and f["evidence"]["think_missing"] == 12


def test_check2_a_template_whose_header_never_occurs_empties_every_mask():
    data = check("empty-masks")
    f = finding(data, "LOSS_MASK_EMPTY")
    assert f["severity"] == "error" and "<|start_header_id|>" in f["message"]
    assert data["stats"]["empty_rows"] == data["stats"]["token_rows"] == 12
    assert f["evidence"]["header_missing"] == f["evidence"]["end_of_turn_missing"] == 12
    assert check("specforge")["stats"]["header_missing"] == 0


def test_check2_span_edges_are_shown_as_text():
    edges = check("specforge")["stats"]["span_edges"]
    assert edges[0]["before"].endswith("</think>\n\n") and edges[0]["last"].endswith("|>\n")


def test_check3_failed_and_dropped_rows_are_counted():
    f = finding(check("dropped-rows"), "TRAIN_ROWS_DROPPED")
    ev = f["evidence"]
    assert ev["status"] == {"success": 6, "error": 1, "skipped": 1}
    assert (ev["dropped_leading"], ev["truncated_turns"]) == (1, 1)


def test_check4_answers_cut_at_max_length():
    data = check("truncated", draft=TRAINING.parent / "drafts" / "good")
    f = finding(data, "TRAIN_TRUNCATED")
    assert f["evidence"]["max_length"] == 176 and f["evidence"]["rows_cut"] == 9
    assert f["evidence"]["tokens_cut"] > 0
    short = finding(data, "TRAIN_MAX_LENGTH_SHORT")["evidence"]
    assert short["draft_max_position_embeddings"] == 4096


def test_check5_scale_quotes_the_recipes_and_counts_epochs():
    f = finding(check("specforge"), "TRAIN_DATA_SCALE")
    assert f["severity"] == "info" and f["evidence"]["epochs"] == 10
    assert f["evidence"]["supervised_tokens_seen"] == 10 * f["evidence"]["supervised_tokens"]
    assert all("source" in r for r in f["evidence"]["recipes"])


def test_check7_reasoning_and_think_markers_in_content():
    data = check("reasoning-mismatch")
    found = [f for f in data["findings"] if f["code"] == "TRAIN_REASONING_MISMATCH"]
    assert {f["severity"] for f in found} == {"error", "warning"}
    assert any(f["evidence"].get("content_markers") == 2 for f in found)
    assert any(f["evidence"].get("reasoning_turns") == 4 for f in found)


def test_check8_a_mapping_built_from_other_data_is_stale():
    f = finding(check("stale-mapping"), "VOCAB_MAPPING_STALE")
    assert f["evidence"]["top_overlap"] == 0.0 and f["evidence"]["rebuilt_coverage"] == 1.0


def test_check8_a_mapping_older_than_the_data_is_stale(tmp_path):
    import shutil

    copy = shutil.copytree(TRAINING / "specforge", tmp_path / "specforge")
    mapping = copy / "vocab_mapping" / "vocab_mapping.pt"
    now = (copy / "train.jsonl").stat().st_mtime
    os.utime(mapping, (now - 2 * 86400, now - 2 * 86400))
    from eagle3_nb.checks.data import check_data

    data = check_data(copy, tokenizer=TOKENIZER, chat_template=TEMPLATE,
                      serve_thinking=False).to_json()
    f = finding(data, "VOCAB_MAPPING_STALE")
    assert "48.0 h older" in f["message"] and f["evidence"]["top_overlap"] == 1.0


def test_check10_prompts_in_another_script_are_a_domain_gap():
    good = TRAINING.parent / "drafts" / "good"
    other = finding(check("specforge", draft=good, prompts=TRAINING / "serving_prose.jsonl"),
                    "TRAIN_DOMAIN_GAP")
    same = finding(check("specforge", draft=good, prompts=TRAINING.parent / "prompts.jsonl"),
                   "TRAIN_DOMAIN_GAP")
    assert other["severity"] == "warning" and same["severity"] == "info"
    assert other["evidence"]["serving_coverage"] < same["evidence"]["serving_coverage"] - 0.5


# ----------------------------------------------------------------------------- CLI

def run_cli(*args):
    proc = subprocess.run([sys.executable, "-c", "import sys; from eagle3_nb.cli import main; "
                           "rc = main(sys.argv[1:]); "
                           "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', "
                           "file=sys.stderr); sys.exit(rc)", *map(str, args)],
                          capture_output=True, text=True)
    return proc.returncode, proc.stdout, proc.stderr


def test_cli_reads_rows_without_torch_and_says_the_row_bound(tmp_path):
    """torch is for the .pt mapping (torch.load(weights_only=True)) and checks 6 and 9 only."""
    rows = shutil.copytree(TRAINING / "specforge", tmp_path / "rows",
                           ignore=shutil.ignore_patterns("vocab_mapping"))
    rc, out, err = run_cli("data", rows, "--tokenizer", TOKENIZER, "--chat-template", TEMPLATE,
                           "--serve-thinking", "off", "--max-rows", "5")
    assert rc == 0, err
    assert "read 5 rows (stopped at --max-rows 5)" in out
    assert err.strip().endswith("NO-TORCH")
    rc, _, err = run_cli("data", TRAINING / "specforge", "--tokenizer", TOKENIZER,
                         "--chat-template", TEMPLATE, "--serve-thinking", "off")
    assert rc == 0 and err.strip().endswith("TORCH") and "NO-TORCH" not in err, err


def test_a_mapping_file_with_a_foreign_global_is_refused_not_run(tmp_path):
    """The .pt mapping is opened by torch.load(weights_only=True): a pickle naming any other
    callable is refused with exit 2, and what it names never runs."""
    import torch

    marker = tmp_path / "ran"
    data = shutil.copytree(TRAINING / "specforge", tmp_path / "set")
    torch.save({"t2d": TouchOnUnpickle(str(marker))}, data / "vocab_mapping" / "vocab_mapping.pt")
    rc, out, err = run_cli("data", data, "--tokenizer", TOKENIZER, "--chat-template", TEMPLATE,
                           "--serve-thinking", "off")
    assert rc == 2 and "weights_only" in err and "Traceback" not in err, err
    assert not marker.exists()


def test_cli_exit_codes(tmp_path):
    rc, out, _ = run_cli("data", TRAINING / "thinking-template", "--tokenizer", TOKENIZER,
                         "--chat-template", TEMPLATE, "--serve-thinking", "off", "--json")
    assert rc == 1 and "TRAIN_TEMPLATE_MISMATCH" in json.loads(out)["findings"][0]["code"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{oops\n")
    rc, out, err = run_cli("data", bad)
    assert rc == 2 and "line 1 is not JSON" in err and "Traceback" not in err and not out
    rc, _, err = run_cli("data", TRAINING / "specforge", "--template", "nope")
    assert rc == 2 and "unknown trainer template" in err
    for flag in ("--max-rows", "--max-length", "--serve-context"):
        rc, out, err = run_cli("data", TRAINING / "specforge", flag, "0")
        assert rc == 2 and f"{flag} must be at least 1" in err and not out, (flag, err)


def test_check6_without_dumps_says_the_provenance_and_needs_no_torch():
    regenerated = finding(check("specforge"), "TRAIN_DATA_OFF_POLICY")
    assert regenerated["severity"] == "info" and "12 rows carry a regeneration status" in \
        regenerated["message"]
    unknown = finding(check("off-policy"), "TRAIN_DATA_OFF_POLICY")
    assert "unknown" in unknown["message"]


# ------------------------------------------------- SpecForge's pre-tokenized rows (prompts_path)

def _token_rows() -> list[dict]:
    return [json.loads(line) for line in
            (TRAINING / "speculators" / "data.jsonl").read_text().splitlines()]


def test_pretokenized_rows_as_a_json_array_or_1_by_l_read_as_their_jsonl_twin(tmp_path):
    """SpecForge's prompt reader takes a JSON array as well as JSONL, and one [1, L] sequence
    per column (prompt_builder.py _iter_records, _normalize_integer_sequence)."""
    rows = _token_rows()
    (tmp_path / "array").mkdir()
    (tmp_path / "array" / "prompts.json").write_text(json.dumps(rows))
    (tmp_path / "wrapped").mkdir()
    (tmp_path / "wrapped" / "prompts.jsonl").write_text("\n".join(json.dumps(
        {"input_ids": [r["input_ids"]], "loss_mask": [r["loss_mask"]]}) for r in rows))
    twin = check("speculators", draft=None)
    for form in ("array", "wrapped"):
        assert [p.name for p in discover(tmp_path / form).tokens] == \
            ["prompts.json" if form == "array" else "prompts.jsonl"]
        from eagle3_nb.checks.data import check_data
        data = check_data(tmp_path / form, tokenizer=TOKENIZER, chat_template=TEMPLATE,
                          serve_thinking=False).to_json()
        assert data["stats"] == twin["stats"], form
        assert codes(data, "error", "warning") == codes(twin, "error", "warning")


@pytest.mark.parametrize("row, said", [
    ({"input_ids": [5, 6, 7], "loss_mask": [0, 2, 1]}, "loss_mask holds 2"),
    ({"input_ids": [5, True, 7], "loss_mask": [0, 1, 1]}, "input_ids is not a list of integers"),
    ({"input_ids": [[5, 6], [7, 8]], "loss_mask": [[0, 1], [1, 1]]},
     "input_ids is not a list of integers"),
])
def test_a_token_row_specforge_refuses_is_refused_with_its_row(tmp_path, row, said):
    path = tmp_path / "prompts.jsonl"
    path.write_text(json.dumps(_token_rows()[0]) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(Eagle3NbError, match=said) as err:
        list(iter_rows(path))
    assert "line 2" in str(err.value)
    out = subprocess.run([sys.executable, "-m", "eagle3_nb.cli", "data", str(path),
                          "--tokenizer", str(TOKENIZER)], capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr and said in out.stderr


def test_a_json_array_too_big_to_parse_whole_is_refused_with_the_conversion(tmp_path,
                                                                             monkeypatch):
    import eagle3_nb.io.training_data as td

    path = tmp_path / "prompts.json"
    path.write_text(json.dumps(_token_rows()))
    monkeypatch.setattr(td, "MAX_ARRAY_BYTES", 1024)
    with pytest.raises(Eagle3NbError, match="parsed whole") as err:
        list(iter_rows(path))
    assert "JSONL" in err.value.todo
