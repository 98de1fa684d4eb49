"""Training recipes for the real tiny models in data_samples/: a BPE tokenizer and a Llama target.

Everything is seeded, runs on CPU with 2 threads and reads only text that ships with Python:

- `train_tokenizer`: byte-level BPE (the `tokenizers` package) on a fixed, sorted list of standard
  library sources (`TRAIN_FILES`), vocab 512 = `<|endoftext|>` + 256 byte symbols + 255 merges.
- `train_target`: a tiny Llama (transformers `LlamaForCausalLM`, sizes from
  `samples.target_config()`, i.e. `data_samples/target/config.json`) trained with AdamW on random
  128-token windows of the same text. The weights are stored in bf16 (`model.safetensors`); the
  reported held-out numbers are measured on the stored bf16 weights after reloading them.
- `write_prompts`: held-out prompts cut from `HELDOUT_FILES`, which neither the tokenizer nor the
  target ever saw: `eval_prompts.jsonl` (up to EVAL_PROMPT_COUNT) and `prompts.jsonl`, its first
  DEFAULT_N_SAMPLES (the kit's default input, eagle3_nb/defaults.py): enough prompts for standard
  errors that tell the bundled draft's wirings apart (samples.separation, docs/bundled-pair.md).

The same recipe on the same Python build, torch and machine gives the same files; a different
Python version ships different sources, so `training.json` records the version and each file's
hash. `python -m eagle3_nb.samples --train` runs all three; `tests/test_training.py` runs a
reduced-step smoke version.
"""

from __future__ import annotations

import hashlib
import json
import math
import platform
import re
import shutil
import sys
import sysconfig
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import torch

from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.defaults import DEFAULT_N_SAMPLES
from eagle3_nb.samples.configs import target_config
from eagle3_nb.samples.writers import write_json

SEED = 20250601
EOT = "<|endoftext|>"
VOCAB_SIZE = 512
NUM_THREADS = 2

# 40 standard-library modules: the training text. Sources differ between Python versions (and a
# few modules become packages: then their __init__.py is read), so outputs are per version.
TRAIN_FILES: tuple[str, ...] = tuple(sorted("""
    argparse ast bdb codecs configparser dataclasses datetime difflib dis doctest enum fractions
    ftplib functools gzip inspect ipaddress locale mailbox ntpath optparse os pathlib pdb pickle
    platform pprint random shutil smtplib socket ssl statistics subprocess tarfile tempfile
    threading traceback typing zipfile""".split()))
# Never in the training text (tokenizer or target): held-out evaluation and prompts.
HELDOUT_FILES: tuple[str, ...] = tuple(sorted("""
    base64 bisect calendar contextlib copy csv fnmatch glob heapq hmac numbers queue sched shlex
    string textwrap tokenize uuid warnings weakref""".split()))
assert not set(TRAIN_FILES) & set(HELDOUT_FILES)
# What `train_samples` writes under data_samples/ (the fast default build writes none of these;
# target/config.json is written by both, byte-identical).
EVAL_PROMPTS = "eval_prompts.jsonl"
EVAL_PROMPT_COUNT = 256  # asked for; the held-out files give 235 on Python 3.11 (74 KB)
TRAINED_FILES: tuple[str, ...] = ("prompts.jsonl", EVAL_PROMPTS, "target/model.safetensors",
                                  "target/tokenizer.json", "target/tokenizer_config.json",
                                  "target/training.json", "training/answers.json")

Log = Callable[[str], None]


@dataclass(frozen=True)
class TargetRecipe:
    """Hyper-parameters of `train_target`. The defaults are the data_samples recipe."""
    steps: int = 1800
    batch_size: int = 32
    seq_len: int = 128
    lr: float = 3e-3
    min_lr: float = 3e-4            # cosine decay floor
    warmup: int = 50
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = 1.0
    seed: int = SEED
    eval_windows: int = 64          # seq_len-token windows evaluated on held-out and training text
    log_every: int = 25
    threads: int = NUM_THREADS      # torch CPU threads (results can differ between thread counts)


