"""The target model and its hidden states: a local transformers model, or the dumps engines write.

Which target state is which (docs/domain.md "Aux layer ids: two conventions", "Hidden-state dumps"):

- HF `hidden_states[k]` (k = 0..L) is the residual stream after k decoder layers; k = 0 is the
  embedding output. EAGLE's default aux layers are the *inputs* of layers 2, L//2 and L-3, i.e.
  `hidden_states[2], [L//2], [L-3]`.
- "Output of layer X" ids (SpecForge's `[1, L//2-1, L-4]`, e.g. DeepSeek-V3/Kimi-K2 `[1, 29, 57]`)
  mean `hidden_states[X+1]`. SGLang Llama/Qwen targets always add the +1; vLLM reads ids as
  `hidden_states[k]` with no offset. Everything here takes `hidden_states` indices: which index a
  config's ids mean is read where the engines are (engines.planner, wirings).
- transformers overwrites the last entry, `hidden_states[L]`, with the *final-norm* output
  (`last_hidden_state`). Engines capture residual streams, which are never normed: vLLM's
  `hidden_states[L]` (speculators' default last captured layer, the one used for the loss) is the
  last decoder layer's output *before* the final norm. `TargetOutput.pre_norm_last` holds that state
  (a forward hook on the last decoder layer); pass `final="pre_norm"` to make index L mean it.
- `final_norm` (HF `hidden_states[L]`): what SGLang hands the draft when aux capture is off
  (`use_aux_hidden_state: false`), i.e. the "single-layer hidden state" of the second seed story,
  and what SpecForge stores as `hidden_state` (its offline trainer feeds it straight to lm_head).

Dumps from large targets run by the engines themselves are read into `HiddenStateSample` by
eagle3_nb.hidden_dumps (`read_dump`; re-exported here).

Everything runs under `torch.no_grad()`; device and dtype are parameters. Nothing here downloads:
a target is an existing local directory, and checkpoint code (`auto_map`) is never executed.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from eagle3_nb.config import draft_marker
from eagle3_nb.errors import CheckpointError, Eagle3NbError, UnsafeInputError
from eagle3_nb.hidden_dumps import (HiddenStateSample, check_dump_headers, read_dump,
                                    read_savestate_dump, read_specforge_dump,
                                    read_speculators_dump)
from eagle3_nb.io.checkpoint import read_json

__all__ = ["FINAL_STATES", "HiddenStateSample", "TargetModel", "TargetOutput", "as_dtype",
           "check_dump_headers", "pad_batch", "read_dump", "read_savestate_dump",
           "read_specforge_dump", "read_speculators_dump"]

FINAL_STATES = ("hf", "pre_norm")               # what index L means
WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin")


# ---------------------------------------------------------------- one forward pass

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

    def aux(self, indices: Sequence[int], final: str = "hf") -> torch.Tensor:
        """hidden_states[i] for each index, in the order given, concatenated on the last dim:
        [.., A*Ht]. With final="pre_norm", index L is the pre-norm state."""
        ids = list(indices)
        if not ids or not all(isinstance(i, int) and not isinstance(i, bool)
                              and 0 <= i <= self.num_layers for i in ids):
            raise Eagle3NbError(f"hidden-state indices {indices!r} are not a non-empty list of "
                                f"ints in 0..{self.num_layers}", None,
                                "pass hidden_states indices, e.g. [2, L//2, L-3]")
        return torch.cat([self.state(i, final) for i in ids], dim=-1)


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

    `TargetModel.load(path, device, dtype)`; then `forward_hidden` (a `TargetOutput`: every
    state, `aux`, `final_norm`, `pre_norm_last`), `forward_cached`, `greedy_generate`. Inputs: a
    LongTensor [T] or
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
