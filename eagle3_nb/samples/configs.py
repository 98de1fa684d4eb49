"""The sample configs: the tiny target's config.json and the drafts' (SpecForge's flat shape,
speculators' nested one)."""

from __future__ import annotations

from typing import Any

from eagle3_nb.samples.weights import (DRAFT_VOCAB, H, HEAD_DIM, INTERMEDIATE, MAX_POSITIONS,
                                       NUM_HEADS, NUM_KV_HEADS, RMS_EPS, ROPE_THETA,
                                       TARGET_LAYERS, TARGET_VOCAB)


def target_config() -> dict[str, Any]:
    return {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "bos_token_id": 0,
        "eos_token_id": 0, "head_dim": HEAD_DIM, "hidden_act": "silu", "hidden_size": H,
        "intermediate_size": INTERMEDIATE, "max_position_embeddings": MAX_POSITIONS,
        "mlp_bias": False, "model_type": "llama", "num_attention_heads": NUM_HEADS,
        "num_hidden_layers": TARGET_LAYERS, "num_key_value_heads": NUM_KV_HEADS,
        "rms_norm_eps": RMS_EPS, "rope_theta": ROPE_THETA, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "vocab_size": TARGET_VOCAB,
    }


def flat_config(**changes: Any) -> dict[str, Any]:
    """SpecForge's llama3-8B-eagle3.json shape: no eagle_config, no aux ids (defaults apply)."""
    config = {
        "architectures": ["LlamaForCausalLMEagle3"], "bos_token_id": 1,
        "draft_vocab_size": DRAFT_VOCAB, "eos_token_id": 2, "head_dim": HEAD_DIM,
        "hidden_act": "silu", "hidden_size": H, "intermediate_size": INTERMEDIATE,
        "max_position_embeddings": MAX_POSITIONS, "model_type": "llama",
        "num_attention_heads": NUM_HEADS, "num_hidden_layers": 1,
        "num_key_value_heads": NUM_KV_HEADS, "pad_token_id": 0, "rms_norm_eps": RMS_EPS,
        "rope_theta": ROPE_THETA, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "vocab_size": TARGET_VOCAB,
    }
    config.update(changes)
    return config


def layer_config() -> dict[str, Any]:
    """speculators' transformer_layer_config (a LlamaConfig diff dict, transformers 5 style)."""
    return {
        "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
        "head_dim": HEAD_DIM, "hidden_act": "silu", "hidden_size": H, "initializer_range": 0.02,
        "intermediate_size": INTERMEDIATE, "max_position_embeddings": MAX_POSITIONS,
        "mlp_bias": False, "model_type": "llama", "num_attention_heads": NUM_HEADS,
        "num_hidden_layers": 1, "num_key_value_heads": NUM_KV_HEADS, "pad_token_id": None,
        "pretraining_tp": 1, "rms_norm_eps": RMS_EPS,
        "rope_parameters": {"rope_theta": ROPE_THETA, "rope_type": "default"},
        "tie_word_embeddings": False, "use_cache": True, "vocab_size": TARGET_VOCAB,
    }


def speculators_config(aux_ids: list[int]) -> dict[str, Any]:
    """What Eagle3DraftModel.save_pretrained writes (speculators 0.9.0)."""
    return {
        "architectures": ["Eagle3DraftModel"],
        "auto_map": {"": "config.Eagle3SpeculatorConfig"},
        "draft_vocab_size": DRAFT_VOCAB, "dtype": "bfloat16",
        "eagle_aux_hidden_state_layer_ids": list(aux_ids), "embed_requires_grad": False,
        "fc_norm": False, "norm_before_fc": False, "norm_before_residual": False,
        "norm_output": False,
        "speculators_config": {
            "algorithm": "eagle3", "default_proposal_method": "greedy",
            "proposal_methods": [{"accept_tolerance": 0.0, "proposal_type": "greedy",
                                  "speculative_tokens": 3, "verifier_accept_k": 1}],
            # a remote-style id: vLLM 0.33 refuses local verifier paths in this field
            "verifier": {"architectures": ["LlamaForCausalLM"],
                         "name_or_path": "eagle3-nb/tiny-llama-target"},
        },
        "speculators_model_type": "eagle3", "speculators_version": "0.9.0",
        "target_hidden_size": None, "tie_word_embeddings": False,
        "transformer_layer_config": layer_config(), "transformers_version": "5.19.0",
    }
