"""Benchmark: is the draft's grouped-query attention inside `scaled_dot_product_attention`
(`enable_gqa`, eagle3_nb/draft_blocks.py) slower than expanding the key/value heads first, as the
kit did before? Issue #26 asked, after the draft forward went from 0.76x to 0.96x of speculators'
time at H=1024, T=512 between two measurements.

The kit's own `Eagle3Draft.run` is timed twice per shape, interleaved round after round:
as the kit runs it, and with `scaled_dot_product_attention` wrapped so that every call with
`enable_gqa` gets `repeat_interleave`d keys and values instead (the old path). A plain SDPA call
of the same shape, each way, is the second pair of columns. The outputs are compared first and
every case is called once before the timed rounds. A script that prints a table, not a test:

    .venv/bin/python benchmarks/bench_attention.py [--repeat 7] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from eagle3_nb import draft_blocks  # noqa: E402
from eagle3_nb.config import parse_config  # noqa: E402
from eagle3_nb.model import Eagle3Draft  # noqa: E402

A = 3
SDPA = F.scaled_dot_product_attention


def config(H: int, heads: int, kv_heads: int) -> dict:
    return {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
            "hidden_size": H, "num_attention_heads": heads, "num_key_value_heads": kv_heads,
            "intermediate_size": 4 * H, "num_hidden_layers": 1, "vocab_size": 128256,
            "draft_vocab_size": 32000, "rms_norm_eps": 1e-5, "hidden_act": "silu",
            "max_position_embeddings": 8192, "rope_theta": 500000.0}


def expanded_sdpa(q, k, v, *args, enable_gqa: bool = False, **kw):
    """The old path: key/value heads repeated to the query heads before the kernel."""
    if enable_gqa and k.shape[-3] != q.shape[-3]:
        groups = q.shape[-3] // k.shape[-3]
        k, v = k.repeat_interleave(groups, -3), v.repeat_interleave(groups, -3)
    return SDPA(q, k, v, *args, **kw)


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def row(H, heads, kv_heads, B, T, repeat) -> list[str]:
    torch.manual_seed(0)
    draft = Eagle3Draft(parse_config(config(H, heads, kv_heads), "bench_attention"),
                        num_aux=A).eval()
    ids = torch.randint(0, 128256, (B, T))
    hidden = torch.randn(B, T, A * H)
    hd = H // heads
    q, k, v = torch.randn(B, heads, T, hd), torch.randn(B, kv_heads, T, hd), \
        torch.randn(B, kv_heads, T, hd)
    mask = torch.ones(T, T, dtype=torch.bool).tril()

    def forward(expand: bool):
        draft_blocks.F.scaled_dot_product_attention = expanded_sdpa if expand else SDPA
        try:
            return draft.run(ids, hidden).logits
        finally:
            draft_blocks.F.scaled_dot_product_attention = SDPA

    cases = {"kit": lambda: forward(False), "old": lambda: forward(True),
             "sdpa": lambda: SDPA(q, k, v, attn_mask=mask, enable_gqa=True),
             "sdpa_old": lambda: expanded_sdpa(q, k, v, attn_mask=mask, enable_gqa=True)}
    with torch.inference_mode():
        same = torch.allclose(forward(False), forward(True), rtol=1e-4, atol=1e-4)
        for fn in cases.values():      # warm-up: first-call allocations are not timed
            fn()
        times = {name: [] for name in cases}
        for _ in range(repeat):
            for name, fn in cases.items():
                times[name].append(timed(fn))
    ms = {name: statistics.median(ts) * 1e3 for name, ts in times.items()}
    return [f"{H}, {heads}/{kv_heads}", str(B), str(T), f"{ms['kit']:.1f}", f"{ms['old']:.1f}",
            f"{ms['kit'] / ms['old']:.2f}x", f"{ms['sdpa']:.2f}", f"{ms['sdpa_old']:.2f}",
            f"{ms['sdpa'] / ms['sdpa_old']:.2f}x", "yes" if same else "NO"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads, CPU float32, median of "
          f"{args.repeat} interleaved rounds\n")
    head = ["H, heads/kv", "B", "T", "kit ms (GQA in SDPA)", "old ms (kv expanded)",
            "kit/old", "SDPA alone ms", "expanded alone ms", "ratio", "same logits"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for H, heads, kv_heads, B, T in ((1024, 16, 4, 1, 512), (1024, 16, 8, 1, 512),
                                      (1024, 16, 4, 4, 512), (1024, 16, 4, 8, 128),
                                      (4096, 32, 8, 1, 512)):
        print("| " + " | ".join(row(H, heads, kv_heads, B, T, args.repeat)) + " |", flush=True)


if __name__ == "__main__":
    main()
