"""The model an engine builds from a draft's config.json, sized before it is built.

An engine's draft class allocates every parameter its config declares before it loads a byte
(the probe builds on the CPU in float32), so a 200-byte edit of config.json (`vocab_size:
12000000`) is gigabytes of embedding. The probe sizes what the config declares against a budget
first, and says so when it is over; an out-of-memory inside the engine is the machine's limit,
never a disagreement between the engine and its profile.
"""

from __future__ import annotations

import os

from eagle3_nb.errors import Eagle3NbError

BUILD_FLOOR = 1 << 30   # bytes any draft may declare, whatever its weights (a 1B target's
                        # draft builds about 0.8 GiB)
STORED_RATIO = 16       # a real draft's build is within this many times its weights' bytes: float32
                        # is twice a bf16 checkpoint, and the engine builds embed_tokens at the
                        # target's vocabulary even when the draft ships none (Llama-3.1-8B's
                        # EAGLE-3: 128256 x 4096 against 32000 draft tokens, about 4.5x in all)
FLOAT32 = 4


class ProbeBudgetError(Eagle3NbError):
    """The draft's config declares a model larger than the probe will build."""


class ProbeOutOfMemory(Eagle3NbError):
    """The machine ran out of memory while the engine built or loaded the draft."""


def declared_parts(cfg) -> dict[str, int]:
    """Parameter counts of what an EAGLE-3 draft class builds from the config's sizes (the
    parts that scale; norms and the vocabulary maps are a rounding error)."""
    H = cfg.hidden_size
    q = cfg.num_attention_heads * cfg.head_dim
    kv = cfg.num_key_value_heads * cfg.head_dim
    layer = (q + 2 * kv) * 2 * H + q * H + 3 * H * cfg.intermediate_size  # input: [embeds, h]
    return {f"embed_tokens (vocab_size {cfg.vocab_size} x hidden_size {H})": cfg.vocab_size * H,
            f"lm_head (draft vocabulary {cfg.Vd} x hidden_size {H})": cfg.Vd * H,
            f"fc ({cfg.num_aux} x target_hidden_size {cfg.Ht} x hidden_size {H})":
                cfg.num_aux * cfg.Ht * H,
            f"{cfg.num_hidden_layers} decoder layer(s) (intermediate_size "
            f"{cfg.intermediate_size})": cfg.num_hidden_layers * layer}


def available_memory() -> int | None:
    """Bytes this machine can still allocate (Linux MemAvailable), None when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def build_budget(stored: int, available: int | None) -> int:
    """What the probe lets a draft declare: BUILD_FLOOR or STORED_RATIO times its weights,
    within what the machine has left once the weights are read (twice: read, then converted)."""
    budget = max(BUILD_FLOOR, STORED_RATIO * stored)
    return budget if available is None else max(0, min(budget, available - 2 * stored))


def check_build_size(ckpt, available: int | None = None) -> int:
    """The float32 bytes of the model the config declares; ProbeBudgetError when they are over
    build_budget. AVAILABLE: the machine's free memory (default: read now)."""
    parts = declared_parts(ckpt.config)
    need = FLOAT32 * sum(parts.values())
    stored = ckpt.declared_bytes
    available = available_memory() if available is None else available
    budget = build_budget(stored, available)
    if need <= budget:
        return need
    largest = sorted(parts.items(), key=lambda kv: -kv[1])[:2]
    shown = ", ".join(f"{name}: {_gib(FLOAT32 * n)}" for name, n in largest)
    raise ProbeBudgetError(
        f"config.json declares a model of {_gib(need)} ({shown}) for {_gib(stored)} of weights; "
        f"the probe builds at most {_gib(budget)} (the larger of {_gib(BUILD_FLOOR)} and "
        f"{STORED_RATIO}x the weights{_free(available)}), so the engine is not asked to allocate it",
        str(ckpt.path / "config.json"),
        "check those sizes against the weights' shapes (eagle3-nb inspect DRAFT lists them): an "
        "engine allocates what config.json declares before it loads anything")


def _free(available: int | None) -> str:
    return "" if available is None else f", within the {_gib(available)} this machine has free"


def _gib(nbytes: int) -> str:
    return f"{nbytes / (1 << 30):.2f} GiB" if nbytes >= 1 << 26 else f"{nbytes / (1 << 20):.1f} MiB"


def is_out_of_memory(exc: BaseException | None) -> bool:
    """Whether EXC, or what it was raised from, is the machine running out of memory (Python's
    MemoryError, torch's OutOfMemoryError or its CPU allocator's RuntimeError)."""
    seen = 0
    while exc is not None and seen < 8:
        text = str(exc).lower()
        if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError" \
                or "can't allocate memory" in text or "out of memory" in text:
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def raise_if_out_of_memory(exc: BaseException, during: str) -> None:
    if is_out_of_memory(exc):
        raise ProbeOutOfMemory(f"the machine ran out of memory {during} (not a finding about "
                               "the draft, and not the engine disagreeing with its profile)",
                               "probe", "run the probe where more memory is free; its config's "
                               "sizes are checked first (probe.budget)") from None
