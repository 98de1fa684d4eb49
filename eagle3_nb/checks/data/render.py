"""Chat templates as the target serves them, and the trainers' tokenisation, re-done here.

The target's chat template (tokenizer_config.json `chat_template`, or a .jinja file) renders in
a jinja2 sandbox, as transformers' `apply_chat_template` does (no template code runs outside it).

Trainer emulation, from the trainers' code (docs/training-data.md):
- SpecForge 0.2.0 `specforge/data/parse.py` `GeneralParser.parse` / `ThinkingParser.parse`:
  leading non-user turns dropped, the conversation truncated at a role-order break, messages
  reduced to `standard_keys` (GeneralParser drops `reasoning_content`), rendered with
  add_generation_prompt=False (ThinkingParser adds enable_thinking=True), tokenised truncated to
  max_length, supervised spans = the regex `assistant_header(.*?(end_of_turn|$))`, then each
  `ignore_token` occurrence zeroed. Span edges are mapped with token offsets here instead of
  SpecForge's prefix re-encoding (the two differ only when a token straddles a span edge).
- speculators `data_generation/preprocessing.py` `_render_boundary_rows`: one row per assistant
  turn; supervised = the tokens past the render of the history with add_generation_prompt=True.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from eagle3_nb.errors import Eagle3NbError

THINK_MARKERS = ("<think>", "</think>")  # SpecForge scripts/conversation_validation.py
SERVING = object()   # render in the serving mode (ChatTemplate.thinking)


@dataclass(frozen=True)
class TrainerTemplate:
    """A SpecForge `ChatTemplate` registration (specforge/data/template.py)."""
    assistant_header: str
    user_header: str
    end_of_turn: str
    system_prompt: str = ""
    parser_type: str = "general"
    enable_thinking: bool = False
    ignore_token: tuple[str, ...] = ()


_QWEN = dict(assistant_header="<|im_start|>assistant\n", user_header="<|im_start|>user\n",
             end_of_turn="<|im_end|>\n", system_prompt="You are a helpful assistant.")
# The registrations for the template families the kit's samples use, copied from SpecForge
# 0.2.0 specforge/data/template.py (TEMPLATE_REGISTRY.register(name=...)).
TRAINER_TEMPLATES: dict[str, TrainerTemplate] = {
    "qwen": TrainerTemplate(**_QWEN),
    "qwen3-thinking": TrainerTemplate(**_QWEN, parser_type="thinking", enable_thinking=True),
    "qwen3-instruct": TrainerTemplate(**_QWEN, ignore_token=("<think>\n\n</think>\n\n",)),
    "qwen3-next-thinking": TrainerTemplate(**{**_QWEN, "assistant_header":
                                              "<|im_start|>assistant\n<think>\n"},
                                           parser_type="thinking", enable_thinking=True),
    "llama3": TrainerTemplate("<|start_header_id|>assistant<|end_header_id|>\n\n",
                              "<|start_header_id|>user<|end_header_id|>", "<|eot_id|>"),
    "llama4": TrainerTemplate("<|header_start|>assistant<|header_end|>\n\n",
                              "<|header_start|>user<|header_end|>", "<|eot|>"),
}


def trainer_template(name: str) -> TrainerTemplate:
    if name not in TRAINER_TEMPLATES:
        raise Eagle3NbError(f"unknown trainer template {name!r}", "--template",
                            f"one of {', '.join(sorted(TRAINER_TEMPLATES))}, or pass the "
                            "served template with --chat-template and token rows")
    return TRAINER_TEMPLATES[name]


def has_think_marker(text: str) -> bool:
    lowered = text.lower()
    return any(m in lowered for m in THINK_MARKERS)


@lru_cache(maxsize=8)
def _compiled(source: str):
    from jinja2.exceptions import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise TemplateError(message)

    env = _sandbox(ImmutableSandboxedEnvironment)(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    try:
        return env.from_string(source)
    except TemplateError as exc:
        raise Eagle3NbError(f"the chat template does not parse ({str(exc)[:120]})",
                            "chat template", "pass the target's own chat template") from None


def _sandbox(base):
    """The sandbox, answering `message.role` on a plain dict without raising first: what
    base.getattr returns once getattr(dict, name) fails (a key or undefined), at a fraction of
    the cost per attribute in every row."""
    dict_attrs = frozenset(dir(dict))

    class Sandbox(base):
        def getattr(self, obj, attribute):
            if type(obj) is dict and type(attribute) is str and attribute not in dict_attrs:
                return obj[attribute] if attribute in obj else \
                    self.undefined(obj=obj, name=attribute)
            return super().getattr(obj, attribute)
    return Sandbox


class ChatTemplate:
    """The target's chat template, rendered in the serving mode (enable_thinking or unset)."""

    def __init__(self, source: str, thinking: bool | None = None, special: dict | None = None):
        self.source = source
        self.thinking = thinking
        self.special = special or {}
        self.template = _compiled(source)
        self.has_thinking_switch = "enable_thinking" in source

    def render(self, messages: list[dict[str, Any]], generation_prompt: bool = False,
               thinking: Any = SERVING) -> str:
        """thinking: True/False sets enable_thinking, None leaves it unset (the template's
        default), SERVING uses the serving mode."""
        kwargs = dict(self.special)
        mode = self.thinking if thinking is SERVING else thinking
        if mode is not None:
            kwargs["enable_thinking"] = mode
        try:
            return self.template.render(messages=messages, add_generation_prompt=generation_prompt,
                                        **kwargs)
        except Exception as exc:  # noqa: BLE001 - a template raises what it likes
            raise Eagle3NbError(f"the chat template failed on a conversation "
                                f"({type(exc).__name__}: {str(exc)[:120]})", "chat template",
                                "check the conversation's roles, or pass the right template") \
                from None

    def markers(self) -> dict[str, str]:
        """The assistant header, the serving generation prompt and end-of-turn, found by
        rendering probe messages (no template-specific knowledge)."""
        user = [{"role": "user", "content": "\x01U"}]
        base = self.render(user)
        full = self.render(user + [{"role": "assistant", "content": "\x01A"}])
        after_user = full[full.index("\x01U") + 2:]
        header = after_user[:after_user.index("\x01A")]
        header = header[len(_common_prefix(header, base[base.index("\x01U") + 2:])):]
        prompts = {}
        for mode in (SERVING, True, False):
            gen = self.render(user, generation_prompt=True, thinking=mode)
            prompts[mode] = gen[len(base):] if gen.startswith(base) else ""
        return {"assistant_header": header.split("<think>")[0] or header,
                "generation_prompt": prompts[SERVING],
                # a span may start after either mode's prompt; check 1 judges the mode
                "generation_prompts": sorted(set(prompts.values()) - {""}),
                "end_of_turn": full[full.index("\x01A") + 2:]}


