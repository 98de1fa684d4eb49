"""The target model and its hidden states: a local transformers model, or the dumps engines write.

Which target state is which (docs/domain.md "Aux layer ids: two conventions", "Hidden-state dumps"):

- HF `hidden_states[k]` (k = 0..L) is the residual stream after k decoder layers; k = 0 is the
  embedding output. EAGLE's default aux layers are the *inputs* of layers 2, L//2 and L-3, i.e.
  `hidden_states[2], [L//2], [L-3]`: convention `"hf"`.
- "Output of layer X" ids (SpecForge's `[1, L//2-1, L-4]`, e.g. DeepSeek-V3/Kimi-K2 `[1, 29, 57]`)
  mean `hidden_states[X+1]`: convention `"output_of_layer"`. SGLang Llama/Qwen targets always add
  the +1; vLLM reads ids as `hidden_states[k]` with no offset.
- transformers overwrites the last entry, `hidden_states[L]`, with the *final-norm* output
  (`last_hidden_state`). Engines capture residual streams, which are never normed: vLLM's
  `hidden_states[L]` (speculators' default last captured layer, the one used for the loss) is the
  last decoder layer's output *before* the final norm. `TargetOutput.pre_norm_last` holds that state
  (a forward hook on the last decoder layer); pass `final="pre_norm"` to make index L mean it.
- `final_norm` (HF `hidden_states[L]`): what SGLang hands the draft when aux capture is off
  (`use_aux_hidden_state: false`), i.e. the "single-layer hidden state" of the second seed story,
  and what SpecForge stores as `hidden_state` (its offline trainer feeds it straight to lm_head).

Dumps from large targets run by the engines themselves are read into `HiddenStateSample`:
speculators/vLLM `hs_{i}.safetensors` (`read_speculators_dump`) and SpecForge offline `.ckpt`
files (`read_specforge_dump`, `torch.load(weights_only=True)` only).

Everything runs under `torch.no_grad()`; device and dtype are parameters. Nothing here downloads:
a target is an existing local directory, and checkpoint code (`auto_map`) is never executed.
"""

from __future__ import annotations

import pickle
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from eagle3_nb.config import draft_marker
from eagle3_nb.io.checkpoint import read_json
from eagle3_nb.errors import CheckpointError, DumpFormatError, Eagle3NbError, UnsafeInputError
from eagle3_nb.io.safetensors import read_header
from eagle3_nb.io.torchfile import check_torch_file

CONVENTIONS = {"hf": 0, "output_of_layer": 1}   # id -> hidden_states[id + offset]
FINAL_STATES = ("hf", "pre_norm")               # what index L means
WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin")


# ---------------------------------------------------------------- conventions

def resolve_aux_indices(layer_ids: Sequence[int], convention: str, num_layers: int,
                        sort: bool = True) -> list[int]:
    """Layer ids under a convention -> indices into HF `hidden_states` (0..L).

    `"hf"`: index = id (the input of layer id, EAGLE's and vLLM's reading); `"output_of_layer"`:
    index = id + 1 (SpecForge's and SGLang's "+1" reading). Sorted ascending unless sort=False
    (engines concatenate in ascending order; vLLM sorts, DeepSeek's path does not).
    """
    if convention not in CONVENTIONS:
        raise Eagle3NbError(f"unknown layer-id convention {convention!r}", None,
                            f"use one of {sorted(CONVENTIONS)}")
    ids = list(layer_ids)
    if not ids or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise Eagle3NbError(f"layer ids must be a non-empty list of ints, got {layer_ids!r}", None,
                            "pass e.g. [2, L//2, L-3]")
    offset = CONVENTIONS[convention]
    top = num_layers - offset
    bad = [i for i in ids if not 0 <= i <= top]
    if bad:
        raise Eagle3NbError(f"layer ids {bad} out of range for a {num_layers}-layer target under "
                            f"convention {convention!r} (valid: 0..{top})", None,
                            "check the ids against the target's num_hidden_layers")
    indices = [i + offset for i in ids]
    return sorted(indices) if sort else indices


