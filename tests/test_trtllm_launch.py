"""TensorRT-LLM's serving command and its --config YAML (eagle3_nb/engines/trtllm/launch.py):
read with safe_load only, bounded, and checked against the draft: the aux ids the YAML gives
(TensorRT-LLM never reads the draft's), the fc they imply, the backend and decoding type."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import DRAFTS, SAMPLES, TARGET_CONFIG, write_draft_dir
from eagle3_nb.checks.drafting import resolve_drafting
from eagle3_nb.checks.load import inspect_checkpoint
from eagle3_nb.engines.launch import MAX_COMMAND_BYTES, read_launch
from eagle3_nb.errors import ConfigError, Eagle3NbError

GOOD = DRAFTS / "good"
ENGINE = "trtllm==1.4.0rc1"


def yaml_file(tmp_path: Path, body: str, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


def spec(draft=GOOD, extra: str = "", key: str = "speculative_model") -> str:
    return (f"speculative_config:\n  decoding_type: Eagle3\n  max_draft_len: 4\n"
            f"  {key}: {draft}\n{extra}")


def draft_with_ids(tmp_path: Path, ids: list[int]) -> Path:
    """The good draft's config with eagle_config ids (the kit reads ids not starting at 1 as
    hidden_states indices, the SGLang/vLLM 'input to layer' numbering)."""
    cfg = json.loads((GOOD / "config.json").read_text())
    cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": ids}
    return write_draft_dir(tmp_path / "draft", config=cfg)


def launch_findings(draft: Path, launch: str) -> list[dict]:
    data = inspect_checkpoint(draft, [ENGINE], None, stats=False, launch=launch).to_json()
    return [f for f in data["findings"] if f["engine"] == ENGINE]


@pytest.mark.parametrize("flag", ["--config", "--extra_llm_api_options"])
def test_the_serving_command_reads_its_yaml(tmp_path, flag):
    path = yaml_file(tmp_path, spec())
    launch = read_launch(f"trtllm-serve /models/target {flag} {path}")
    assert (launch.engine, launch.model, launch.draft) == ("trtllm", "/models/target", str(GOOD))
    assert launch.method == "eagle3" and launch.num_steps == 4 and launch.topk is None


def test_the_yaml_itself_is_a_launch_input_and_the_older_draft_key_is_read(tmp_path):
    launch = read_launch(str(yaml_file(tmp_path, spec(key="speculative_model_dir"))))
    assert launch.engine == "trtllm" and launch.draft == str(GOOD) and launch.num_steps == 4


def test_a_draft_whose_ids_are_copied_into_the_yaml_is_one_layer_too_deep(tmp_path):
    draft = draft_with_ids(tmp_path, [2, 4, 6])
    path = yaml_file(tmp_path, spec(draft, "  eagle3_layers_to_capture: [2, 4, 6]\n"))
    [found] = [f for f in launch_findings(draft, str(path)) if f["code"] == "AUX_LAYER_CONVENTION"]
    assert found["severity"] == "error" and "copied as they are" in found["message"]
    assert found["evidence"]["config_line"] == "eagle3_layers_to_capture: [1, 3, 5]"
    assert "eagle3_layers_to_capture: [1, 3, 5]" in found["message"]
    assert found["evidence"]["captured"] == [3, 5, 7]


@pytest.mark.parametrize("ids, wrong", [([2, 4, 5], True), ([1, 3, 4], False)])
def test_a_draft_declaring_no_ids_is_judged_by_the_targets_default(tmp_path, ids, wrong):
    """The bundled good draft declares no ids: it was trained on the default [2, L//2, L-3],
    which needs the target's L. With the target config at hand the YAML's ids are judged as
    notebook 03 measures them."""
    path = yaml_file(tmp_path, spec(extra=f"  eagle3_layers_to_capture: {ids}\n"))
    data = inspect_checkpoint(GOOD, [ENGINE], TARGET_CONFIG, stats=False,
                              launch=str(path)).to_json()
    found = [f for f in data["findings"] if f["code"] == "AUX_LAYER_CONVENTION"]
    assert bool(found) == wrong
    if found:
        assert found[0]["evidence"]["trained"] == [2, 4, 5]
        assert found[0]["evidence"]["captured"] == [3, 5, 6]
    without_target = inspect_checkpoint(GOOD, [ENGINE], None, stats=False, launch=str(path))
    assert "AUX_LAYER_CONVENTION" not in {f.code for f in without_target.global_findings}


def test_the_corrected_ids_pass_and_the_plans_default_finding_goes(tmp_path):
    draft = draft_with_ids(tmp_path, [2, 4, 6])
    path = yaml_file(tmp_path, spec(draft, "  eagle3_layers_to_capture: [1, 3, 5]\n"))
    codes = {f["code"] for f in launch_findings(draft, str(path))}
    assert not codes & {"AUX_LAYER_CONVENTION", "AUX_LAYERS_DEFAULTED", "LAUNCH_SETTING"}


def test_no_ids_names_the_defaults_captured_and_the_line_to_write(tmp_path):
    draft = draft_with_ids(tmp_path, [2, 4, 6])
    found = [f for f in launch_findings(draft, str(yaml_file(tmp_path, spec(draft))))
             if f["code"] == "AUX_LAYERS_DEFAULTED" and "YAML" in f["message"]]
    assert found and "(1, L//2-1, L-4)" in found[0]["message"]
    assert found[0]["evidence"]["config_line"] == "eagle3_layers_to_capture: [1, 3, 5]"


def test_one_id_builds_no_fc_and_a_wrong_count_does_not_fit(tmp_path):
    one = yaml_file(tmp_path, spec(extra="  eagle3_layers_to_capture: [3]\n"), "one.yaml")
    assert any("builds no fc" in f["message"] for f in launch_findings(GOOD, str(one)))
    four = yaml_file(tmp_path, spec(extra="  eagle3_layers_to_capture: [1, 2, 3, 4]\n"), "4.yaml")
    assert any("shape error at load" in f["message"] for f in launch_findings(GOOD, str(four)))


def test_the_trt_backend_and_another_decoding_type_are_errors(tmp_path):
    path = yaml_file(tmp_path, spec())
    backend = launch_findings(GOOD, f"trtllm-serve /m --backend trt --config {path}")
    assert any(f["code"] == "LAUNCH_SETTING" and "--backend trt" in f["message"]
               and f["severity"] == "error" for f in backend)
    mtp = yaml_file(tmp_path, spec().replace("Eagle3", "MTP"), "mtp.yaml")
    assert any("decoding_type is MTP" in f["message"] for f in launch_findings(GOOD, str(mtp)))
    assert not any(f["code"] == "LAUNCH_SETTING" for f in launch_findings(GOOD, str(path)))


def test_accept_simulates_a_chain_of_max_draft_len_and_refuses_the_dynamic_tree(tmp_path):
    drafting = resolve_drafting(launch=read_launch(str(yaml_file(tmp_path, spec()))))
    assert (drafting.num_steps, drafting.topk) == (4, 1)
    tree = spec(extra="  use_dynamic_tree: true\n  dynamic_tree_max_topK: 4\n"
                      "  max_total_draft_tokens: 16\n")
    with pytest.raises(Eagle3NbError, match="use_dynamic_tree"):
        resolve_drafting(launch=read_launch(str(yaml_file(tmp_path, tree, "tree.yaml"))))


@pytest.mark.parametrize("body, why", [
    ("speculative_config: [unclosed\n", "not YAML"),
    ("speculative_config:\n  max_draft_len: 4\n  eagle3_layers_to_capture: one\n",
     "not a list of layer ids"),
    ("speculative_config:\n  max_draft_len: many\n", "not a whole number"),
])
def test_bad_yaml_is_a_clear_error(tmp_path, body, why):
    with pytest.raises(ConfigError, match=why):
        read_launch(str(yaml_file(tmp_path, body)))


def test_an_oversized_config_is_refused_before_it_is_parsed(tmp_path):
    big = yaml_file(tmp_path, spec() + "# " + "x" * MAX_COMMAND_BYTES + "\n")
    with pytest.raises(ConfigError, match="KiB"):
        read_launch(f"trtllm-serve /m --config {big}")


def test_the_cli_exits_2_on_a_bad_yaml_and_writes_nothing(tmp_path, capsys):
    from eagle3_nb.cli import main

    bad = yaml_file(tmp_path, "speculative_config: [unclosed\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    code = main(["inspect", str(GOOD), "--no-stats", "--engine", "trtllm", "--launch", str(bad)])
    err = capsys.readouterr().err
    assert code == 2 and "not YAML" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_another_draft_class_is_said_to_lie_outside_the_answer(tmp_path):
    path = yaml_file(tmp_path, spec(extra="  eagle3_model_arch: mistral_large3\n"))
    assert any("MistralLarge3EagleForCausalLM" in f["message"] and f["severity"] == "warning"
               for f in launch_findings(GOOD, str(path)))
    plain = launch_findings(GOOD, str(yaml_file(tmp_path, spec(), "plain.yaml")))
    assert not any("MistralLarge3" in f["message"] for f in plain)


def test_a_command_without_its_config_serves_no_draft():
    found = launch_findings(GOOD, "trtllm-serve /models/target --backend pytorch")
    assert any(f["code"] == "LAUNCH_SETTING" and f["severity"] == "error"
               and "names no draft model" in f["message"] for f in found)


def test_the_yaml_the_kit_writes_captures_what_the_draft_was_trained_on(tmp_path):
    """serve: the --config YAML for a draft holds the kit's own eagle3_layers_to_capture line
    (trained hidden_states index - 1), reads back as TensorRT-LLM serving that draft, and
    inspecting with it leaves no capture or launch finding."""
    from eagle3_nb.engines.registry import engines

    draft = draft_with_ids(tmp_path, [2, 4, 6])
    text = engines()["trtllm"].launch.serve(str(SAMPLES / "target"), str(draft))
    launch = read_launch(text)
    assert (launch.engine, launch.draft, launch.method) == ("trtllm", str(draft), "eagle3")
    assert launch.aux_ids == [1, 3, 5]
    data = inspect_checkpoint(draft, [ENGINE], TARGET_CONFIG, stats=False, launch=text).to_json()
    codes = {f["code"] for f in data["findings"] if f["engine"] == ENGINE}
    assert not codes & {"AUX_LAYER_CONVENTION", "AUX_LAYERS_DEFAULTED", "LAUNCH_SETTING"}


def test_ids_in_the_yaml_set_the_fc_width_the_plan_judges(tmp_path):
    """The plan builds fc for TensorRT-LLM's default 3 ids; a YAML giving the draft's 4 ids
    makes fc 4 wide, so the plan's AUX_COUNT_MISMATCH goes and only a count that does not fit
    is reported (by the YAML's own check)."""
    draft = DRAFTS / "aux4-speculators"
    plain = {f["code"] for f in launch_findings(draft, spec(draft))}
    assert "AUX_COUNT_MISMATCH" in plain
    four = launch_findings(draft, spec(draft, "  eagle3_layers_to_capture: [1, 3, 4, 6]\n"))
    assert not any(f["code"] == "AUX_COUNT_MISMATCH" or "shape error" in f["message"]
                   for f in four)
    three = launch_findings(draft, spec(draft, "  eagle3_layers_to_capture: [1, 3, 4]\n"))
    assert any("shape error at load" in f["message"] for f in three)


def test_the_decoding_type_is_the_exact_name_the_release_dispatches_on(tmp_path):
    """DecodingBaseConfig.from_dict looks the name up as written: Eagle3 only from PR #10124
    (assumed 1.2.0), Eagle in every release, EAGLE3 in none; the kit's own YAML (Eagle) passes
    everywhere."""
    def refused(kind, engine):
        yaml = spec().replace("Eagle3", kind)
        data = inspect_checkpoint(GOOD, [engine], None, stats=False, launch=yaml).to_json()
        return [f for f in data["findings"] if f["code"] == "LAUNCH_SETTING"
                and "matched exactly" in f["message"]]
    assert refused("Eagle3", "trtllm==1.1.0") and not refused("Eagle3", ENGINE)
    assert refused("EAGLE3", ENGINE) and refused("eagle3", "trtllm==1.3.0rc0")
    assert not refused("Eagle", "trtllm==1.1.0") and not refused("Eagle", ENGINE)
    assert "write decoding_type: Eagle3" in refused("EAGLE3", ENGINE)[0]["message"]


@pytest.mark.parametrize("ids, captured", [
    (None, (2, 4, 5)),           # no ids in the YAML: the engine's defaults (1, L//2-1, L-4) + 1
    ([1, 3, 4], (2, 4, 5)),      # the trained states, written in TensorRT-LLM's numbering
    ([2, 4, 5], (3, 5, 6)),      # the draft's own ids copied: one layer too deep
    ([1, 3, -1], (2, 4, 8)),     # -1: the final post-norm state, hidden_states[L]
])
def test_the_what_if_serves_the_layers_the_yaml_captures(tmp_path, ids, captured):
    """TensorRT-LLM takes its capture ids from the launch config, never from the draft: the
    what-if's TensorRT-LLM row simulates the states the YAML makes it capture, the ones the
    inspection's verdict judges, not the engine's defaults."""
    from eagle3_nb.checks.drafting import launch_settings
    from eagle3_nb.session import named_wirings
    from eagle3_nb.wirings import Served

    extra = f"  eagle3_layers_to_capture: {ids}\n" if ids is not None else ""
    served = Served.of(launch_settings(str(yaml_file(tmp_path, spec(extra=extra)))))
    presets = named_wirings(GOOD, TARGET_CONFIG, [ENGINE], served).presets
    assert presets[ENGINE].layer_ids == captured
    assert ("from the launch config" in presets[ENGINE].note) == (ids is not None)
