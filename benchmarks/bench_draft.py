"""Benchmark: forward throughput of the kit's EAGLE-3 draft (`eagle3_nb.model.Eagle3Draft`).

Builds a Llama-3.1-8B-sized EAGLE-3 draft with random weights from a flat config dict
(`parse_config` + `Eagle3Draft`; no checkpoint is written): H=4096, 32/8 heads, head_dim 128,
I=14336, 1 decoder layer, Vt=128256, Vd=32000, A=3 aux layers (fc 12288 -> 4096), llama3 RoPE.
Then, per device (CPU in float32 always; CUDA in bfloat16 when `torch.cuda.is_available()`),
it times under `torch.inference_mode()`:

  run(), T=--seq     one causal pass `draft.run(ids [B,T], hidden [B,T,3H], positions)`, fc applied
  run(), T=1         the same with one token per row (fc applied, no cache)
  decode step        what `step()` does per drafted token: T=1 with a KV cache of --decode-prefix
                     positions and the draft's own H-wide feature (fc skipped)

and, in the same rows, a plain `torch.matmul` of the two dominant shapes at M = B*T rows:
[M, H] x [H, Vd] (the lm_head) and [M, 2H] x [2H, H] (q_proj over the embedding+feature concat).
Both use the model's own weights transposed (`W.t()`, the layout `nn.Linear` multiplies with),
so no weight is copied.

FLOPs are counted by hand, 2*m*n*k per matmul: fc A*Ht->H, q/k/v over 2H, attention scores and
values over the S visible keys (full T x S, as SDPA with a mask computes it), o_proj, the MLP's
3 matmuls, lm_head H->Vd. Norms, RoPE, softmax and the embedding lookup are not counted.
"weight GB/s" (T=1 tables) is the bytes of every weight matrix the pass multiplies with
(embed_tokens excluded: only B rows are read) over the time: at small B a pass is a weight read.

Timing: every case of a row is warmed up (--warmup calls; on CPU not for a case whose calls took
over --budget-s in the previous, smaller row), then the cases run interleaved, round after round,
up to --repeat rounds (at least 3; no new round once the row has spent --budget-s). "ms" is the
median; "spread" is the kit's slowest over fastest run. "cores busy" (CPU) is the process's CPU
time over wall time during the timed rounds: about --threads when the threads really ran in
parallel, lower when the (shared) host gave them less. Shared vCPUs swing: compare within a row
("kit / best mm", "spec/kit time"), not across runs.

--speculators-path DIR puts DIR on sys.path and compares with speculators' `Eagle3DraftModel`
built from an `Eagle3SpeculatorConfig` of the same sizes, holding the same tensors
(`load_state_dict(assign=True)`: layers.0.*, fc, norm, lm_head, embed_tokens, d2t/t2d). Its
`forward(hidden_states, input_ids, document_ids, position_ids=..., ttt_steps=1)` is a
training-style pass over ONE packed row: the B rows of T tokens are concatenated to [1, B*T],
`document_ids` keeps them apart in the attention mask, and `ttt_steps=1` is the single pass (no
test-time-training loop). It returns argmax ids, so logits are taken with a forward hook on its
lm_head to check them against the kit's first. Its GFLOP/s use the kit's FLOP count: over the
packed row its attention scores all B*T x B*T pairs (under 2% more FLOPs at these sizes).
speculators is never a dependency of the kit (not in requirements.txt): install it beside the
venv, --no-deps, with what its eagle3 import needs on top of the venv (its pins say
transformers<=5.19; 5.23 works for this path):

    .venv/bin/pip install --no-deps --target /tmp/specpkgs speculators==0.9.0 \\
        hs-connectors==0.9.0 openai sniffio "datasets<=5.1.0" multiprocess pandas pyarrow \\
        dill xxhash

A script that prints tables, not a test: nothing here asserts a time.

    python benchmarks/bench_draft.py                      # batches 1..64, ~2 min on 2 CPU cores
    python benchmarks/bench_draft.py --quick              # batches 1 4 16, 3 rounds
    python benchmarks/bench_draft.py --batches 1 8 --speculators-path /tmp/specpkgs
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import resource
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from eagle3_nb.config import parse_config  # noqa: E402
from eagle3_nb.model import DraftCache, Eagle3Draft, LayerCache  # noqa: E402

A = 3
ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192}
# A flat (SGLang / SpecForge) Llama-3.1-8B EAGLE-3 draft config.
CONFIG = {
    "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
    "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
    "intermediate_size": 14336, "num_hidden_layers": 1, "vocab_size": 128256,
    "draft_vocab_size": 32000, "rms_norm_eps": 1e-5, "hidden_act": "silu",
    "max_position_embeddings": 131072, "rope_theta": 500000.0, "rope_scaling": ROPE,
    "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
}


# --- model ---------------------------------------------------------------------------------------

def build_kit(seed: int = 0) -> Eagle3Draft:
    torch.manual_seed(seed)
    cfg = parse_config(dict(CONFIG), "bench_draft CONFIG")
    draft = Eagle3Draft(cfg, num_aux=A).eval()   # nn.Linear / nn.Embedding default init
    for p in draft.parameters():
        p.requires_grad_(False)
    kept = torch.randperm(cfg.vocab_size)[: cfg.Vd].sort().values   # a valid pruned vocab
    draft.d2t.copy_(kept - torch.arange(cfg.Vd))
    draft.kept_ids = kept
    return draft


def flops(cfg, B: int, T: int, S: int, fc: bool) -> dict[str, int]:
    """Matmul FLOPs of one pass, 2*m*n*k each; S = keys visible to each query row."""
    H, I, nh, nkv, hd = (cfg.H, cfg.intermediate_size, cfg.num_attention_heads,
                         cfg.num_key_value_heads, cfg.head_dim)
    M = B * T
    return {"fc": 2 * M * A * cfg.Ht * H if fc else 0,
            "q/k/v": 2 * M * 2 * H * (nh + 2 * nkv) * hd,
            "attention": 2 * 2 * B * nh * T * S * hd,
            "o_proj": 2 * M * nh * hd * H,
            "mlp": 3 * 2 * M * H * I,
            "lm_head": 2 * M * H * cfg.Vd}


def weight_bytes(draft: Eagle3Draft, fc: bool) -> int:
    mats = [m.weight for m in draft.modules() if isinstance(m, torch.nn.Linear)]
    if not fc:
        mats = [w for w in mats if w is not draft.fc.weight]
    return sum(w.numel() * w.element_size() for w in mats)


# --- speculators ---------------------------------------------------------------------------------

def build_speculators(path: str, kit: Eagle3Draft, attn: str):
    """speculators' Eagle3DraftModel holding the kit's tensors; (model, None) or (None, why)."""
    sys.path.insert(0, path)
    try:
        from speculators.config import SpeculatorsConfig, VerifierConfig
        from speculators.models.eagle3 import Eagle3DraftModel, Eagle3SpeculatorConfig
        from speculators.proposals.greedy import GreedyTokenProposalConfig
        from transformers import LlamaConfig
        from importlib.metadata import version
    except Exception as exc:  # noqa: BLE001 - any import failure makes the comparison optional
        return None, f"import failed: {type(exc).__name__}: {exc}"
    layer = {k: v for k, v in CONFIG.items() if k not in ("architectures", "draft_vocab_size")}
    lc = LlamaConfig(**layer)
    lc._attn_implementation = attn
    sc = Eagle3SpeculatorConfig(
        transformer_layer_config=lc, draft_vocab_size=CONFIG["draft_vocab_size"],
        norm_before_residual=False, eagle_aux_hidden_state_layer_ids=[2, 16, 29],
        speculators_config=SpeculatorsConfig(
            algorithm="eagle3", default_proposal_method="greedy",
            proposal_methods=[GreedyTokenProposalConfig(speculative_tokens=1)],
            verifier=VerifierConfig(name_or_path=None, architectures=["LlamaForCausalLM"])))
    model = Eagle3DraftModel(sc).eval()
    state = dict(kit.state_dict())
    t2d = torch.zeros(CONFIG["vocab_size"], dtype=torch.bool)
    t2d[kit.kept_ids] = True
    state["t2d"] = t2d
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    if unexpected or set(missing) - {"verifier_lm_head.weight", "verifier_norm.weight"}:
        return None, f"state dict mismatch: missing {missing}, unexpected {unexpected}"
    # the verifier head is training-only (targets for the loss); drop its 0.5 GB of NaNs
    model.verifier_lm_head.weight = torch.nn.Parameter(torch.empty(0), requires_grad=False)
    for p in model.parameters():
        p.requires_grad_(False)
    try:
        model.bench_version = version("speculators")
    except Exception:  # noqa: BLE001
        model.bench_version = "?"
    if attn == "simple_flex_attention":
        # flex_attention outside torch.compile (CPU: speculators compiles forward on CUDA only)
        # runs its unfused reference path; that IS what this forward does here, so say it once
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
    return model, None


def spec_forward(model, ids, hidden, positions):
    """One packed pass: [B, T] rows -> one [1, B*T] row, documents keep the rows apart."""
    B, T = ids.shape
    docs = torch.arange(B, device=ids.device).repeat_interleave(T)[None]
    return model(hidden.reshape(1, B * T, -1), ids.reshape(1, B * T), docs,
                 position_ids=positions.reshape(1, B * T), ttt_steps=1)


def spec_logits(model, ids, hidden, positions) -> torch.Tensor:
    got = {}
    hook = model.lm_head.register_forward_hook(lambda m, i, o: got.__setitem__("logits", o))
    try:
        spec_forward(model, ids, hidden, positions)
    finally:
        hook.remove()
    return got["logits"].reshape(*ids.shape, -1)


# --- timing --------------------------------------------------------------------------------------

def time_row(cases: dict, device: torch.device, args, long_calls: set) -> dict[str, list[float]]:
    """Warm up each case, then run the cases interleaved, round after round. On CPU a case whose
    calls took over --budget-s in the previous row is not warmed up again: first-call costs
    (fresh buffers) are noise beside such a call, and the warm-up would double its time."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for name, fn in cases.items():
        if device.type == "cpu" and name in long_calls:
            continue
        for _ in range(args.warmup):
            fn()
            sync()
    times: dict[str, list[float]] = {k: [] for k in cases}
    spent, rounds = 0.0, 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    while rounds < max(args.repeat, 1):
        for name, fn in cases.items():
            t0 = time.perf_counter()
            fn()
            sync()
            dt = time.perf_counter() - t0
            times[name].append(dt)
            spent += dt
        rounds += 1
        if rounds >= min(3, args.repeat) and spent > args.budget_s:
            break
    long_calls.update(k for k, ts in times.items() if statistics.median(ts) > args.budget_s)
    times["cores"] = [(time.process_time() - cpu0) / (time.perf_counter() - wall0)]
    return times