@dataclass
class TargetOutput:
    """One target forward pass. Tensors are [B, T, ...], or [T, ...] when the input was 1-D.

    hidden_states: L+1 entries, HF semantics (index k = residual stream after k layers; index L is
        the final-norm output). pre_norm_last: the last decoder layer's output before the final
        norm (what engines capture as layer L). logits [.., V]; next_tokens: greedy argmax [..]
        (both over the last n positions only when the pass kept n).
    """
    hidden_states: tuple[torch.Tensor, ...]
    pre_norm_last: torch.Tensor
    logits: torch.Tensor
    next_tokens: torch.Tensor
    attention_mask: torch.Tensor | None = None

    @property
    def num_layers(self) -> int:
        return len(self.hidden_states) - 1

    @property
    def final_norm(self) -> torch.Tensor:
        """HF hidden_states[L]: after the final norm. SGLang's state when aux capture is off."""
        return self.hidden_states[-1]

    def state(self, index: int, final: str = "hf") -> torch.Tensor:
        """HF hidden_states[index]; with final="pre_norm", index L is the pre-norm state."""
        if final not in FINAL_STATES:
            raise Eagle3NbError(f"unknown final={final!r}", None, f"use one of {FINAL_STATES}")
        if index == self.num_layers and final == "pre_norm":
            return self.pre_norm_last
        return self.hidden_states[index]

    def aux(self, layer_ids: Sequence[int], convention: str = "hf", final: str = "hf",
            sort: bool = True) -> torch.Tensor:
        """The captured states concatenated on the last dim (ascending layer order): [.., A*Ht]."""
        idx = resolve_aux_indices(layer_ids, convention, self.num_layers, sort)
        return torch.cat([self.state(i, final) for i in idx], dim=-1)


# ---------------------------------------------------------------- inputs