def _common_prefix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def served_completions(template: ChatTemplate, conversation: list[dict]) -> list[str | None]:
    """Per assistant turn, the text the target generates when served in the serving mode: the
    full render past the history's generation-prompt render (None where the two diverge)."""
    out: list[str | None] = []
    for j, turn in enumerate(conversation):
        if turn.get("role") != "assistant" or j == 0:
            continue
        prompt = template.render(conversation[:j], generation_prompt=True)
        full = template.render(conversation[:j + 1])
        out.append(full[len(prompt):] if full.startswith(prompt) else None)
    return out


# ----------------------------------------------------------------------------- SpecForge parser

STANDARD_KEYS = {"general": ("role", "content", "tool_calls"),
                 "thinking": ("role", "content", "tool_calls", "reasoning_content", "name",
                              "tool_call_id")}


@dataclass
class ParsedTurns:
    """What GeneralParser.parse keeps of a conversation, and what it drops."""
    messages: list[dict[str, Any]]
    dropped_leading: int
    truncated_at: int | None   # index (after leading drops) where a role-order break cut it


def specforge_messages(conversation: list[dict], trainer: TrainerTemplate) -> ParsedTurns:
    """GeneralParser.parse's message list: system handling, leading drops, role-order cut."""
    conv = list(conversation)
    messages: list[dict[str, Any]] = []
    if conv and conv[0].get("role") == "system":
        messages.append({"role": "system", "content": conv[0].get("content", "")})
        conv = conv[1:]
    elif trainer.system_prompt:
        messages.append({"role": "system", "content": trainer.system_prompt})
    dropped = 0
    while conv and conv[0].get("role") != "user":
        conv, dropped = conv[1:], dropped + 1
    keys = STANDARD_KEYS.get(trainer.parser_type, STANDARD_KEYS["general"])
    cut = None
    for j, msg in enumerate(conv):
        role, prev = msg.get("role"), conv[j - 1].get("role") if j else None
        if j and (role == "tool" and prev not in ("assistant", "tool")
                  or role == "assistant" and prev not in ("user", "tool")):
            cut = j
            break
        messages.append({k: v for k, v in msg.items() if k in keys})
    return ParsedTurns(messages, dropped, cut)