# ---------------------------------------------------------------- text

def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def stdlib_texts(names: Iterable[str]) -> list[tuple[str, str]]:
    """(file name, text) for each named standard-library module, in the order given."""
    root = stdlib_dir()
    out = []
    for name in names:
        path = root / f"{name}.py"
        if not path.is_file() and (root / name / "__init__.py").is_file():
            path = root / name / "__init__.py"  # e.g. zipfile (3.12+), pathlib (3.13+)
        try:
            out.append((path.relative_to(root).as_posix(), path.read_text(encoding="utf-8")))
        except OSError:
            raise Eagle3NbError(f"standard-library source {name}.py is missing", str(root),
                                "the sample recipe needs a Python install with its .py sources "
                                "(not a stripped or zipped stdlib)") from None
    return out


def corpus_record(files: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    return [{"file": name, "chars": len(text),
             "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()} for name, text in files]


class cpu_threads:
    """Run a block with a fixed number of torch threads (the recipe's setting), then restore."""

    def __init__(self, threads: int = NUM_THREADS):
        self.threads = threads

    def __enter__(self):
        self.saved = torch.get_num_threads()
        torch.set_num_threads(self.threads)

    def __exit__(self, *exc):
        torch.set_num_threads(self.saved)


# ---------------------------------------------------------------- tokenizer

def train_tokenizer(out_path: str | Path | None, vocab_size: int = VOCAB_SIZE,
                    texts: Sequence[str] | None = None):
    """Train a byte-level BPE tokenizer; save it as `tokenizer.json` at out_path (unless None).

    `texts` defaults to the TRAIN_FILES sources. The only special token is `<|endoftext|>` (id 0);
    ids 1..256 are the byte alphabet, the rest merges. Returns the `tokenizers.Tokenizer`.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if texts is None:
        texts = [text for _, text in stdlib_texts(TRAIN_FILES)]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOT],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(list(texts), trainer)
    if out_path is not None:
        out_path = Path(out_path)
        out_path.parent.mkdir(parents=True, exist_ok=True)
        tok.save(str(out_path))
    return tok


def as_tokenizer(tokenizer):
    """A tokenizers.Tokenizer from an object or a tokenizer.json path (file or its directory)."""
    if isinstance(tokenizer, (str, Path)):
        from tokenizers import Tokenizer
        path = Path(tokenizer)
        path = path / "tokenizer.json" if path.is_dir() else path
        if not path.is_file():
            raise Eagle3NbError("no tokenizer.json", str(path), "run train_tokenizer first")
        return Tokenizer.from_file(str(path))
    return tokenizer


def token_stream(tokenizer, texts: Sequence[str]) -> torch.Tensor:
    """All texts tokenized and joined, each followed by `<|endoftext|>`: LongTensor [N]."""
    eot = tokenizer.token_to_id(EOT)
    ids: list[int] = []
    for enc in tokenizer.encode_batch(list(texts)):
        ids.extend(enc.ids)
        ids.append(eot)
    return torch.tensor(ids, dtype=torch.long)


def write_tokenizer_config(out_dir: Path) -> None:
    """Lets `transformers.AutoTokenizer.from_pretrained(out_dir)` read tokenizer.json."""
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": EOT,
              "model_max_length": 4096, "clean_up_tokenization_spaces": False}
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n",
                                                   encoding="utf-8")


# ---------------------------------------------------------------- target

def lr_at(step: int, r) -> float:
    """Linear warm-up, then cosine decay from lr to min_lr (a TargetRecipe or a DraftRecipe)."""
    if step < r.warmup:
        return r.lr * (step + 1) / r.warmup
    progress = (step - r.warmup) / max(1, r.steps - r.warmup)
    return r.min_lr + 0.5 * (r.lr - r.min_lr) * (1 + math.cos(math.pi * min(1.0, progress)))


@torch.no_grad()
def evaluate(model, stream: torch.Tensor, seq_len: int, n_windows: int,
             batch_size: int = 16) -> dict[str, float]:
    """Teacher-forced loss and greedy next-token accuracy on evenly spaced windows of the stream."""
    model.eval()
    n = min(n_windows, (stream.numel() - 1) // seq_len)
    if n <= 0:
        return {"loss": float("nan"), "acc": float("nan"), "tokens": 0}
    span = (stream.numel() - 1 - seq_len) // max(1, n - 1) if n > 1 else 0
    starts = [i * span for i in range(n)]
    loss_sum, correct, count = 0.0, 0, 0
    for i in range(0, n, batch_size):
        idx = torch.tensor(starts[i:i + batch_size])
        window = stream[idx[:, None] + torch.arange(seq_len + 1)]
        logits = model(input_ids=window[:, :-1]).logits.float()
        labels = window[:, 1:]
        loss_sum += torch.nn.functional.cross_entropy(
            logits.flatten(0, 1), labels.flatten(), reduction="sum").item()
        correct += int((logits.argmax(-1) == labels).sum())
        count += labels.numel()
    return {"loss": loss_sum / count, "acc": correct / count, "tokens": count}


@torch.no_grad()
def greedy_continuation(model, ids: torch.Tensor, max_new_tokens: int) -> list[int]:
    """Plain greedy decoding without a cache (the recipe's sanity check; see TargetModel)."""
    model.eval()
    seq = ids[None].clone()
    for _ in range(max_new_tokens):
        nxt = model(input_ids=seq).logits[0, -1].argmax()
        seq = torch.cat([seq, nxt.view(1, 1)], dim=1)
    return seq[0, ids.numel():].tolist()


def build_model(config: dict[str, Any], seed: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig.from_dict(dict(config))
    return LlamaForCausalLM(cfg).to(torch.float32)


def save_target(model, out_dir: Path, config: dict[str, Any], dtype: torch.dtype) -> None:
    """model.safetensors via save_pretrained (safetensors, stored in `dtype`); config.json written
    exactly as `python -m eagle3_nb.samples` writes it, so the two builds agree byte for byte."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        model.to(dtype).save_pretrained(tmp)
        model.to(torch.float32)
        # copy, not move: a fresh file gets the usual permissions, not the temp dir's private ones
        shutil.copyfile(Path(tmp) / "model.safetensors", out_dir / "model.safetensors")
    write_json(out_dir / "config.json", config, sort_keys=True)


def train_target(out_dir: str | Path, tokenizer, steps: int | None = None,
                 recipe: TargetRecipe | None = None, texts: Sequence[str] | None = None,
                 heldout_texts: Sequence[str] | None = None,
                 config: dict[str, Any] | None = None, save_dtype: torch.dtype = torch.bfloat16,
                 log: Log | None = print) -> dict[str, Any]:
    """Train the tiny Llama target on CPU and save it (config.json, model.safetensors,
    tokenizer.json, tokenizer_config.json, training.json) into out_dir.

    `texts`/`heldout_texts` default to the TRAIN_FILES/HELDOUT_FILES sources; `config` to
    `samples.target_config()`. Returns the metrics also written to training.json: the loss curve,
    final training loss (mean of the last 50 steps), held-out and training-text loss and greedy
    next-token accuracy measured on the reloaded stored weights, and the wall time.
    """
    r = recipe or TargetRecipe()
    with cpu_threads(r.threads):
        return _train_target(Path(out_dir), tokenizer, steps, recipe, texts, heldout_texts,
                             config, save_dtype, log)


def _train_target(out_dir, tokenizer, steps, recipe, texts, heldout_texts, config, save_dtype,
                  log):
    from transformers import LlamaForCausalLM


    log = log or (lambda _msg: None)
    r = recipe or TargetRecipe()
    if steps is not None:
        r = TargetRecipe(**{**asdict(r), "steps": steps})
    tok = as_tokenizer(tokenizer)
    config = dict(config or target_config())
    if tok.get_vocab_size() > config["vocab_size"]:
        raise Eagle3NbError(f"tokenizer has {tok.get_vocab_size()} ids, the target config "
                            f"{config['vocab_size']}", str(out_dir), "train a smaller tokenizer")
    train_files = None if texts is not None else stdlib_texts(TRAIN_FILES)
    held_files = None if heldout_texts is not None else stdlib_texts(HELDOUT_FILES)
    texts = texts if texts is not None else [t for _, t in train_files]
    heldout_texts = heldout_texts if heldout_texts is not None else [t for _, t in held_files]
    train_ids, held_ids = token_stream(tok, texts), token_stream(tok, heldout_texts)
    if train_ids.numel() <= r.seq_len + 1:
        raise Eagle3NbError(f"training text has {train_ids.numel()} tokens, fewer than one "
                            f"{r.seq_len + 1}-token window", str(out_dir), "give more text")

    model = build_model(config, r.seed)
    model.train()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": r.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=r.lr, betas=r.betas, foreach=False)
    gen = torch.Generator().manual_seed(r.seed)
    offsets = torch.arange(r.seq_len + 1)
    curve: list[dict[str, float]] = []
    losses: list[float] = []
    log(f"training target: {sum(p.numel() for p in model.parameters())} parameters, "
        f"{train_ids.numel()} training tokens, {held_ids.numel()} held-out tokens, "
        f"{r.steps} steps of {r.batch_size}x{r.seq_len}")
    t0 = time.perf_counter()
    for step in range(r.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, r)
        starts = torch.randint(0, train_ids.numel() - r.seq_len - 1, (r.batch_size,), generator=gen)
        window = train_ids[starts[:, None] + offsets]
        logits = model(input_ids=window[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), window[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), r.grad_clip)
        opt.step()
        losses.append(loss.item())
        if (step + 1) % r.log_every == 0 or step + 1 == r.steps:
            acc = (logits.argmax(-1) == window[:, 1:]).float().mean().item()
            curve.append({"step": step + 1, "loss": round(losses[-1], 5), "acc": round(acc, 5),
                          "lr": lr_at(step, r)})
            log(f"step {step + 1}/{r.steps} loss {losses[-1]:.4f} acc {acc:.3f} "
                f"({time.perf_counter() - t0:.0f}s)")
    seconds = time.perf_counter() - t0

    save_target(model, out_dir, config, save_dtype)
    tok.save(str(out_dir / "tokenizer.json"))
    write_tokenizer_config(out_dir)
    stored = LlamaForCausalLM.from_pretrained(out_dir, dtype=torch.float32, local_files_only=True)
    held = evaluate(stored, held_ids, r.seq_len, r.eval_windows)
    seen = evaluate(stored, train_ids, r.seq_len, r.eval_windows)
    prompt = held_ids[:64]
    continuation = greedy_continuation(stored, prompt, 32)
    metrics = {
        "recipe": asdict(r),
        "parameters": sum(p.numel() for p in stored.parameters()),
        "stored_dtype": str(save_dtype).removeprefix("torch."),
        "train_tokens": train_ids.numel(), "heldout_tokens": held_ids.numel(),
        "train_seconds": round(seconds, 1),
        "final_train_loss": round(sum(losses[-50:]) / len(losses[-50:]), 4),
        "heldout": {k: round(v, 4) if isinstance(v, float) else v for k, v in held.items()},
        "train_text": {k: round(v, 4) if isinstance(v, float) else v for k, v in seen.items()},
        "example": {"prompt": tok.decode(prompt.tolist()),
                    "greedy_continuation": tok.decode(continuation)},
        "curve": curve,
        "environment": {"python": platform.python_version(), "torch": torch.__version__,
                        "transformers": _version("transformers"),
                        "tokenizers": _version("tokenizers"), "threads": r.threads},
        "corpus": {"train": corpus_record(train_files) if train_files else "caller-supplied",
                   "heldout": corpus_record(held_files) if held_files else "caller-supplied"},
    }
    (out_dir / "training.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    log(f"target saved to {out_dir}: final train loss {metrics['final_train_loss']}, held-out "
        f"loss {held['loss']:.4f}, held-out greedy accuracy {held['acc']:.3f} ({seconds:.0f}s)")
    return metrics


def _version(module: str) -> str:
    try:
        return __import__(module).__version__
    except Exception:  # noqa: BLE001 - metadata only
        return "unknown"


# ---------------------------------------------------------------- prompts

_DEF_LINE = re.compile(r"(    )?(def|class) \w+\s*[(:]")


def prompt_candidates(text: str) -> list[int]:
    """Line numbers where a function or class starts (top level or a method)."""
    return [i for i, line in enumerate(text.splitlines()) if _DEF_LINE.match(line)]


def write_prompts(path: str | Path, tokenizer, n: int = 16, min_tokens: int = 64,
                  max_tokens: int = 128, files: Sequence[str] = HELDOUT_FILES) -> list[dict]:
    """Write n held-out prompts to a JSONL file: {"prompt", "source", "n_tokens"} per line.

    Each prompt starts at a `def`/`class` line of a held-out standard-library file and takes whole
    lines while it stays within max_tokens; prompts under min_tokens are skipped. Files are used
    round robin, spreading the picks over each file, so the set is fixed by the file list.
    """
    tok = as_tokenizer(tokenizer)
    sources = stdlib_texts(files)
    per_file = math.ceil(n / len(sources))
    picks: list[list[dict]] = []
    for name, text in sources:
        lines = text.splitlines(keepends=True)
        cands = prompt_candidates(text)
        chosen: list[dict] = []
        spread = [cands[(k * len(cands)) // per_file] for k in range(per_file)] if cands else []
        for start in dict.fromkeys(spread + cands):  # evenly spread picks first, then the rest
            if len(chosen) == per_file:
                break
            prompt, count = "", 0
            for line in lines[start:]:
                c = len(tok.encode(prompt + line).ids)
                if c > max_tokens:
                    break
                prompt, count = prompt + line, c
            if count >= min_tokens and all(p["prompt"] != prompt for p in chosen):
                chosen.append({"prompt": prompt, "source": f"{name}:{start + 1}",
                               "n_tokens": count})
        picks.append(chosen)
    prompts: list[dict] = []
    for rank in range(per_file):
        for chosen in picks:
            if rank < len(chosen) and len(prompts) < n:
                prompts.append(chosen[rank])
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(p) + "\n" for p in prompts), encoding="utf-8")
    return prompts


# ---------------------------------------------------------------- all of it

def train_samples(out_dir: str | Path, steps: int | None = None, log: Log | None = print) -> dict:
    """Tokenizer, target and prompts into out_dir (data_samples/): target/ and prompts.jsonl."""
    out_dir = Path(out_dir)
    t0 = time.perf_counter()
    tok = train_tokenizer(out_dir / "target" / "tokenizer.json")
    metrics = train_target(out_dir / "target", tok, steps=steps, log=log)
    evaluation = write_prompts(out_dir / EVAL_PROMPTS, tok, n=EVAL_PROMPT_COUNT)
    prompts = evaluation[:DEFAULT_N_SAMPLES]
    (out_dir / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in prompts),
                                           encoding="utf-8")
    if log:
        log(f"wrote {len(prompts)} + {len(evaluation)} prompts; total "
            f"{time.perf_counter() - t0:.0f}s")
    return {"target": metrics, "prompts": len(prompts), "eval_prompts": len(evaluation)}


if __name__ == "__main__":  # pragma: no cover - use python -m eagle3_nb.samples --train
    sys.exit("use: python -m eagle3_nb.samples --train")