def pad_batch(sequences: Sequence[Sequence[int] | torch.Tensor], pad_id: int = 0,
              side: str = "right") -> tuple[torch.Tensor, torch.Tensor]:
    """Ragged token sequences -> (input_ids [B, T], attention_mask [B, T]) padded with pad_id."""
    if side not in ("right", "left"):
        raise Eagle3NbError(f"padding side {side!r}", None, "use 'right' or 'left'")
    seqs = [torch.as_tensor(s, dtype=torch.long).flatten() for s in sequences]
    if not seqs or any(s.numel() == 0 for s in seqs):
        raise Eagle3NbError("empty batch or empty sequence", None, "pass non-empty token lists")
    width = max(s.numel() for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, s in enumerate(seqs):
        cols = slice(0, s.numel()) if side == "right" else slice(width - s.numel(), width)
        ids[row, cols], mask[row, cols] = s, 1
    return ids, mask


def _is_ragged(input_ids) -> bool:
    return (isinstance(input_ids, (list, tuple)) and len(input_ids) > 0
            and isinstance(input_ids[0], (list, tuple, torch.Tensor)))


def as_dtype(dtype: torch.dtype | str) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    value = getattr(torch, str(dtype).removeprefix("torch."), None)
    if not isinstance(value, torch.dtype):
        raise Eagle3NbError(f"unknown dtype {dtype!r}", None, "use float32, bfloat16 or float16")
    return value


# ---------------------------------------------------------------- the model

class TargetModel:
    """A causal LM from a local directory (transformers), with aux hidden-state capture.

    `TargetModel.load(path, device, dtype)`; then `forward_hidden`, `aux_hidden_states`,
    `final_norm_state`, `pre_norm_last_state`, `greedy_generate`. Inputs: a LongTensor [T] or
    [B, T] (1-D in, unbatched out), or a list of token lists (right-padded here, batched out).
    With padding, pass attention_mask: positions are computed from it, so left and right padding
    give the same states for the real tokens as the unpadded sequence.
    """

    def __init__(self, model, path: str | Path | None = None, tokenizer=None):
        self.model = model.eval()
        self.path = Path(path) if path is not None else None
        self.tokenizer = tokenizer

    # ------------------------------------------------------------ loading

    @classmethod
    def load(cls, path: str | Path, device: str | torch.device = "cpu",
             dtype: torch.dtype | str = torch.float32,
             attn_implementation: str | None = None) -> "TargetModel":
        """Load `AutoModelForCausalLM` from an existing local directory (never the hub), refusing
        configs that need remote code (`auto_map`). tokenizer.json, when present, is loaded too."""
        root = Path(path)
        if not root.is_dir():
            raise CheckpointError("not an existing local directory", str(path),
                                  "pass the directory of a saved target model (config.json plus "
                                  "weights); the kit never downloads models")
        root = root.resolve()
        config = read_json(root, "config.json")
        for where, cfg in (("", config), ("text_config.", config.get("text_config") or {})):
            if isinstance(cfg, dict) and cfg.get("auto_map"):
                raise UnsafeInputError(f"config.json {where}auto_map asks for remote code "
                                       f"({cfg['auto_map']})", str(root / "config.json"),
                                       "the kit never executes checkpoint code; use a target "
                                       "whose architecture transformers ships")
        draft = draft_marker(config)
        if draft:
            raise CheckpointError(f"this is an EAGLE-3 draft's directory, not a target model "
                                  f"({draft})", str(root), "pass the target model's directory "
                                  "(the model the draft speculates for) as --target")
        if not any(next(root.glob(p), None) for p in WEIGHT_PATTERNS):
            raise CheckpointError("no weights next to config.json (model.safetensors, shards, "
                                  "or pytorch_model.bin)", str(root),
                                  "for data_samples/target run `python -m eagle3_nb.samples "
                                  "--train` (or `make train-samples`)")
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # a per-load progress bar is noise in CLI and reports
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # its load report repeats what the one-line error says

        kwargs: dict[str, Any] = {"dtype": as_dtype(dtype), "local_files_only": True,
                                  "trust_remote_code": False}
        if attn_implementation:
            kwargs["attn_implementation"] = attn_implementation
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = AutoModelForCausalLM.from_pretrained(str(root), **kwargs)
        except Exception as exc:  # noqa: BLE001 - any library failure becomes one actionable line
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise CheckpointError(f"transformers cannot load the target ({first})", str(root),
                                  "check config.json and the weight files") from None
        finally:
            hf_logging.set_verbosity(verbosity)
        model.to(device)
        tokenizer = None
        if (root / "tokenizer.json").is_file():
            from tokenizers import Tokenizer
            tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
        return cls(model, root, tokenizer)

    # ------------------------------------------------------------ properties

    @property
    def config(self):
        return self.model.config

    @property
    def text_config(self):
        cfg = self.model.config
        return getattr(cfg, "text_config", None) or cfg

    @property
    def num_layers(self) -> int:
        return int(self.text_config.num_hidden_layers)

    @property
    def hidden_size(self) -> int:
        return int(self.text_config.hidden_size)

    @property
    def vocab_size(self) -> int:
        return int(self.text_config.vocab_size)

    @property
    def eos_token_ids(self) -> set[int]:
        eos = getattr(self.text_config, "eos_token_id", None)
        return set() if eos is None else {int(e) for e in (eos if isinstance(eos, list) else [eos])}

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    def decoder_layers(self):
        decoder = self.model.get_decoder() if hasattr(self.model, "get_decoder") else None
        layers = getattr(decoder, "layers", None)
        if layers is None or len(layers) != self.num_layers:
            raise Eagle3NbError(f"cannot find the {self.num_layers} decoder layers of "
                                f"{type(self.model).__name__}", str(self.path),
                                "the pre-norm capture supports Llama-family models "
                                "(model.model.layers)")
        return layers

    # ------------------------------------------------------------ text

    def encode(self, text: str) -> torch.Tensor:
        if self.tokenizer is None:
            raise Eagle3NbError("this target has no tokenizer.json", str(self.path),
                                "pass token ids instead of text")
        return torch.tensor(self.tokenizer.encode(text).ids, dtype=torch.long)

    def decode(self, ids) -> str:
        if self.tokenizer is None:
            raise Eagle3NbError("this target has no tokenizer.json", str(self.path),
                                "decode with the target's own tokenizer")
        return self.tokenizer.decode(torch.as_tensor(ids).flatten().tolist())

    # ------------------------------------------------------------ forward

    def _prepare(self, input_ids, attention_mask):
        if _is_ragged(input_ids):
            if attention_mask is not None:
                raise Eagle3NbError("a ragged list of sequences gets its attention_mask here",
                                    None, "pass either a padded tensor with its mask or the list")
            ids, mask = pad_batch(input_ids)
            unbatched = False
        else:
            ids = torch.as_tensor(input_ids, dtype=torch.long)
            unbatched = ids.dim() == 1
            if unbatched:
                ids = ids[None]
            if ids.dim() != 2 or ids.shape[1] == 0:
                raise Eagle3NbError(f"input_ids must be [T] or [B, T] with T > 0, got "
                                    f"{list(ids.shape)}", None, "pass token ids")
            mask = None
            if attention_mask is not None:
                mask = torch.as_tensor(attention_mask, dtype=torch.long)
                mask = mask[None] if mask.dim() == 1 else mask
                if mask.shape != ids.shape:
                    raise Eagle3NbError(f"attention_mask {list(mask.shape)} does not match "
                                        f"input_ids {list(ids.shape)}", None, "pass the same shape")
        if int(ids.max()) >= self.vocab_size or int(ids.min()) < 0:
            raise Eagle3NbError(f"token ids outside 0..{self.vocab_size - 1}", None,
                                "tokenize with the target's tokenizer")
        dev = self.device
        return ids.to(dev), (mask.to(dev) if mask is not None else None), unbatched

    @torch.no_grad()
    def forward_hidden(self, input_ids, attention_mask=None, logits_to_keep: int = 0) -> TargetOutput:
        """One forward pass: every hidden state (HF tuple), the pre-norm last-layer state, logits
        and the greedy next token at each position; with logits_to_keep=n only at the last n
        positions (the lm_head over every position dominates a long pass of a big-vocab model)."""
        ids, mask, unbatched = self._prepare(input_ids, attention_mask)
        kwargs: dict[str, Any] = {"input_ids": ids, "use_cache": False}
        if mask is not None:
            kwargs["attention_mask"] = mask
            kwargs["position_ids"] = (mask.cumsum(-1) - 1).clamp(min=0)
        result, _ = self._capture(kwargs, logits_to_keep, mask)
        if unbatched:
            result = TargetOutput(tuple(h[0] for h in result.hidden_states), result.pre_norm_last[0],
                                  result.logits[0], result.next_tokens[0], None)
        return result

    @torch.no_grad()
    def forward_cached(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                       position_ids: torch.Tensor, past_key_values=None,
                       logits_to_keep: int = 0) -> tuple[TargetOutput, Any]:
        """Extend a batch by input_ids [B, T] on top of past_key_values (None: a prefill), as an
        engine's verify pass does. attention_mask [B, past + T] says which cache slots each row
        attends to (0 for padding and for rejected drafts, which stay in the cache as holes);
        position_ids [B, T] are the rows' own positions. Returns the states of the new positions
        and the cache to pass next time."""
        ids = input_ids.to(self.device)
        kwargs: dict[str, Any] = {"input_ids": ids, "use_cache": True,
                                  "attention_mask": attention_mask.to(self.device),
                                  "position_ids": position_ids.to(self.device)}
        if past_key_values is not None:
            kwargs["past_key_values"] = past_key_values
        out, cache = self._capture(kwargs, logits_to_keep, None)
        if cache is None or not hasattr(cache, "batch_select_indices"):
            raise Eagle3NbError(f"{type(self.model).__name__} returns no Hugging Face KV cache "
                                "that can be narrowed to a subset of rows", str(self.path),
                                "use a target whose model keeps a DynamicCache (Llama, Qwen, ...)")
        return out, cache

    def _capture(self, kwargs: dict[str, Any], logits_to_keep: int,
                 mask) -> tuple[TargetOutput, Any]:
        captured: list[torch.Tensor] = []

        def hook(_module, _args, output):
            captured.append(output[0] if isinstance(output, (tuple, list)) else output)

        handle = self.decoder_layers()[-1].register_forward_hook(hook)
        try:
            out = self._run_model({**kwargs, "output_hidden_states": True}, logits_to_keep)
        finally:
            handle.remove()
        hidden = tuple(out.hidden_states)
        if len(hidden) != self.num_layers + 1 or len(captured) != 1:
            raise Eagle3NbError(f"expected {self.num_layers + 1} hidden states and one last-layer "
                                f"output, got {len(hidden)} and {len(captured)}", str(self.path),
                                "this architecture is not supported by the capture")
        logits = out.logits
        result = TargetOutput(hidden, captured[0], logits, logits.argmax(-1), mask)
        return result, getattr(out, "past_key_values", None)

    def _run_model(self, kwargs: dict[str, Any], logits_to_keep: int):
        if not logits_to_keep:
            return self.model(**kwargs)
        try:
            return self.model(**kwargs, logits_to_keep=logits_to_keep)
        except TypeError:  # a model class without the argument: full logits, sliced
            out = self.model(**kwargs)
            out.logits = out.logits[..., -logits_to_keep:, :]
            return out

    def aux_hidden_states(self, input_ids, layer_ids: Sequence[int], convention: str = "hf",
                          attention_mask=None, final: str = "hf",
                          sort: bool = True) -> torch.Tensor:
        """Captured target states concatenated in ascending layer order: [.., A*Ht].

        convention "hf": `hidden_states[id]` (the input of layer id: EAGLE's defaults
        [2, L//2, L-3], vLLM, speculators' top-level ids, flat-config lists starting at 2);
        "output_of_layer": `hidden_states[id + 1]` (SpecForge's [1, L//2-1, L-4], SGLang's +1).
        Index L is HF's final-norm state unless final="pre_norm" (the engines' residual stream).
        """
        out = self.forward_hidden(input_ids, attention_mask)
        return out.aux(layer_ids, convention, final, sort)

    def final_norm_state(self, input_ids, attention_mask=None) -> torch.Tensor:
        """HF hidden_states[L], after the final norm: what SGLang stores when aux capture is off
        (the "single-layer" state that makes an engine skip fc), and SpecForge's `hidden_state`."""
        return self.forward_hidden(input_ids, attention_mask).final_norm

    def pre_norm_last_state(self, input_ids, attention_mask=None) -> torch.Tensor:
        """The last decoder layer's output before the final norm (vLLM's hidden_states[L],
        speculators' last captured layer)."""
        return self.forward_hidden(input_ids, attention_mask).pre_norm_last

    @torch.no_grad()
    def greedy_generate(self, input_ids, max_new_tokens: int, attention_mask=None) -> torch.Tensor:
        """Greedy continuation (argmax, no sampling, no stop token): the NEW tokens only,
        [max_new_tokens] for a 1-D input, else [B, max_new_tokens]. Padded rows are decoded one by
        one on their real tokens, so padding never changes a row's result."""
        if max_new_tokens < 0:
            raise Eagle3NbError("max_new_tokens must be >= 0", None, "pass a count")
        ids, mask, unbatched = self._prepare(input_ids, attention_mask)
        if mask is None or bool(mask.all()):
            new = self._greedy(ids, max_new_tokens)
        else:
            new = torch.cat([self._greedy(ids[r][mask[r].bool()][None], max_new_tokens)
                             for r in range(ids.shape[0])])
        return new[0] if unbatched else new

    def _greedy(self, ids: torch.Tensor, n: int) -> torch.Tensor:
        out_tokens = torch.empty((ids.shape[0], n), dtype=torch.long, device=ids.device)
        if n == 0:
            return out_tokens
        out = self.model(input_ids=ids, use_cache=True)
        for step in range(n):
            token = out.logits[:, -1].argmax(-1)
            out_tokens[:, step] = token
            if step + 1 < n:
                out = self.model(input_ids=token[:, None], past_key_values=out.past_key_values,
                                 use_cache=True)
        return out_tokens


# ---------------------------------------------------------------- dumps

@dataclass
class HiddenStateSample:
    """One sequence of target hidden states, from any dump format.

    token_ids [T]; aux_hidden_states [T, A*H] (ascending layer order, what fc consumes);
    last_hidden_state [T, H] or None, with last_hidden_kind saying which state it is ("pre_norm":
    speculators/vLLM's layer L, before the final norm; "final_norm": SpecForge's, after it);
    loss_mask [T] or None; layer_ids: the aux layer ids when known; source: the file.
    """
    token_ids: torch.Tensor
    aux_hidden_states: torch.Tensor
    last_hidden_state: torch.Tensor | None
    loss_mask: torch.Tensor | None
    layer_ids: list[int] | None
    source: str
    format: str = ""
    last_hidden_kind: str | None = None

    def __len__(self) -> int:
        return int(self.token_ids.numel())

    @property
    def hidden_size(self) -> int | None:
        return None if self.last_hidden_state is None else int(self.last_hidden_state.shape[-1])

    def num_aux(self, hidden_size: int | None = None) -> int | None:
        """A, from the aux width and H (the last hidden state's width unless given)."""
        h = hidden_size or self.hidden_size
        return None if not h else self.aux_hidden_states.shape[-1] // h


def _natural_key(path: Path) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.as_posix())]