def med_ms(ts: list[float]) -> float:
    return statistics.median(ts) * 1e3


def fmt(x: float, nd: int = 1) -> str:
    return f"{x:,.{nd}f}"


# --- tables --------------------------------------------------------------------------------------

def sweep(kit, spec, device, dtype, args, mode: str) -> None:
    cfg = kit.cfg
    H, Vd, Vt = cfg.H, cfg.Vd, cfg.vocab_size
    T = {"seq": args.seq, "one": 1, "decode": 1}[mode]
    with_spec = spec is not None and mode != "decode"
    show_bw = mode != "seq"
    fc = mode != "decode"
    title = {"seq": f"run(), T={T} tokens per row (fc applied)",
             "one": "run(), T=1 (fc applied, no cache)",
             "decode": f"decode step: T=1 after a cached prefix of {args.decode_prefix} "
                       "(own H-wide feature, fc skipped, as step() feeds back)"}[mode]
    print(f"\n#### {device.type} {str(dtype).replace('torch.', '')}: {title}\n")
    head = ["batch", "tokens", "GFLOP/fwd", "kit ms", "spread", "kit tok/s", "kit GFLOP/s"]
    if device.type == "cpu":
        head.insert(5, "cores busy")
    if show_bw:
        head.append("kit weight GB/s")
    if with_spec:
        head += ["spec ms", "spec tok/s", "spec GFLOP/s", "spec/kit time"]
    head += ["mm [M,H]x[H,Vd] GFLOP/s", "mm [M,2H]x[2H,H] GFLOP/s", "kit / best mm"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---:|" * len(head))
    lm_w = kit.lm_head.weight.t()                    # [H, Vd] view of the real weights
    q_w = kit.layers[0].self_attn.q_proj.weight.t()  # [2H, H]
    wbytes = weight_bytes(kit, fc)
    long_calls: set[str] = set()
    for B in sorted(args.batches):
        g = torch.Generator(device="cpu").manual_seed(B)
        ids = torch.randint(0, Vt, (B, T), generator=g).to(device)
        if mode == "decode":
            P = args.decode_prefix
            pre_ids = torch.randint(0, Vt, (B, P), generator=g).to(device)
            pre_h = torch.randn(B, P, A * cfg.Ht, generator=g).to(device, dtype)
            cache = DraftCache()
            with torch.inference_mode():
                kit.run(pre_ids, pre_h, cache=cache)
            kv = [(c.keys, c.values) for c in cache.layers]
            hidden = torch.randn(B, T, H, generator=g).to(device, dtype)
            pos = torch.full((B, T), P, device=device)
            S = P + T

            def kit_fn():
                c = DraftCache([LayerCache(k, v) for k, v in kv])
                return kit.run(ids, hidden, pos, cache=c, own_features=True)
        else:
            hidden = torch.randn(B, T, A * cfg.Ht, generator=g).to(device, dtype)
            pos = torch.arange(T, device=device).expand(B, T)
            S = T

            def kit_fn():
                return kit.run(ids, hidden, pos)
        M = B * T
        x1 = torch.randn(M, H, generator=g).to(device, dtype)
        x2 = torch.randn(M, 2 * H, generator=g).to(device, dtype)
        cases = {"kit": kit_fn}
        if with_spec:
            cases["spec"] = lambda: spec_forward(spec, ids, hidden, pos)
        cases["mm1"] = lambda: torch.matmul(x1, lm_w)
        cases["mm2"] = lambda: torch.matmul(x2, q_w)
        with torch.inference_mode():
            times = time_row(cases, device, args, long_calls)
        f = sum(flops(cfg, B, T, S, fc).values())
        kit_s = med_ms(times["kit"]) / 1e3
        row = [str(B), str(M), fmt(f / 1e9, 2), fmt(kit_s * 1e3),
               f"{max(times['kit']) / min(times['kit']):.2f}x", fmt(M / kit_s, 0),
               fmt(f / kit_s / 1e9)]
        if device.type == "cpu":
            row.insert(5, f"{times['cores'][0]:.2f}")
        if show_bw:
            row.append(fmt(wbytes / kit_s / 1e9))
        if with_spec:
            sp_s = med_ms(times["spec"]) / 1e3
            row += [fmt(sp_s * 1e3), fmt(M / sp_s, 0), fmt(f / sp_s / 1e9), f"{sp_s / kit_s:.2f}x"]
        mm1 = 2 * M * H * Vd / (med_ms(times["mm1"]) / 1e3) / 1e9
        mm2 = 2 * M * 2 * H * H / (med_ms(times["mm2"]) / 1e3) / 1e9
        row += [fmt(mm1), fmt(mm2), f"{f / kit_s / 1e9 / max(mm1, mm2):.0%}"]
        print("| " + " | ".join(row) + " |", flush=True)
        del times, cases


def check_agreement(kit, spec, device, dtype) -> str:
    g = torch.Generator(device="cpu").manual_seed(1234)
    B, T = 2, 8
    ids = torch.randint(0, kit.cfg.vocab_size, (B, T), generator=g).to(device)
    hidden = torch.randn(B, T, A * kit.cfg.Ht, generator=g).to(device, dtype)
    pos = torch.arange(T, device=device).expand(B, T)
    with torch.inference_mode():
        ref = kit.run(ids, hidden, pos).logits.float()
        got = spec_logits(spec, ids, hidden, pos).float()
    rel = ((got - ref).abs().max() / ref.abs().max()).item()
    same = (got.argmax(-1) == ref.argmax(-1)).float().mean().item()
    return (f"logits agree: max |spec - kit| / max |kit| = {rel:.2e} on B={B}, T={T} "
            f"(argmax identical at {same:.0%} of positions)")


def rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64])
    ap.add_argument("--seq", type=int, default=16, help="tokens per row of the one-pass table")
    ap.add_argument("--decode-prefix", type=int, default=16, help="cached positions before a "
                    "decode step")
    ap.add_argument("--repeat", type=int, default=5, help="timed rounds per row (at most)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--budget-s", type=float, default=3.0, help="no new round once a row has "
                    "spent this long (after 3 rounds)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="batches 1 4 16, 3 rounds")
    ap.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                    help="auto: CPU, then CUDA when available")
    ap.add_argument("--speculators-path", help="directory holding an installed speculators")
    ap.add_argument("--spec-attn", default="simple_flex_attention",
                    choices=["simple_flex_attention", "sdpa", "eager"],
                    help="speculators' attention implementation (its default: flex)")
    args = ap.parse_args()
    if args.quick:
        args.batches, args.repeat = [1, 4, 16], 3
    torch.set_num_threads(args.threads)

    devices = []
    if args.device in ("auto", "cpu"):
        devices.append((torch.device("cpu"), torch.float32))
    cuda_note = None
    if args.device in ("auto", "cuda"):
        if torch.cuda.is_available():
            devices.append((torch.device("cuda"), torch.bfloat16))
        else:
            cuda_note = "CUDA: not available (torch.cuda.is_available() is False), skipped."

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print(f"# bench_draft  {datetime.date.today().isoformat()}  python {platform.python_version()}"
          f"  torch {torch.__version__}  {cpu}, {os.cpu_count()} CPUs, "
          f"torch threads {torch.get_num_threads()}")
    exe = sys.executable
    if exe.startswith(str(REPO) + os.sep):
        exe = os.path.relpath(exe, REPO)
    print("command: " + " ".join([exe, *sys.argv]))
    if cuda_note:
        print(cuda_note)
    if not devices:
        return

    t0 = time.perf_counter()
    kit = build_kit()
    cfg = kit.cfg
    n_params = sum(p.numel() for p in kit.parameters())
    print(f"kit draft: {n_params / 1e9:.3f} B parameters ({n_params * 4 / 1e9:.2f} GB float32, "
          f"embed_tokens {cfg.vocab_size}x{cfg.H} included), built in "
          f"{time.perf_counter() - t0:.1f} s")
    per_tok = flops(cfg, 1, 1, 1, True)
    tot = sum(per_tok.values())
    print("matmul FLOPs per token (attention at S=1): "
          + ", ".join(f"{k} {v / 1e6:.0f}M ({v / tot:.0%})" for k, v in per_tok.items())
          + f"; total {tot / 1e6:.0f}M")

    spec, why = None, None
    if args.speculators_path:
        t0 = time.perf_counter()
        spec, why = build_speculators(args.speculators_path, kit, args.spec_attn)
        if spec is None:
            print(f"speculators: skipped ({why})")
        else:
            print(f"speculators {spec.bench_version}: Eagle3DraftModel, attention "
                  f"{args.spec_attn!r}, built in {time.perf_counter() - t0:.1f} s; timed call: "
                  "model(hidden.reshape(1, B*T, 3H), ids.reshape(1, B*T), document_ids, "
                  "position_ids=..., ttt_steps=1) (one packed row, returns argmax ids)")
            if args.spec_attn == "simple_flex_attention" and not torch.cuda.is_available():
                print("  (flex_attention without torch.compile: the unfused path that "
                      "materializes the [B*T, B*T] scores of the packed row)")
    else:
        print("speculators: not compared (no --speculators-path)")

    for device, dtype in devices:
        if device.type != "cpu":
            kit.to(device=device, dtype=dtype)
            if spec is not None:   # hand it the moved tensors again, then move what is left
                state = {k: v for k, v in kit.state_dict().items()}
                state["t2d"] = spec.t2d
                spec.load_state_dict(state, strict=False, assign=True)
                spec.to(device=device, dtype=dtype)
        if spec is not None:
            try:
                print(f"\n{device.type}: {check_agreement(kit, spec, device, dtype)}")
            except Exception as exc:  # noqa: BLE001 - report, then time anyway
                print(f"\n{device.type}: logit check failed: {type(exc).__name__}: {exc}")
            if device.type == "cuda":
                print("note: on CUDA speculators wraps Eagle3DraftModel.forward in torch.compile "
                      "(at import); the kit runs eagerly. Warm-up calls absorb the compiles.")
        for mode in ("seq", "one", "decode"):
            sweep(kit, spec, device, dtype, args, mode)
        if device.type == "cpu":
            print(f"\npeak RSS so far: {rss_gb():.1f} GB")
        else:
            print(f"\npeak {device.type} memory: "
                  f"{torch.cuda.max_memory_allocated(device) / 1e9:.1f} GB")


if __name__ == "__main__":
    main()
