"""Config values the engines read past (#25): the config-field ablation (docs/engine-truth.md)
found `inspect` refusing variants of the bundled drafts whose config the engines' own loaders
build and load. Each class of such value, as the kit now answers it on a copy of a bundled draft:
a layer size a flat config leaves out takes LlamaConfig's default, as AutoConfig gives it to the
engine; a value of a type the engine's path never reads is set aside, with a finding where it
shows what the user meant; and each release's config_rules say where an engine does read it and
fails. What every engine reads and cannot use is still refused (exit 2)."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import DRAFTS, TARGET_CONFIG
from eagle3_nb.cli import main

GONE = object()   # an edit that removes the key


def _draft(tmp_path, base: str, **edits):
    """A copy of the bundled draft BASE with config.json's top-level keys edited (a key
    "transformer_layer_config__k" edits the layer config's k)."""
    draft = tmp_path / base
    shutil.copytree(DRAFTS / base, draft)
    config = json.loads((draft / "config.json").read_text())
    for key, value in edits.items():
        node, name = config, key
        if "__" in key:
            section, name = key.split("__")
            node = config[section]
        if value is GONE:
            node.pop(name, None)
        else:
            node[name] = value
    (draft / "config.json").write_text(json.dumps(config))
    return draft


def _inspect(capsys, draft, *engines) -> tuple[int, dict, str]:
    args = ["inspect", str(draft), "--no-stats", "--json", "--target-config", str(TARGET_CONFIG)]
    for engine in engines:
        args += ["--engine", engine]
    code = main(args)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, (json.loads(out) if code != 2 else {}), err


def _messages(report: dict, engine: str, code: str) -> list[str]:
    return [f["message"] for f in report["findings"]
            if f["code"] == code and f["engine"] in (engine, None)]


def _verdict(report: dict, engine: str) -> str:
    return next(e["verdict"] for e in report["engines"] if e["profile"] == engine)


# ----------------------------------------------------------------------------- class defaults

@pytest.mark.parametrize("key, default, shape", [
    ("num_attention_heads", 32, "[64, 512]"),    # o_proj takes 32 heads x head_dim 16
    ("intermediate_size", 11008, "11008"),
    ("hidden_size", 4096, "[4096, 12288]"),      # fc: 3 x 4096 -> 4096
])
def test_a_missing_layer_size_takes_llamaconfigs_default(tmp_path, capsys, key, default, shape):
    """The engines read a flat draft config through LlamaConfig (AutoConfig), which fills the
    size in; the weights then do not fit, and the engine's loader says so (vLLM on every
    device, SGLang on a GPU): the kit's plan says the same instead of refusing the config."""
    draft = _draft(tmp_path, "good", **{key: GONE})
    code, report, _ = _inspect(capsys, draft, "vllm==0.34.0", "sglang==0.5.23")
    assert code == 1 and report["config"]["class_defaults"] == {key: default}
    for engine in ("vllm==0.34.0", "sglang==0.5.23"):
        assert _verdict(report, engine) == "load_error"
        assert any(shape in m for m in _messages(report, engine, "LOAD_ERROR"))


def test_a_missing_vocab_size_loads_with_the_default_and_is_named(tmp_path, capsys):
    """vocab_size only sizes the draft's own embed_tokens, which this draft does not ship: every
    engine starts (the ablation's flat.vocab_size.absent). The kit says where 32000 came from."""
    draft = _draft(tmp_path, "good", vocab_size=GONE)
    code, report, _ = _inspect(capsys, draft, "vllm==0.34.0", "sglang==0.5.9")
    assert code != 2 and report["config"]["class_defaults"] == {"vocab_size": 32000}
    for engine in ("vllm==0.34.0", "sglang==0.5.9"):
        assert not _messages(report, engine, "LOAD_ERROR")
    (mismatch,) = [f for f in report["findings"] if f["code"] == "TARGET_MISMATCH"]
    assert mismatch["severity"] == "warning" and "leaves vocab_size out" in mismatch["message"]