def _dump_files(path: str | Path, pattern: str, recursive: bool, what: str) -> list[Path] | None:
    """None for a single file; a naturally sorted list (hs_2 before hs_10) for a directory."""
    p = Path(path)
    if p.is_file():
        return None
    if not p.is_dir():
        raise DumpFormatError("no such file or directory", str(p), f"pass a {what} file or a "
                              "directory of them")
    files = sorted((p.rglob if recursive else p.glob)(pattern), key=_natural_key)
    files = [f for f in files if f.is_file()]
    if not files:
        raise DumpFormatError(f"no {pattern} files", str(p), f"pass a directory of {what} files")
    return files


# One dump file is one prompt's states, read whole into memory. The largest real one is far
# below this: 8192 tokens x 4 captured layers x H 16384 in bf16 is 1 GiB.
MAX_SAMPLE_BYTES = 2 << 30


def _check_sample_size(nbytes: int, where: str) -> None:
    if nbytes > MAX_SAMPLE_BYTES:
        raise DumpFormatError(f"one sample declares {nbytes / (1 << 30):.1f} GiB (more than "
                              f"{MAX_SAMPLE_BYTES >> 30} GiB, which no single prompt's hidden "
                              "states need); each file is read whole", where,
                              "write one prompt per file, as speculators and SpecForge do")


