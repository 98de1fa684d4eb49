"""The config-field ablation (tools/config_ablation.py): every config field the kit reads, absent,
null, of the wrong type and contradicting another field, through each side environment's real
loader; the kit's startup prediction must be the engine's on every variant the kit reads.

The fast tests pin the tool's variants and the kit's answers that the engines showed; the slow
ones run the engines (skipped with the reason where a side environment is missing)."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import config_ablation as ablation  # noqa: E402

sys.path.remove(str(ROOT / "tools"))


def _variant(name):
    return next(v for v in ablation.variants() if v.name == name)


def _tree_digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(folder)).encode() + path.read_bytes())
    return h.hexdigest()


def test_variants_edit_one_field_of_a_copy(tmp_path):
    before = _tree_digest(ablation.DRAFTS)
    names = [v.name for v in ablation.variants()]
    assert len(names) == len(set(names)) > 150
    for name in ("flat.target_hidden_size.null", "spec.speculators_config.absent",
                 "flat.num_hidden_layers.absent", "spec.num_aux_hidden_states.contradicts"):
        folder = ablation.write_variant(_variant(name), tmp_path)
        assert (folder / "model.safetensors").read_bytes() == \
            (ablation.DRAFTS / _variant(name).base / "model.safetensors").read_bytes()
    assert _tree_digest(ablation.DRAFTS) == before  # nothing written into data_samples


@pytest.mark.parametrize("name, release, outcome", [
    # vLLM 0.33.0 / 0.34.0 build fc as target_hidden_size * A: a null in a flat config is
    # TypeError (the case); the speculators converter drops the null
    ("flat.target_hidden_size.null", "vllm==0.34.0", "raises"),
    ("flat.target_hidden_size.null", "vllm==0.33", "raises"),
    ("spec.base", "vllm==0.34.0", "starts"),
    # transformers' @strict LlamaConfig (the releases' pins): a null layer count raises
    ("flat.num_hidden_layers.null", "sglang==0.5.23", "raises"),
    ("flat.attention_bias.wrong-type", "vllm==0.34.0", "raises"),
    # vLLM builds its own lm_head whatever tie_word_embeddings says
    ("flat.tie_word_embeddings.contradicts", "vllm==0.34.0", "starts"),
    # vLLM's speculators converter does not pass num_aux_hidden_states on: fc stays 3 x H
    ("spec.num_aux_hidden_states.contradicts", "vllm==0.34.0", "starts"),
    ("spec.speculators_config.absent", "vllm==0.34.0", "raises"),
    # #25: what the engines read past is no refusal: LlamaConfig's defaults, values set aside
    ("flat.vocab_size.absent", "vllm==0.34.0", "starts"),
    ("flat.intermediate_size.absent", "vllm==0.34.0", "raises"),
    ("flat.eagle_aux_hidden_state_layer_ids.wrong-type", "vllm==0.34.0", "starts"),
    ("flat.num_aux_hidden_states.wrong-type", "sglang==0.5.9", "starts"),
    ("flat.num_aux_hidden_states.wrong-type", "sglang==0.5.23", "raises"),
    ("flat.kv_lora_rank.contradicts", "sglang==0.5.23", "starts"),
    ("spec.speculators_config.wrong-type", "vllm==0.34.0", "starts"),
    ("spec.architectures.wrong-type", "vllm==0.33", "starts"),
    # ... and what fails only past the probe (its CPU_ARTEFACTS) still fails in the kit
    ("flat.eagle_aux_hidden_state_layer_ids.contradicts", "sglang==0.5.23", "raises"),
    ("spec.transformer_layer_config.rms_norm_eps.wrong-type", "vllm==0.34.0", "refuses"),
    # the EAGLE worker's getattr(hf_config, "eagle_config", {}).get(...) meets a null in
    # 0.5.8-0.5.14 only (read in their wheels; the probe builds no worker)
    ("flat.eagle_config.null", "sglang==0.5.7", "starts"),
    ("flat.eagle_config.null", "sglang==0.5.9", "raises"),
    ("flat.eagle_config.null", "sglang==0.5.14", "raises"),
    ("flat.eagle_config.null", "sglang==0.5.15", "starts"),
    # transformers 4.57.1 (0.5.9's pin) guesses a class from the path's words: none in the
    # ablation's folder names, so it raises, as the real loader did
    ("flat.model_type.absent", "sglang==0.5.9", "raises"),
    # the draft-extend graph's top-level-ids width came with PR #29464 in 0.5.15
    ("flat.eagle_aux_hidden_state_layer_ids.contradicts", "sglang==0.5.14", "starts"),
    ("flat.eagle_aux_hidden_state_layer_ids.contradicts", "sglang==0.5.15", "raises"),
    ("flat.eagle_aux_hidden_state_layer_ids.wrong-type", "sglang==0.5.16", "raises"),
])
def test_kit_predictions_the_engines_showed(tmp_path, name, release, outcome):
    folder = ablation.write_variant(_variant(name), tmp_path)
    if name == "flat.model_type.absent":     # AutoConfig reads the path's words (the rule's)
        from conftest import names_a_model_type
        if names_a_model_type(folder):
            pytest.skip(f"this machine's temporary directory {tmp_path} names a model type")
    assert ablation.kit_prediction(folder, release)["outcome"] == outcome


def test_what_the_probe_cannot_show_is_classified_not_counted():
    """A refusal where the probe starts but the GPU startup fails (its CPU_ARTEFACTS entry, per
    release where the code differs) is a CPU artefact; on an environment whose transformers is
    not the release's, it is not evidence; anything else stays a refusal the engine disproves."""
    refuses, starts = {"outcome": ablation.REFUSES}, {"outcome": ablation.STARTS}
    name = "flat.eagle_config.wrong-type"
    assert ablation.agreement(refuses, starts, "sglang 0.5.9", name) == ablation.ARTEFACT
    assert ablation.agreement(refuses, starts, "sglang 0.5.23", name) == ablation.REFUSES_STARTS
    assert ablation.agreement(refuses, starts, "sglang 0.5.23", "flat.rope_theta.wrong-type",
                              evidence=False) == ablation.UNREAD
    raises = {"outcome": ablation.RAISES}
    assert ablation.agreement(raises, starts, "sglang 0.5.9",
                              "flat.num_attention_heads.absent") == ablation.ARTEFACT
    assert ablation.agreement(raises, starts, "vllm 0.34.0",
                              "flat.num_attention_heads.absent") == ablation.DISAGREE