@pytest.mark.parametrize("base, edits", [
    ("good-speculators", {"transformer_layer_config__vocab_size": GONE}),  # vLLM: no defaults
    ("good", {"vocab_size": GONE, "model_type": "mistral"}),  # a class whose defaults not read
    ("good", {"vocab_size": None}),
    ("good", {"hidden_size": "64"}),
])
def test_a_size_the_kit_cannot_take_from_a_class_is_still_refused(tmp_path, capsys, base, edits):
    code, _, err = _inspect(capsys, _draft(tmp_path, base, **edits), "vllm==0.34.0")
    assert code == 2 and "config.json" in err


# ----------------------------------------------------------------------------- aux layer ids

def test_top_level_aux_ids_written_as_a_string(tmp_path, capsys):
    """No engine reads "1,3,5" as layer ids: vLLM's capture takes only a list (defaults
    otherwise), SGLang's reads only eagle_config. The kit names the string in
    AUX_LAYERS_DEFAULTED; SGLang 0.5.23 sizes its CUDA graph from len("1,3,5") = 5 and fails."""
    draft = _draft(tmp_path, "good", eagle_aux_hidden_state_layer_ids="1,3,5")
    code, report, _ = _inspect(capsys, draft, "vllm==0.34.0", "sglang==0.5.9", "sglang==0.5.23")
    assert code == 1
    for engine in ("vllm==0.34.0", "sglang==0.5.9"):
        assert _verdict(report, engine) == "ok"
        assert any("'1,3,5'" in m and "[2, 4, 5]" in m
                   for m in _messages(report, engine, "AUX_LAYERS_DEFAULTED"))
    (graph,) = _messages(report, "sglang==0.5.23", "LOAD_ERROR")
    assert "len 5" in graph and "CUDA graph" in graph


def test_speculators_aux_ids_written_as_a_string(tmp_path, capsys):
    draft = _draft(tmp_path, "good-speculators", eagle_aux_hidden_state_layer_ids="2,4,5")
    code, report, _ = _inspect(capsys, draft, "vllm==0.34.0")
    assert code != 2 and _verdict(report, "vllm==0.34.0") == "ok"
    assert any("'2,4,5'" in m for m in _messages(report, "vllm==0.34.0", "AUX_LAYERS_DEFAULTED"))