def _drop_batch(t: torch.Tensor, rank: int, key: str, where: str) -> torch.Tensor:
    """Accept [*shape] or [1, *shape]; anything else is a shape error."""
    if t.dim() == rank + 1 and t.shape[0] == 1:
        t = t[0]
    if t.dim() != rank:
        raise DumpFormatError(f"{key} has shape {list(t.shape)}, expected {rank} dims "
                              f"(optionally with a leading batch dim of 1)", where,
                              "write one sequence per file")
    return t


def _token_ids(t: torch.Tensor, key: str, where: str) -> torch.Tensor:
    if t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool:
        raise DumpFormatError(f"{key} has dtype {t.dtype}, expected integer token ids", where,
                              "store token ids as int64")
    return t.to(torch.long)


def read_speculators_dump(path_or_dir: str | Path, layer_ids: Sequence[int] | None = None,
                          last_is_loss_layer: bool = True, dtype: torch.dtype | None = None):
    """Read speculators/vLLM `hs_{i}.safetensors` (one file -> a sample; a directory -> a sorted
    list). Keys: `hidden_states` [seq, n_captured, H] and `token_ids` [seq].

    As speculators' trainer does: the last captured layer (default [2, L//2, L-3, L], the last is
    L) is the verifier's last hidden state, pre-norm, used for the loss; the aux input is
    `hidden_states[:, :-1].flatten(1)` in ascending order. last_is_loss_layer=False: every captured
    layer is aux and there is no last hidden state. layer_ids: the captured layer ids in file
    order (all n_captured of them), recorded on the sample (the aux part).
    """
    files = _dump_files(path_or_dir, "hs_*.safetensors", False, "hs_*.safetensors")
    if files is not None:
        return [read_speculators_dump(f, layer_ids, last_is_loss_layer, dtype) for f in files]
    from safetensors import SafetensorError
    from safetensors.torch import load_file


    path = Path(path_or_dir)
    where = str(path)
    header = read_header(path)  # bounded, validated against the file size before any mapping
    missing = [k for k in ("hidden_states", "token_ids") if k not in header.tensors]
    if missing:
        raise DumpFormatError(f"missing key(s) {missing} (has {sorted(header.tensors)})", where,
                              "a speculators dump has hidden_states [seq, layers, H] and "
                              "token_ids [seq]")
    _check_sample_size(sum(t.nbytes for t in header.tensors.values()), where)
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as exc:
        raise DumpFormatError(f"cannot read the safetensors file ({exc})", where,
                              "the file is truncated or corrupt") from None
    hidden = tensors["hidden_states"]
    tokens = _token_ids(_drop_batch(tensors["token_ids"], 1, "token_ids", where), "token_ids",
                        where)
    hidden = _drop_batch(hidden, 3, "hidden_states", where)
    if hidden.shape[0] != tokens.shape[0]:
        raise DumpFormatError(f"hidden_states has {hidden.shape[0]} positions, token_ids "
                              f"{tokens.shape[0]}", where, "the two must describe one sequence")
    n = hidden.shape[1]
    if last_is_loss_layer and n < 2:
        raise DumpFormatError(f"only {n} captured layer: nothing left for aux after the loss "
                              "layer", where, "pass last_is_loss_layer=False if every captured "
                              "layer is an aux layer")
    ids = list(layer_ids) if layer_ids is not None else None
    if ids is not None and len(ids) != n:
        raise DumpFormatError(f"{len(ids)} layer ids given for {n} captured layers", where,
                              "pass every captured layer id, the loss layer included")
    if dtype is not None:
        hidden = hidden.to(dtype)
    if last_is_loss_layer:
        aux, last = hidden[:, :-1], hidden[:, -1].contiguous()
        aux_ids = ids[:-1] if ids is not None else None
    else:
        aux, last, aux_ids = hidden, None, ids
    return HiddenStateSample(tokens, aux.flatten(1).contiguous(), last, None, aux_ids, where,
                             "speculators", "pre_norm" if last is not None else None)


