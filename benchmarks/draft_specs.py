"""(name, dtype, shape) of an EAGLE-3 draft for the benchmarks, from the kit's own schema
(eagle3_nb.layouts.expected_schema), so benchmark checkpoints carry exactly the keys and shapes
the kit expects. Imports no torch."""

from eagle3_nb.config import parse_config
from eagle3_nb.layouts import expected_schema

DTYPES = {"d2t": "I64", "t2d": "BOOL"}


def draft_specs(H, I, heads, kv_heads, Vd, Vt, n_layers=1) -> list[tuple[str, str, list[int]]]:
    cfg = parse_config({"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
                        "hidden_size": H, "intermediate_size": I, "num_attention_heads": heads,
                        "num_key_value_heads": kv_heads, "vocab_size": Vt,
                        "draft_vocab_size": Vd, "num_hidden_layers": n_layers})
    return [(name, DTYPES.get(name, "BF16"), list(entry.shape))
            for name, entry in expected_schema(cfg).items()]
