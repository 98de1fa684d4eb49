"""A plan's weights step: each checkpoint key's fate as the engine's loader meets it (loaded,
renamed, dropped, skipped, or a load error), and the parameters no key fills."""

from __future__ import annotations

import re

from eagle3_nb.engines.draft_params import switch_on
from eagle3_nb.engines.load_plan import (DROPPED, ERRORED, LOADED, RENAMED, SKIPPED, KeyFate,
                                         ParamSpec)
from eagle3_nb.engines.plan_state import PlanState
from eagle3_nb.findings import ERROR, INFO, WARNING

_LAYER_PARAM = re.compile(r"\.layers\.(\d+)\.")


class WeightFates(PlanState):
    def key_fate(self, key: str) -> KeyFate:
        name, renamed = self._regex_renamed(key)
        for old, new in self.p.renames:
            if old in name:
                name, renamed = name.replace(old, new), True
        if "t2d" in name:
            return KeyFate(key, SKIPPED, None, "t2d is never read")
        unused = self._unused(name)
        if unused:
            return KeyFate(key, SKIPPED, None, unused)
        dropped = self._dropped_when_off(name)
        if dropped:
            return KeyFate(key, DROPPED, None, dropped)
        if self.p.key_resolution == "bare_or_model":
            return self._resolve_bare_or_model(key, name, renamed)
        return self._resolve_model_prefix(key, name, renamed)

    def _resolve_bare_or_model(self, key, name, renamed) -> KeyFate:
        if "d2t" in name:
            return self._load(key, self.p.d2t_param, None, renamed, "d2t + arange")
        for param_part, weight_part, shard in self.p.stacked:
            if weight_part not in name:
                continue
            name = name.replace(weight_part, param_part)
            param = f"model.{name}" if name not in self.params else name
            return self._load(key, param, shard, renamed)
        param = name if name in self.params else f"model.{name}"
        return self._load(key, param, None, renamed)

    def _resolve_model_prefix(self, key, name, renamed) -> KeyFate:
        if "d2t" in name:
            name = name.replace("d2t", self.p.d2t_param)
        elif "lm_head" not in name:
            name = "model." + name
        shard = None
        for param_part, weight_part, sh in self.p.stacked:
            if weight_part in name:
                name, shard = name.replace(weight_part, param_part), sh
                break
        return self._load(key, name, shard, renamed)

    def _regex_renamed(self, key: str) -> tuple[str, bool]:
        """The profile's anchored renames for this draft's depth (one decoder layer or more)."""
        depth = "single" if self.cfg.num_hidden_layers == 1 else "multi"
        name = key
        for when, pattern, new in self.p.regex_renames:
            if when in (depth, "any"):
                name = re.sub(pattern, new, name)
        return name, name != key

    def _unused(self, name: str) -> str:
        """Keys of a module the engine does not build while its switch is off (it uses the
        target's): never read, so neither loaded nor a loss."""
        for module, switch in self.p.unused_unless:
            if f".{module}." in f".{name}" and not switch_on(switch, self.cfg):
                return (f"{module}.* is never read: the engine builds none while {switch} is "
                        f"false and uses the target's")
        return ""

    def _dropped_when_off(self, name: str) -> str:
        """The profile's keys removed while a switch is off (vLLM's weight mapper)."""
        switches = {**self.flags, "use_aux_hidden_state": bool(self.cfg.use_aux_hidden_state.value)}
        for module, switch in self.p.drop_when_off:
            if f".{module}." in f".{name}" and not switches[switch]:
                return f"{module}.* removed when {switch} is false"
        return ""

    def _load(self, key, param, shard, renamed, how="") -> KeyFate:
        spec = self.params.get(param)
        if spec is None or shard not in spec.shards:
            return self._unknown(key, param)
        want, got = spec.shards[shard], tuple(self.shapes[key])
        if spec.kind != "vocab_map" and want != got:
            return KeyFate(key, ERRORED, param, f"shape {list(got)} != parameter {list(want)}: "
                           "the loader asserts")
        self.filled.setdefault(param, set()).add(shard)
        reason = how or (f"shard {shard}" if shard is not None else "")
        return KeyFate(key, RENAMED if renamed else LOADED, param, reason)

    def _unknown(self, key, param) -> KeyFate:
        if self.p.unknown_keys == "drop_silent":
            return KeyFate(key, DROPPED, None, f"no parameter {param!r}: dropped without a message")
        if self.p.unknown_keys == "drop_logged":
            return KeyFate(key, DROPPED, None, f"no parameter {param!r}: skipped with one "
                           "warning line in the server log")
        if key.endswith(self.p.ignored_unknown_suffixes):
            return KeyFate(key, DROPPED, None, "unmatched suffix ignored by the loader")
        return KeyFate(key, ERRORED, None, self.p.unknown_error.format(param=param))

    def report_keys(self, keys: list[KeyFate]) -> None:
        dropped = [k.name for k in keys if k.fate == DROPPED]
        if dropped:
            how = ("skips (one warning line each in the log)" if self.p.unknown_keys == "drop_logged"
                   else "silently ignores")
            self.add("KEYS_DROPPED", ERROR if self._dropped_matters(keys) else WARNING,
                     f"the engine {how} {len(dropped)} tensor(s): {_preview(dropped)}",
                     keys=dropped)
        errored = [k for k in keys if k.fate == ERRORED]
        if errored:
            self.add("LOAD_ERROR", ERROR, f"the engine fails while loading weights: "
                     f"{errored[0].name}: {errored[0].reason}"
                     + (f" (and {len(errored) - 1} more)" if len(errored) > 1 else ""),
                     keys={k.name: k.reason for k in errored})

    def _dropped_matters(self, keys) -> bool:
        # a d2t ignored beside a full vocabulary loses nothing: the identity mapping is right
        return any(k.fate == DROPPED and "bias" not in k.name and not (
            self.key_map.canonical(k.name) == "d2t" and not self.cfg.pruned_vocab) for k in keys)

    def report_unloaded(self, keys: list[KeyFate]) -> list[str]:
        unloaded = []
        for param, spec in self.params.items():
            missing = [s for s in spec.shards if s not in self.filled.get(param, set())]
            if not missing:
                continue
            label = param if missing == [None] else f"{param}[{','.join(map(str, missing))}]"
            if self._unloaded_is_fine(param, spec):
                continue
            unloaded.append(label)
        if unloaded:
            severe = [u for u in unloaded if self._severity_of_unloaded(u) == ERROR]
            self.add("PARAMS_UNLOADED", ERROR if severe else WARNING,
                     f"the engine leaves {len(unloaded)} parameter(s) at their initial values "
                     f"(linear layers: uninitialised memory or random init; norms: ones): "
                     f"{_preview(unloaded)}", params=unloaded)
            if self.p.missing_params == "raise":
                self.add("LOAD_ERROR", ERROR, "the loader checks that every parameter was "
                         "written: ValueError 'Following weights were not initialized from "
                         f"checkpoint' for {_preview(unloaded)}", params=unloaded,
                         cite=self.p.cites.get("missing_params", ""))
        self._report_extra_layer_norms(unloaded)
        return unloaded

    def _unloaded_is_fine(self, param: str, spec: ParamSpec) -> bool:
        """Parameters the engine fills from elsewhere by design."""
        cfg = self.cfg
        if spec.kind == "embedding":
            return self._report_embedding()
        if spec.kind == "lm_head":
            return self._report_lm_head()
        if param == "model.fc.weight" and not cfg.use_aux_hidden_state.value:
            return True  # trained without aux states: fc is never applied
        if spec.kind == "vocab_map":
            return not cfg.pruned_vocab  # identity mapping is right for a full vocab
        m = _LAYER_PARAM.search(param)
        if (param.endswith("hidden_norm.weight") and m and int(m.group(1)) >= 1
                and self.p.extra_layer_attn_norm == "input_layernorm"):
            return True  # built in every layer, read only by layer 0 (vLLM llama_eagle3.py)
        return False

    def _severity_of_unloaded(self, label: str) -> str:
        param = label.split("[")[0]
        return ERROR if self.params[param].kind != "norm" else WARNING

    def _target_shapes_match(self) -> bool:
        """[V, H] of the draft equals the target's (unknown target: assumed, as is usual)."""
        t, cfg = self.target, self.cfg
        return t is None or ((t.vocab_size in (None, cfg.vocab_size))
                             and (t.hidden_size in (None, cfg.H)))

    def _report_embedding(self) -> bool:
        cfg, has_own = self.cfg, self._has_key("embed_tokens.weight")
        if self.p.embed_policy == "target_always":
            self.add("EMBED_REPLACED", INFO, "the engine always uses the target's embed_tokens "
                     "(the draft builds none)")
            return True
        if self.p.embed_policy == "target_if_shapes_match" and self._target_shapes_match():
            self.add("EMBED_REPLACED", INFO, "the engine uses the target's embed_tokens "
                     "whenever the shapes match", cite=self.p.cites.get("embed_policy", ""))
            return True
        if self.p.embed_policy == "target_unless_hidden_differs":
            ths = cfg.target_hidden_size
            own = ths.present and ths.value != cfg.H
            if not own:
                self.add("EMBED_REPLACED", INFO, "the engine replaces the draft's embed_tokens "
                         "with the target's (set_embed)" + ("; the checkpoint's own copy is ignored"
                                                             if has_own else ""))
                return True
            return has_own
        if has_own:
            return True
        if cfg.Ht != cfg.H:
            return False
        self.add("EMBED_REPLACED", INFO, "the engine shares the target's embed_tokens: the "
                 "checkpoint has none")
        return True

    def _report_lm_head(self) -> bool:
        cfg = self.cfg
        if self.p.lm_head_policy == "own_always":
            return False
        if self.p.lm_head_policy == "target_if_shapes_match":
            borrowed = not cfg.pruned_vocab and self._target_shapes_match()
        elif self.p.lm_head_policy == "target_if_draft_vocab_null":
            borrowed = cfg.draft_vocab_size.present and cfg.draft_vocab_size.value is None
        elif self.p.lm_head_policy == "target_if_absent":
            borrowed = not self._has_key("lm_head.weight")
            if borrowed and cfg.pruned_vocab:
                self.add("LM_HEAD_FROM_TARGET", ERROR, "the checkpoint has no lm_head: the engine "
                         f"uses the target's {cfg.vocab_size}-token head although the draft's "
                         f"vocabulary is pruned to {cfg.Vd}, and still maps each drafted id "
                         "through d2t: drafted tokens are the wrong ones",
                         cite=self.p.cites.get("lm_head", ""))
                return True
        else:
            borrowed = not cfg.pruned_vocab and not self._has_key("lm_head.weight")
        if borrowed:
            self.add("LM_HEAD_FROM_TARGET", INFO, "the engine uses the target's lm_head")
        return borrowed

    def report_overwritten_copies(self) -> None:
        """Releases that replace the draft's own trained embed_tokens or lm_head with the
        target's whenever the shapes match (vLLM 0.9.1-0.11.0: vllm #27732, fixed by #28549)."""
        if not self._target_shapes_match():
            return
        copies = (("embed_tokens", "embed_policy", "EMBED_REPLACED", WARNING),
                  ("lm_head", "lm_head_policy", "LM_HEAD_FROM_TARGET", ERROR))
        for name, policy, code, severity in copies:
            if getattr(self.p, policy) != "target_if_shapes_match" or \
                    not self._has_key(f"{name}.weight") or \
                    (name == "lm_head" and self.cfg.pruned_vocab):
                continue
            self.add(code, severity, f"the engine overwrites the draft's own trained {name} "
                     "with the target's because the shapes match", cite=self.p.cites.get(policy, ""))

    def _has_key(self, canonical: str) -> bool:
        return self.key_map.has(canonical)

    def _report_extra_layer_norms(self, unloaded: list[str]) -> None:
        if self.p.extra_layer_attn_norm != "hidden_norm":
            return
        hit = [u for u in unloaded if u.endswith("hidden_norm.weight")
               and (m := _LAYER_PARAM.search(u)) and int(m.group(1)) >= 1]
        if hit:
            self.add("PARAMS_UNLOADED", ERROR, "the engine uses hidden_norm as the pre-attention "
                     "norm of decoder layers >= 1, but the checkpoint has none for them (speculators "
                     "layers are plain Llama layers): those layers run with an untrained all-ones "
                     "norm and the trained input_layernorm is never used", params=hit,
                     cite=self.p.cites.get("extra_layers", ""))


def _preview(items: list[str], n: int = 4) -> str:
    head = ", ".join(items[:n])
    return head + (f" (+{len(items) - n} more)" if len(items) > n else "")