def specforge_render(conversation: list[dict], trainer: TrainerTemplate,
                     template: ChatTemplate) -> tuple[str, ParsedTurns]:
    """The text SpecForge's parser tokenises from one conversation, and what it kept."""
    parsed = specforge_messages(conversation, trainer)
    return template.render(parsed.messages, thinking=True if trainer.enable_thinking
                           else None), parsed


def specforge_mask(text: str, enc, trainer: TrainerTemplate, max_length: int,
                   last_turn_only: bool = False) -> tuple[list[int], list[int], int]:
    """(input_ids, loss_mask, supervised tokens cut by max_length) from the rendered text and
    its encoding (tokenizers.Encoding: ids, offsets)."""
    ids = enc.ids
    mask = [0] * len(ids)

    def first_token(char: int) -> int:
        return _first_token_from(enc, char, len(text), len(ids))

    span_pattern, ignore_patterns = _mask_patterns(trainer)
    spans = [m.span(1) for m in span_pattern.finditer(text)]
    if last_turn_only and spans:
        spans = spans[-1:]
    for start, end in spans:
        _set(mask, first_token(start), first_token(end), 1)
    for pattern in ignore_patterns:
        for m in pattern.finditer(text):
            _set(mask, first_token(m.start()), first_token(m.end()), 0)
    if len(ids) <= max_length:
        return ids, mask, 0
    return ids[:max_length], mask[:max_length], sum(mask[max_length:])


@lru_cache(maxsize=16)
def _mask_patterns(trainer: TrainerTemplate) -> tuple[re.Pattern, list[re.Pattern]]:
    """SpecForge's span regex and its ignore_token patterns, compiled once per template."""
    span = re.compile(re.escape(trainer.assistant_header) + r"([\s\S]*?(?:" +
                      re.escape(trainer.end_of_turn) + "|$))", re.DOTALL)
    return span, [re.compile(re.escape(token)) for token in trainer.ignore_token]


def specforge_tokens(conversation: list[dict], trainer: TrainerTemplate, template: ChatTemplate,
                     tokenizer, max_length: int, last_turn_only: bool = False
                     ) -> tuple[list[int], list[int], int, ParsedTurns, str]:
    """(input_ids, loss_mask, supervised tokens cut by max_length, parsed turns, rendered text)
    as SpecForge's parser builds them from one conversation."""
    text, parsed = specforge_render(conversation, trainer, template)
    enc = tokenizer.encode(text, add_special_tokens=False)
    return (*specforge_mask(text, enc, trainer, max_length, last_turn_only), parsed, text)


def _first_token_from(enc, char: int, n_chars: int, n_tokens: int) -> int:
    """The index of the first token that starts at or after CHAR (what SpecForge's re-encoding
    of the prefix counts), asked of the encoding for one or two tokens, not all offsets."""
    at = char
    while at < n_chars:
        token = enc.char_to_token(at)
        if token is not None:
            return token if enc.token_to_chars(token)[0] >= char else token + 1
        at += 1
    return n_tokens


def _set(mask: list[int], lo: int, hi: int, value: int) -> None:
    mask[lo:hi] = [value] * max(hi - lo, 0)


def boundary_rows(conversation: list[dict], template: ChatTemplate, tokenizer, max_length: int
                  ) -> list[tuple[list[int], list[int]]]:
    """speculators' per-turn rows (render boundary masks), clipped to max_length."""
    rows = []
    for j, turn in enumerate(conversation):
        if turn.get("role") != "assistant" or j == 0:
            continue
        prompt = tokenizer.encode(template.render(conversation[:j], generation_prompt=True),
                                  add_special_tokens=False).ids
        full = tokenizer.encode(template.render(conversation[:j + 1]),
                                add_special_tokens=False).ids
        if len(prompt) >= max_length:
            continue
        # a token merging across the boundary: speculators falls back to the common prefix
        boundary = len(prompt) if full[:len(prompt)] == prompt else \
            len(_common_prefix(prompt, full))
        mask = [0] * boundary + [1] * (len(full) - boundary)
        rows.append((full[:max_length], mask[:max_length]))
    return rows
