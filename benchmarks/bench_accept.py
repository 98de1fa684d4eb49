"""Benchmark: simulated speculative decoding (`eagle3_nb.acceptance.simulate`), verify steps/s,
against plain greedy generation of the same number of tokens by the same target in the same run.

Two cases, per device (CPU in float32 always; CUDA in bfloat16 when `torch.cuda.is_available()`):

  tiny     the bundled trained draft (data_samples/drafts/good) on the bundled 8-layer target,
           the bundled held-out prompts, k=--num-steps, --max-new-tokens per prompt
  8b-draft a Llama-3.1-8B-sized EAGLE-3 draft with random weights (H=4096, 32/8 heads, I=14336,
           Vd=32000, Vt=128256, fc 3*4096 -> 4096) on a random Llama target of the same width
           with --target-layers layers (default: 32, the real depth, on CUDA; 2 on CPU, where a
           32-layer float32 target does not fit in memory), random prompts of --prompt-len tokens

Per case, drafting (--drafting: "chain:K" or "tree:STEPS,TOPK,TOKENS", SGLang's tree) and batch
size (--batch-sizes, prompts decoded together): verify steps, generated tokens, wall seconds,
verify steps/s, tokens/s, the share of the time spent in target passes (the rest is the draft's
extend and drafting, and the simulator's own bookkeeping), and "x greedy": the simulation's
wall time over plain greedy generation (one target pass per token, KV cache kept, same batch,
same prompts, same tokens per prompt), measured in the same run. The target's own forward is the
floor; the goal is at most 1.2x on CPU at batch 8. Random weights accept ~nothing (accept length
~1), so the 8b-draft rows measure cost, not quality. With --repeat N the cases run round after
round, each showing its fastest round, against the fastest greedy generation; the load average
before and after is printed (a shared machine makes single runs swing).

The simulator keeps the target's and the draft's KV caches across verify steps (rejected drafts
stay as masked holes, finished prompts leave the batch), so a verify step costs k + 1 target
positions and accepted + 1 draft positions, not the whole sequence. A script that prints a
table, not a test.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from eagle3_nb.acceptance import Drafting, simulate  # noqa: E402
from eagle3_nb.decoding import left_pad  # noqa: E402
from eagle3_nb.model import Wiring  # noqa: E402

SAMPLES = REPO / "data_samples"


class TimedTarget:
    """A TargetModel whose forward passes are timed (synchronised on CUDA)."""

    def __init__(self, target):
        self.target, self.seconds = target, 0.0

    def __getattr__(self, name):
        return getattr(self.target, name)

    def forward_cached(self, *args, **kwargs):
        sync(self.target.device)
        t = time.perf_counter()
        out = self.target.forward_cached(*args, **kwargs)
        sync(self.target.device)
        self.seconds += time.perf_counter() - t
        return out


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def tiny_case(device, dtype, args):
    from eagle3_nb.session import read_prompts
    from eagle3_nb.model import load_draft
    from eagle3_nb.target import TargetModel

    target = TargetModel.load(SAMPLES / "target", device=device, dtype=dtype)
    draft = load_draft(SAMPLES / "drafts" / "good", device, dtype, embed_from=SAMPLES / "target")
    prompts = read_prompts(SAMPLES / "prompts.jsonl", target, args.prompts)
    return draft, target, prompts, Wiring("trained", (2, 4, 5))


def big_case(device, dtype, args):
    from transformers import LlamaConfig, LlamaForCausalLM

    from eagle3_nb.config import parse_config
    from eagle3_nb.model import Eagle3Draft
    from eagle3_nb.target import TargetModel

    H, I, Vt, Vd = 4096, 14336, 128256, 32000
    layers = args.target_layers or (32 if torch.device(device).type == "cuda" else 2)
    torch.manual_seed(0)
    with torch.device(device):
        config = LlamaConfig(hidden_size=H, intermediate_size=I, num_attention_heads=32,
                             num_key_value_heads=8, num_hidden_layers=layers, vocab_size=Vt,
                             max_position_embeddings=8192, torch_dtype=dtype)
        target = TargetModel(LlamaForCausalLM(config).to(dtype).eval())
        cfg = parse_config({"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
                            "hidden_size": H, "intermediate_size": I, "num_attention_heads": 32,
                            "num_key_value_heads": 8, "vocab_size": Vt, "draft_vocab_size": Vd,
                            "num_hidden_layers": 1, "max_position_embeddings": 8192})
        draft = Eagle3Draft(cfg, 3).to(dtype).eval()
    ids = [2, max(2, layers // 2), max(2, layers - 3)] if layers >= 4 else [1, 1, layers]
    prompts = [torch.randint(0, Vt, (args.prompt_len,)) for _ in range(args.prompts)]
    return draft, target, prompts, Wiring("bench", tuple(ids))


def parse_drafting(text: str) -> Drafting:
    kind, _, numbers = text.partition(":")
    values = [int(v) for v in numbers.split(",") if v]
    if kind == "chain" and len(values) == 1:
        return Drafting(values[0])
    if kind == "tree" and len(values) == 3:
        return Drafting(*values)
    raise SystemExit(f"--drafting {text!r}: chain:K or tree:STEPS,TOPK,TOKENS")


def measure(name, build, device, dtype, args) -> list[dict]:
    draft, target, prompts, wiring = build(device, dtype, args)
    timed = TimedTarget(target)
    simulate(draft, timed, prompts[:1], max_new_tokens=4, wiring=wiring, progress=False)  # warm-up
    rows = []
    for b in args.batch_sizes:
        rounds = []
        for _ in range(args.repeat):    # round after round: greedy, then every case
            greedy = greedy_seconds(target, prompts, args.max_new_tokens, b, device)
            cases = [measure_batch(name, draft, timed, prompts, wiring, device, dtype, b, d,
                                   greedy, args, stepwise)
                     for d in args.drafting for stepwise in (False, True)]
            if name == "tiny":
                cases += measure_what_if(draft, timed, prompts, device, b, greedy, args)
            rounds.append(cases)
        rows += fastest(rounds)
    return rows


def fastest(rounds: list[list[dict]]) -> list[dict]:
    """Per case its fastest round, against the fastest greedy generation of all rounds."""
    greedy = min(cases[0]["greedy s"] for cases in rounds)
    best = [min(runs, key=lambda r: r["s"]) for runs in zip(*rounds)]
    return [{**r, "greedy s": greedy, "x greedy": r["s"] / greedy} for r in best]


def measure_what_if(draft, timed, prompts, device, batch_size, greedy, args) -> dict:
    """Every wiring the kit simulates for the bundled draft, greedy verification (one target
    generation shared by all of them), against one plain greedy generation."""
    from eagle3_nb.session import load_for_run
    from eagle3_nb.whatif import run_what_if

    presets = load_for_run(SAMPLES / "drafts" / "good", SAMPLES / "target", None, device)[2]
    presets = {name: w for name, w in presets.items() if name not in args.what_if_without}
    drafting = Drafting(4)
    timed.seconds = 0.0
    sync(device)
    t = time.perf_counter()
    rows = run_what_if(draft, timed, prompts, presets, max_new_tokens=args.max_new_tokens,
                       progress=False, batch_size=batch_size, drafting=drafting)
    sync(device)
    wall = time.perf_counter() - t
    steps = sum(r.result.stats()["n_verify_steps"] for r in rows if r.result)
    tokens = sum(r.result.stats()["n_tokens"] for r in rows if r.result)
    fast = {"case": f"tiny what-if ({len(rows)} wirings)", "device": str(device),
            "dtype": "float32", "drafting": drafting.label(), "path": "greedy fast",
            "batch": batch_size, "prompts": len(prompts), "steps": steps, "tokens": tokens,
            "s": wall, "steps/s": steps / wall, "tokens/s": tokens / wall,
            "target share": timed.seconds / wall, "accept len": float("nan"), "greedy s": greedy,
            "x greedy": wall / greedy}
    # the same rows step by step, each wiring on its own (what the what-if cost before)
    timed.seconds = 0.0
    t = time.perf_counter()
    for row in rows:
        if row.result:
            simulate(draft, timed, prompts, max_new_tokens=args.max_new_tokens,
                     wiring=row.wiring, progress=False, batch_size=batch_size, drafting=drafting,
                     stepwise=True)
    sync(device)
    wall = time.perf_counter() - t
    return [fast, {**fast, "path": "step by step", "s": wall, "steps/s": steps / wall,
                   "tokens/s": tokens / wall, "target share": timed.seconds / wall,
                   "x greedy": wall / greedy}]


@torch.no_grad()
def greedy_seconds(target, prompts, max_new_tokens: int, batch_size: int, device) -> float:
    """Plain greedy generation of max_new_tokens per prompt, batch_size prompts at a time, one
    target pass per token with the KV cache kept: the floor a simulation is compared with."""
    sync(device)
    t = time.perf_counter()
    for i in range(0, len(prompts), batch_size):
        ids, mask = left_pad([p.reshape(-1).cpu() for p in prompts[i:i + batch_size]])
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        out, past = target.forward_cached(ids, mask, positions, None, logits_to_keep=1)
        for _ in range(max_new_tokens - 1):
            nxt = out.next_tokens[:, -1:].cpu()
            positions = positions[:, -1:] + 1
            mask = torch.cat([mask, torch.ones_like(nxt)], 1)
            out, past = target.forward_cached(nxt, mask, positions, past, logits_to_keep=1)
    sync(device)
    return time.perf_counter() - t


def measure_batch(name, draft, timed, prompts, wiring, device, dtype, batch_size, drafting,
                  greedy, args, stepwise: bool) -> dict:
    timed.seconds = 0.0
    sync(device)
    t = time.perf_counter()
    result = simulate(draft, timed, prompts, max_new_tokens=args.max_new_tokens, wiring=wiring,
                      progress=False, batch_size=batch_size, drafting=drafting, stepwise=stepwise)
    sync(device)
    wall = time.perf_counter() - t
    stats = result.stats()
    return {"case": name, "device": str(device), "dtype": str(dtype).replace("torch.", ""),
            "drafting": drafting.label(), "path": "step by step" if stepwise else "greedy fast",
            "batch": batch_size, "prompts": len(prompts),
            "steps": stats["n_verify_steps"], "tokens": stats["n_tokens"], "s": wall,
            "steps/s": stats["n_verify_steps"] / wall, "tokens/s": stats["n_tokens"] / wall,
            "target share": timed.seconds / wall, "accept len": stats["mean_accept_length"],
            "greedy s": greedy, "x greedy": wall / greedy}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", default=["tiny", "8b-draft"])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--prompt-len", type=int, default=128, help="8b-draft prompt length")
    parser.add_argument("--drafting", nargs="+", default=["chain:4", "tree:5,4,8"],
                        help="chain:K or tree:STEPS,TOPK,TOKENS (default: chain:4 tree:5,4,8)")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--target-layers", type=int, default=None)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--prompt-queries", type=int, default=None,
                        help="queries per prompt in one draft pass of the greedy fast path "
                             "(greedy/drafts.py PROMPT_QUERIES, default 64). At a tree's topk "
                             "(4): one position per prompt per pass, the pass count a walk "
                             "drafting only where it verifies would need 2-3x fewer of")
    parser.add_argument("--what-if-without", nargs="+", default=[], metavar="WIRING",
                        help="leave these wirings out of the what-if rows (what one costs: the "
                             "difference against a run with it)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="rounds; each case shows its fastest (default 1)")
    parser.add_argument("--quick", action="store_true", help="2 prompts, 16 tokens")
    args = parser.parse_args()
    args.drafting = [parse_drafting(d) for d in args.drafting]
    if args.quick:
        args.prompts, args.max_new_tokens = 2, 16
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.prompt_queries:
        import eagle3_nb.greedy.drafts as drafts
        drafts.PROMPT_QUERIES = args.prompt_queries
    devices = [("cpu", torch.float32)]
    if torch.cuda.is_available():
        devices.append(("cuda", torch.bfloat16))
    builders = {"tiny": tiny_case, "8b-draft": big_case}
    load = os.getloadavg()
    rows = [r for dev, dt in devices for c in args.cases
            for r in measure(c, builders[c], dev, dt, args)]
    if not torch.cuda.is_available():
        print("no CUDA device here: CPU rows only (the same script prints the CUDA rows on a GPU)")
    print("load average (1, 5, 15 min) before: {:.2f} {:.2f} {:.2f}, after: {:.2f} {:.2f} {:.2f}"
          .format(*load, *os.getloadavg()))
    print_table(rows)


def print_table(rows: list[dict]) -> None:
    cols = ["case", "device", "dtype", "drafting", "path", "batch", "prompts", "steps", "tokens", "s",
            "steps/s", "tokens/s", "target share", "accept len", "greedy s", "x greedy"]
    fmt = {"s": "{:.2f}", "steps/s": "{:.1f}", "tokens/s": "{:.1f}", "target share": "{:.0%}",
           "accept len": "{:.2f}", "greedy s": "{:.2f}", "x greedy": "{:.2f}x"}
    cells = [[fmt.get(c, "{}").format(r[c]) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    print("  ".join(c.rjust(w) for c, w in zip(cols, widths)))
    for row in cells:
        print("  ".join(v.rjust(w) for v, w in zip(row, widths)))


if __name__ == "__main__":
    main()