SPECFORGE_REQUIRED = ("input_ids", "aux_hidden_state")
SPECFORGE_OPTIONAL = ("loss_mask", "hidden_state")


def read_specforge_dump(path_or_dir: str | Path, layer_ids: Sequence[int] | None = None,
                        dtype: torch.dtype | None = None):
    """Read SpecForge offline `.ckpt` files (`prepare_hidden_states.py`: a torch.save'd dict with
    `input_ids`, `loss_mask`, `hidden_state` (the target's final-norm state, fed to lm_head),
    `aux_hidden_state` (the aux concat [T, A*H])); shapes may carry a leading batch dim of 1.
    One file -> a sample; a directory -> all *.ckpt under it (SpecForge writes rows_*/data_*.ckpt),
    naturally sorted. Loaded only with torch.load(weights_only=True): anything needing more is
    refused. input_ids and aux_hidden_state are required; loss_mask and hidden_state may be absent.
    """
    files = _dump_files(path_or_dir, "*.ckpt", True, ".ckpt")
    if files is not None:
        return [read_specforge_dump(f, layer_ids, dtype) for f in files]
    path = Path(path_or_dir)
    where = str(path)
    obj = _torch_load_bounded(path, ".ckpt")
    if not isinstance(obj, dict):
        raise DumpFormatError(f"the .ckpt holds a {type(obj).__name__}, not a dict", where,
                              "a SpecForge dump is a dict with input_ids, loss_mask, hidden_state "
                              "and aux_hidden_state")
    missing = [k for k in SPECFORGE_REQUIRED if k not in obj]
    if missing:
        raise DumpFormatError(f"missing key(s) {missing} (has {sorted(map(str, obj))})", where,
                              "a SpecForge dump has input_ids, loss_mask, hidden_state and "
                              "aux_hidden_state")
    for key in SPECFORGE_REQUIRED + SPECFORGE_OPTIONAL:
        if key in obj and obj[key] is not None and not isinstance(obj[key], torch.Tensor):
            raise DumpFormatError(f"{key} is a {type(obj[key]).__name__}, not a tensor", where,
                                  "store every entry as a tensor")
    tokens = _token_ids(_drop_batch(obj["input_ids"], 1, "input_ids", where), "input_ids", where)
    aux = _drop_batch(obj["aux_hidden_state"], 2, "aux_hidden_state", where)
    T = tokens.shape[0]
    last = obj.get("hidden_state")
    mask = obj.get("loss_mask")
    if last is not None:
        last = _drop_batch(last, 2, "hidden_state", where)
    if mask is not None:
        mask = _drop_batch(mask, 1, "loss_mask", where)
    for key, t in (("aux_hidden_state", aux), ("hidden_state", last), ("loss_mask", mask)):
        if t is not None and t.shape[0] != T:
            raise DumpFormatError(f"{key} has {t.shape[0]} positions, input_ids {T}", where,
                                  "every entry must describe the same sequence")
    if last is not None and aux.shape[-1] % last.shape[-1]:
        raise DumpFormatError(f"aux_hidden_state width {aux.shape[-1]} is not a multiple of "
                              f"hidden_state width {last.shape[-1]}", where,
                              "aux_hidden_state must concatenate whole target layers")
    ids = list(layer_ids) if layer_ids is not None else None
    if ids is not None and last is not None and len(ids) * last.shape[-1] != aux.shape[-1]:
        raise DumpFormatError(f"{len(ids)} layer ids given but aux_hidden_state holds "
                              f"{aux.shape[-1] // last.shape[-1]} layers", where,
                              "pass the aux layer ids the dump was made with")
    if dtype is not None:
        aux = aux.to(dtype)
        last = last.to(dtype) if last is not None else None
    if last is not None:
        last = last.contiguous()
    return HiddenStateSample(tokens, aux.contiguous(), last, mask, ids, where, "specforge",
                             "final_norm" if last is not None else None)