# ----------------------------------------------------------------------------- real engines

def _env(spec: str) -> tuple[str, str]:
    engine, _, release = spec.partition("==")
    if not (ROOT / ".cache" / "engines" / f"{engine}-{release}" / ".ready").exists():
        pytest.skip(f"no {engine} {release} side environment: tools/engine_env.sh {engine} "
                    f"{release} (about a minute, 1 GB) sets it up")
    fit = ablation.transformers_fit(engine, release)
    if not fit["evidence"]:
        pytest.skip(f"the {engine} {release} side environment runs transformers "
                    f"{fit['running']}, which reads configs otherwise than the release's pin "
                    f"({fit['pin']}): its config-reading outcomes are not the release's")
    return engine, release


@pytest.mark.slow
@pytest.mark.parametrize("spec", ablation.DEFAULT_ENGINES)
def test_kit_predicts_every_variants_startup(spec):
    results = ablation.ablate([_env(spec)], log=lambda _: None)
    assert len(results) == len(ablation.variants())
    wrong = [ablation._line(r) for r in results
             if r.agreement in (ablation.DISAGREE, ablation.NOT_RUN)]
    assert not wrong, "\n".join(wrong)
    # a CPU artefact the kit answers for the GPU must still be one (else the entry is stale)
    stale = [r.variant.name for r in results if ablation.artefact(r.column, r.variant.name)
             and r.agreement != ablation.ARTEFACT]
    assert not stale, stale


def _plan(tmp_path, name, release):
    from eagle3_nb.engines import resolve_engine
    from eagle3_nb.engines.planner import plan_load
    from eagle3_nb.io.checkpoint import Checkpoint

    ckpt = Checkpoint.open(ablation.write_variant(_variant(name), tmp_path))
    return plan_load(resolve_engine(release), ckpt.config,
                     {n: t.shape for n, t in ckpt.tensors.items()})


def test_parameters_the_engines_built_key_by_key(tmp_path):
    """What `tools/config_ablation.py --keys` saw the engines build, as the plan's parameters."""
    vllm = _plan(tmp_path / "v", "flat.attention_bias.contradicts", "vllm==0.34.0").params
    sglang = _plan(tmp_path / "s", "flat.attention_bias.contradicts", "sglang==0.5.23").params
    assert "model.layers.0.self_attn.o_proj.bias" in vllm and \
        "model.layers.0.self_attn.qkv_proj.bias" in vllm
    assert "model.layers.0.self_attn.o_proj.bias" in sglang and \
        "model.layers.0.self_attn.qkv_proj.bias" not in sglang
    mlp = _plan(tmp_path / "m", "flat.mlp_bias.contradicts", "vllm==0.34.0").params
    assert "model.layers.0.mlp.down_proj.bias" in mlp
    no_aux = _plan(tmp_path / "f", "flat.eagle_config.use_aux_hidden_state.contradicts",
                   "vllm==0.34.0").params
    assert "model.fc.weight" not in no_aux
    tied = _plan(tmp_path / "t", "flat.tie_word_embeddings.contradicts", "vllm==0.34.0").params
    assert "lm_head.weight" in tied