@pytest.mark.parametrize("edits, fails", [
    ({"eagle_aux_hidden_state_layer_ids": [1, 3]}, True),
    ({"eagle_aux_hidden_state_layer_ids": [1, 3, 5]}, False),
    ({"eagle_aux_hidden_state_layer_ids": [1, 3], "num_aux_hidden_states": 3}, False),
    ({"eagle_aux_hidden_state_layer_ids": [1, 3],
      "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 5]}}, False),
])
def test_sglang_sizes_its_draft_extend_graph_from_top_level_ids(tmp_path, capsys, edits, fails):
    """SGLang 0.5.15+ (PR #29464): get_draft_input_from_target_hidden_dim counts the top-level
    ids where nothing else sets the count, the draft's fc takes 3 states: a CUDA graph of the
    wrong width (the probe's CPU captures none, so the ablation lists it as a CPU artefact).
    0.5.13-0.5.14 size that graph from eagle_config's ids only."""
    code, report, _ = _inspect(capsys, _draft(tmp_path, "good", **edits), "sglang==0.5.23",
                               "sglang==0.5.15", "sglang==0.5.14", "sglang==0.5.9")
    for engine, rule in (("sglang==0.5.23", fails), ("sglang==0.5.15", fails),
                         ("sglang==0.5.14", False), ("sglang==0.5.9", False)):
        graph = [m for m in _messages(report, engine, "LOAD_ERROR") if "CUDA graph" in m]
        assert bool(graph) == rule, engine


# ----------------------------------------------------------------------------- aux count

def test_num_aux_hidden_states_that_is_not_an_integer(tmp_path, capsys):
    """SGLang 0.5.12+ and vLLM 0.22+ build fc from it (TypeError); SGLang 0.5.9 builds fc for 3
    and never reads it; vLLM's speculators converter does not pass it on."""
    flat = _draft(tmp_path, "good", num_aux_hidden_states="3")
    code, report, _ = _inspect(capsys, flat, "sglang==0.5.9", "sglang==0.5.23", "vllm==0.34.0")
    assert code == 1 and report["config"]["unread"] == {"num_aux_hidden_states": "3"}
    assert _verdict(report, "sglang==0.5.9") == "ok"
    for engine in ("sglang==0.5.23", "vllm==0.34.0"):
        assert any(m.startswith("num_aux_hidden_states is '3'") and "TypeError" in m
                   for m in _messages(report, engine, "LOAD_ERROR"))
    spec = _draft(tmp_path, "good-speculators", num_aux_hidden_states="3")
    code, report, _ = _inspect(capsys, spec, "vllm==0.34.0")
    assert code == 0 and _verdict(report, "vllm==0.34.0") == "ok"


def test_num_aux_hidden_states_x_is_answered_by_the_engines(tmp_path, capsys):
    """Was refused with the other hostile values (tests/test_hostile_json.py): the newest
    releases raise on it, and the kit says so without a traceback."""
    draft = _draft(tmp_path, "good", num_aux_hidden_states="x")
    code = main(["inspect", str(draft), "--no-stats"])
    out, err = capsys.readouterr()
    assert code == 1 and "Traceback" not in err and "num_aux_hidden_states is 'x'" in out
    code = main(["inspect", str(_draft(tmp_path / "big", "good", num_aux_hidden_states=1000)),
                 "--no-stats"])
    assert code == 2 and "num_aux_hidden_states" in capsys.readouterr().err


# ----------------------------------------------------------------------------- MLA sizes

@pytest.mark.parametrize("kv_lora_rank", ["16", 16])
def test_mla_sizes_beside_a_llama_draft_class(tmp_path, capsys, kv_lora_rank):
    """SGLang and vLLM pick the MLA draft class by architectures, so the Llama class never reads
    kv_lora_rank; TensorRT-LLM picks MLA attention by kv_lora_rank and then lacks the sizes."""
    draft = _draft(tmp_path, "good", kv_lora_rank=kv_lora_rank)
    code, report, _ = _inspect(capsys, draft, "sglang==0.5.23", "vllm==0.34.0", "trtllm")
    assert code == 1
    for engine in ("sglang==0.5.23", "vllm==0.34.0"):
        assert _verdict(report, engine) == "ok"
    trtllm = [m for f in report["findings"] if f["code"] == "LOAD_ERROR"
              and f["engine"].startswith("trtllm") for m in [f["message"]]]
    assert any("kv_lora_rank is set" in m and "qk_nope_head_dim is missing" in m for m in trtllm)


def test_mla_draft_class_with_an_unreadable_size(tmp_path, capsys):
    draft = _draft(tmp_path, "mla-draft", kv_lora_rank="16")
    code, report, _ = _inspect(capsys, draft, "sglang==0.5.23")
    assert code == 1 and _verdict(report, "sglang==0.5.23") == "load_error"
    assert any("kv_lora_rank is '16', not an integer" in m
               for m in _messages(report, "sglang==0.5.23", "LOAD_ERROR"))


# ----------------------------------------------------------------------------- speculators

@pytest.mark.parametrize("edits", [{"speculators_config": "x"}, {"speculators_config": [1]},
                                   {"architectures": "Eagle3DraftModel"}])
def test_speculators_fields_vllm_does_not_read(tmp_path, capsys, edits):
    """vLLM checks speculators_config only for null when the draft comes through
    --speculative-config, and update_eagle3 writes its own architectures."""
    code, report, _ = _inspect(capsys, _draft(tmp_path, "good-speculators", **edits),
                               "vllm==0.34.0")
    assert code == 0 and _verdict(report, "vllm==0.34.0") == "ok"
    assert report["config"]["unread"] == edits


# ----------------------------------------------------------------------------- still refused

@pytest.mark.parametrize("base, edits", [
    ("good", {"architectures": "LlamaForCausalLMEagle3"}),   # every engine reads [0]
    ("good", {"eagle_config": "x"}),
    ("good", {"eagle_config": {"eagle_aux_hidden_state_layer_ids": "1,3,5"}}),
    ("good", {"eagle_aux_hidden_state_layer_ids": [1, "3", 5]}),  # vLLM captures this list
    ("good", {"num_key_value_heads": 3}),
    ("good", {"kv_lora_rank": 10 ** 9}),
    ("good-speculators", {"transformer_layer_config__rms_norm_eps": "1e-05"}),
])
def test_values_the_engines_read_and_cannot_use_are_still_refused(tmp_path, capsys, base,
                                                                  edits):
    code, _, err = _inspect(capsys, _draft(tmp_path, base, **edits), "vllm==0.34.0")
    assert code == 2 and "config.json" in err


# ----------------------------------------------------------------------------- model_type absent

@pytest.mark.parametrize("folder, sglang_0_5_9", [
    ("plain", "raises"),             # no model type in the path: ValueError: Unrecognized model
    ("llama-eagle3", "starts"),      # LlamaConfig, guessed from "llama"
    ("sam-draft", "guessed"),        # SamConfig, guessed from "sam": a warning, not a verdict
])
def test_a_config_without_model_type_is_read_by_the_words_of_its_path(tmp_path, capsys,
                                                                        folder, sglang_0_5_9):
    """transformers <= 5.1 (SGLang 0.5.9 pins 4.57.1) guesses the config class from the longest
    model type written in the draft's path (AutoConfig.from_pretrained), else raises; 5.2+
    (SGLang 0.5.11 on) always raises. The real 0.5.9 loader gave these three outcomes."""
    from conftest import names_a_model_type

    if names_a_model_type(tmp_path):
        pytest.skip(f"this machine's temporary directory {tmp_path} names a model type itself")
    draft = _draft(tmp_path / "x", "good")
    config = json.loads((draft / "config.json").read_text())
    config.pop("model_type")
    named = tmp_path / folder
    draft.rename(named)
    (named / "config.json").write_text(json.dumps(config))
    code, report, _ = _inspect(capsys, named, "sglang==0.5.9", "sglang==0.5.23", "vllm==0.19.1",
                               "vllm==0.34.0")
    for strict in ("sglang==0.5.23", "vllm==0.34.0"):
        assert any("model_type is absent" in m for m in _messages(report, strict, "LOAD_ERROR"))
    # vLLM up to 0.23 reaches the same AutoConfig through get_config (read, not run)
    for lenient in ("sglang==0.5.9", "vllm==0.19.1"):
        old = [m for m in _messages(report, lenient, "LOAD_ERROR") if "model_type" in m]
        guessed = _messages(report, lenient, "CONFIG_GUESSED")
        assert bool(old) == (sglang_0_5_9 == "raises"), lenient
        assert bool(guessed) == (sglang_0_5_9 == "guessed"), lenient
        if guessed:
            assert "'sam'" in guessed[0]


@pytest.mark.parametrize("folder, outcome", [
    ("fireredlid-draft", "raises"),               # registered by vLLM only when such a model loads
    ("siglip_visual_tokenizer-x", "'siglip'"),    # so transformers' longest type there is read
])
def test_types_vllm_registers_lazily_are_not_path_words(tmp_path, capsys, folder, outcome):
    """What the real vLLM 0.23.0 loader (transformers 4.57.1, a Llama target) did with these
    paths: its configs package registers fireredlid and the Ovis visual tokenizers with
    AutoConfig only when their modules load (engines/vllm/data/autoconfig-model-types.json)."""
    from conftest import names_a_model_type

    if names_a_model_type(tmp_path):
        pytest.skip(f"this machine's temporary directory {tmp_path} names a model type itself")
    draft = _draft(tmp_path / "x", "good", model_type=GONE).rename(tmp_path / folder)
    code, report, _ = _inspect(capsys, draft, "vllm==0.23.0")
    errors = [m for m in _messages(report, "vllm==0.23.0", "LOAD_ERROR") if "model_type" in m]
    guessed = _messages(report, "vllm==0.23.0", "CONFIG_GUESSED")
    assert bool(errors) == (outcome == "raises")
    assert (outcome in guessed[0]) if guessed else outcome == "raises"


@pytest.mark.parametrize("kit_folder, served, guessed", [
    ("plain", "/models/llama-eagle3", True),      # the kit's path names no type; the engine's does
    ("llama-eagle3", "/models/plain", False),     # and the other way round
])
def test_the_path_guess_reads_the_path_the_serving_command_names(tmp_path, capsys, kit_folder,
                                                                  served, guessed):
    """The engine's AutoConfig sees the draft path its serving command names, not the one the
    kit was given (a copy on another machine, say): --launch's path decides."""
    from conftest import names_a_model_type

    if names_a_model_type(tmp_path):
        pytest.skip(f"this machine's temporary directory {tmp_path} names a model type itself")
    draft = _draft(tmp_path / "x", "good", model_type=GONE).rename(tmp_path / kit_folder)
    launch = ("python -m sglang.launch_server --model-path /models/target "
              f"--speculative-algorithm EAGLE3 --speculative-draft-model-path {served}")
    code = main(["inspect", str(draft), "--no-stats", "--json", "--target-config",
                 str(TARGET_CONFIG), "--engine", "sglang==0.5.9", "--launch", launch])
    out, err = capsys.readouterr()
    assert code in (0, 1) and "Traceback" not in err
    unguessed = [f for f in json.loads(out)["findings"]
                 if f["code"] == "LOAD_ERROR" and f["evidence"].get("config_field") == "model_type"]
    assert bool(unguessed) != guessed
    if unguessed:
        assert unguessed[0]["evidence"]["path_checked"] == served
    # the what-if's row for that release agrees: it runs where the release starts
    from eagle3_nb.session import named_wirings

    from eagle3_nb.wirings import Served

    served_as = named_wirings(draft, TARGET_CONFIG, ["sglang==0.5.9"], Served(served)).presets
    assert bool(served_as["sglang==0.5.9"].engine_error) != guessed


# ----------------------------------------------------------------------------- speculators reader

_OLD_READERS = ("vllm==0.23.0", "vllm==0.15.1", "vllm==0.10.2")


@pytest.mark.parametrize("edits", [{"speculators_model_type": GONE},
                                   {"transformer_layer_config__hidden_act": GONE}])
def test_older_vllm_speculators_readers_raise_as_033s_does(tmp_path, capsys, edits):
    """vLLM 0.10.1-0.23.0 read a speculators config as 0.33.0 does (SpeculatorsConfig, read in
    every wheel): no speculators_model_type raises 'Expected one of: {eagle3, ...}', a layer
    config without hidden_act an AttributeError in LlamaMLP (both run on 0.23.0)."""
    code, report, _ = _inspect(capsys, _draft(tmp_path, "good-speculators", **edits),
                               *_OLD_READERS)
    assert code == 1
    field = next(iter(edits)).replace("__", ".")
    for engine in _OLD_READERS:
        assert _verdict(report, engine) == "load_error"
        assert any(field in m for m in _messages(report, engine, "LOAD_ERROR"))


def test_older_vllm_speculators_readers_start_the_unedited_draft(tmp_path, capsys):
    code, report, _ = _inspect(capsys, _draft(tmp_path, "good-speculators"), *_OLD_READERS)
    assert code != 2
    for engine in _OLD_READERS:
        assert not _messages(report, engine, "LOAD_ERROR")