SAVESTATE_KEYS = ("input_ids", "hidden_state")


def read_savestate_dump(path_or_dir: str | Path, layer_ids: Sequence[int] | None = None,
                        dtype: torch.dtype | None = None) -> list:
    """Read TensorRT-LLM SaveState dumps (speculative_config decoding_type: SaveState; its
    SaveHiddenStatesDrafter._write_to_file, tensorrt_llm/_torch/speculative/save_hidden_state.py,
    read in the stored NVIDIA/TensorRT-LLM main): `<file_prefix>_<iter>.pt`, a torch.save'd list
    of one dict per request with `id`, `input_ids` [T], `hidden_state` [T, H] (the last captured
    state, the final post-norm one: SaveState always captures -1) and, with more than one
    capture layer, `hidden_state_features` [T, A*H] (the aux layers, ascending). A file or a
    directory of *.pt -> the list of samples, in file then record order. Loaded only with
    torch.load(weights_only=True), after the file's size is bounded."""
    files = _dump_files(path_or_dir, "*.pt", False, ".pt")
    if files is not None:
        return [s for f in files for s in read_savestate_dump(f, layer_ids, dtype)]
    path = Path(path_or_dir)
    where = str(path)
    records = _load_torch_records(path, where)
    return [_savestate_sample(r, i, layer_ids, dtype, where) for i, r in enumerate(records)]


def _torch_load_bounded(path: Path, kind: str) -> Any:
    """A dump written by torch.save: a regular file, its archive bounded (io.torchfile) and its
    size within a sample's (stored members: the file bounds the data), then
    torch.load(weights_only=True), the only way the kit opens a pickle."""
    where = str(path)
    if not path.is_file():  # a FIFO or device would block torch.load
        raise DumpFormatError("is not a regular file", where, "point at the dump file itself")
    check_torch_file(path)
    _check_sample_size(path.stat().st_size, where)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        first = (str(exc).strip().splitlines() or ["unpickling refused"])[0]
        raise UnsafeInputError(f"the {kind} needs more than plain tensors to load ({first})",
                               where, "the kit loads pickles only with weights_only=True; re-save "
                               "the tensors from a trusted environment") from None
    except (RuntimeError, EOFError, OSError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise DumpFormatError(f"cannot read the {kind} ({first})", where,
                              "the file is truncated or not a torch.save file") from None


def _load_torch_records(path: Path, where: str) -> list:
    obj = _torch_load_bounded(path, ".pt")
    if not isinstance(obj, list) or not obj or not all(isinstance(r, dict) for r in obj):
        raise DumpFormatError(f"the .pt holds a {type(obj).__name__}, not a list of records",
                              where, "a SaveState dump is a list of dicts with input_ids and "
                              "hidden_state")
    return obj


def _savestate_sample(record: dict, i: int, layer_ids, dtype, where: str) -> HiddenStateSample:
    at = f"{where} [record {i}]"
    missing = [k for k in SAVESTATE_KEYS if not isinstance(record.get(k), torch.Tensor)]
    if missing:
        raise DumpFormatError(f"missing or non-tensor key(s) {missing} (has "
                              f"{sorted(map(str, record))})", at, "a SaveState record has "
                              "input_ids, hidden_state and hidden_state_features tensors")
    tokens = _token_ids(_drop_batch(record["input_ids"], 1, "input_ids", at), "input_ids", at)
    last = _drop_batch(record["hidden_state"], 2, "hidden_state", at)
    feats = record.get("hidden_state_features")
    if not isinstance(feats, torch.Tensor):
        raise DumpFormatError("no hidden_state_features: the dump captured one layer, so it "
                              "holds no aux states for fc", at, "dump with eagle3_layers_to_"
                              "capture naming the aux layers (SaveState adds -1 itself)")
    aux = _drop_batch(feats, 2, "hidden_state_features", at)
    T = tokens.shape[0]
    for key, t in (("hidden_state", last), ("hidden_state_features", aux)):
        if t.shape[0] != T:
            raise DumpFormatError(f"{key} has {t.shape[0]} positions, input_ids {T}", at,
                                  "every entry must describe the same sequence")
    if aux.shape[-1] % last.shape[-1]:
        raise DumpFormatError(f"hidden_state_features width {aux.shape[-1]} is not a multiple "
                              f"of hidden_state width {last.shape[-1]}", at,
                              "the features must concatenate whole target layers")
    if dtype is not None:
        aux, last = aux.to(dtype), last.to(dtype)
    ids = list(layer_ids) if layer_ids is not None else None
    return HiddenStateSample(tokens, aux.contiguous(), last.contiguous(), None, ids, at,
                             "savestate", "final_norm")


def check_dump_headers(path: str | Path) -> int:
    """Validate every dump file under `path` without reading its states: speculators files by
    their safetensors header (keys, size), SpecForge files by their zip directory and size.
    Returns the number of files; the same errors read_dump would raise for them."""
    p = Path(path)
    if p.is_dir() and next(p.glob("hs_*.safetensors"), None):
        files = _dump_files(p, "hs_*.safetensors", False, "hs_*.safetensors")
    elif p.is_dir() and next(p.glob("*.pt"), None):
        files = _dump_files(p, "*.pt", False, ".pt")
    elif p.is_dir():
        files = _dump_files(p, "*.ckpt", True, ".ckpt")
    else:
        files = [p] if p.is_file() else _dump_files(p, "*", False, "dump")
    for f in files:
        where = str(f)
        if f.suffix == ".safetensors":
            header = read_header(f)
            missing = [k for k in ("hidden_states", "token_ids") if k not in header.tensors]
            if missing:
                raise DumpFormatError(f"missing key(s) {missing}", where, "a speculators dump "
                                      "has hidden_states [seq, layers, H] and token_ids [seq]")
            _check_sample_size(sum(t.nbytes for t in header.tensors.values()), where)
        elif f.suffix in (".ckpt", ".pt"):
            check_torch_file(f)
            _check_sample_size(f.stat().st_size, where)
        else:
            raise DumpFormatError(f"unknown dump file type {f.suffix!r}", where,
                                  "pass an hs_*.safetensors or a .ckpt file")
    return len(files)


def read_dump(path: str | Path, **kwargs):
    """Dispatch on what is there: hs_*.safetensors -> speculators, *.ckpt -> SpecForge, *.pt ->
    SaveState (a list of samples per file)."""
    p = Path(path)
    if p.is_file():
        if p.suffix == ".safetensors":
            return read_speculators_dump(p, **kwargs)
        if p.suffix == ".ckpt":
            return read_specforge_dump(p, **kwargs)
        if p.suffix == ".pt":
            return read_savestate_dump(p, **kwargs)
        raise DumpFormatError(f"unknown dump file type {p.suffix!r}", str(p),
                              "pass an hs_*.safetensors, a .ckpt or a SaveState .pt file")
    if p.is_dir():
        if next(p.glob("hs_*.safetensors"), None):
            return read_speculators_dump(p, **kwargs)
        if next(p.rglob("*.ckpt"), None):
            return read_specforge_dump(p, **kwargs)
        if next(p.glob("*.pt"), None):
            return read_savestate_dump(p, **kwargs)
        raise DumpFormatError("neither hs_*.safetensors, *.ckpt nor *.pt files here", str(p),
                              "pass a speculators, SpecForge or SaveState hidden-state dump "
                              "directory")
    raise DumpFormatError("no such file or directory", str(p), "pass a dump file or directory")
