"""A plan's startup step: does the engine build a draft for this config at all (release,
dialect, architecture, layers, required fields), and how it reads the config's norm flags and
context length."""

from __future__ import annotations

from eagle3_nb.config import ABSENT, NORM_FLAGS, TRAINER_FLAG_DEFAULTS
from eagle3_nb.engines.config_rules import breach, guessed_type, shown, value_text
from eagle3_nb.engines.plan_state import PlanState
from eagle3_nb.findings import ERROR, INFO, WARNING

DEFAULT_MAX_POSITIONS = 2048  # transformers' LlamaConfig default when the key is absent

# Why a draft context shorter than the target's lowers acceptance whatever the engine: the
# public thread where it did (a draft trained on 2k, served past it)
CONTEXT_CITE = ("sglang#6783 (acceptance drops on prompts past the draft's training window; "
                "the draft's max_position_embeddings against the target's)")


class StartupChecks(PlanState):
    def report_unverified(self) -> None:
        p = self.p
        if p.caveat and not p.eagle3_since:
            self.add("ENGINE_READ_ONLY", INFO, f"{p.name} {p.version}: {p.caveat}",
                     cite=p.evidence)
        if p.eagle3_since:
            self.add("LOAD_ERROR", ERROR, f"{p.name} {p.version} predates EAGLE-3 in {p.name} "
                     f"(first in {p.eagle3_since}): it has no EAGLE-3 draft model",
                     first_release=p.eagle3_since)
        elif p.based_on and p.covers_release(p.version):
            self.add("ENGINE_UNVERIFIED", WARNING, f"{p.name} {p.version} lies within "
                     f"{p.range_text()}, but it is not a published release the kit surveyed (a "
                     f"dev, rc, local or unknown post build): this answer uses the {p.based_on} "
                     f"profile, and what that build changed is not checked", based_on=p.based_on)
        elif p.based_on:
            self.add("ENGINE_UNVERIFIED", WARNING, f"{p.name} {p.version} is a release whose "
                     f"code the kit has not read: this answer uses the {p.based_on} profile, and "
                     f"what changed in between is not checked", based_on=p.based_on)

    def check_startup(self) -> None:
        p, cfg = self.p, self.cfg
        if cfg.dialect not in p.dialects:
            self.add("LOAD_ERROR", ERROR, p.dialect_error, dialect=cfg.dialect)
            return
        if cfg.dialect == "speculators":
            if not {"*", cfg.layer_model_type} & p.speculators_layer_types:
                why = (p.speculators_layer_type_error or "the engine has no EAGLE-3 draft class "
                       "for layer model type {layer_model_type!r}")
                self.add("LOAD_ERROR", ERROR, why.format(layer_model_type=cfg.layer_model_type),
                         layer_model_type=cfg.layer_model_type)
        else:
            self._check_architecture()
        if p.max_layers is not None and cfg.num_hidden_layers > p.max_layers:
            self.add("LOAD_ERROR", ERROR, f"{cfg.num_hidden_layers} decoder layers: "
                     f"{p.too_many_layers_error}", num_hidden_layers=cfg.num_hidden_layers)
        why = p.draft_model_type_errors.get(cfg.layer_model_type)
        if why:
            self.add("LOAD_ERROR", ERROR, f"model_type {cfg.layer_model_type!r}: {why}",
                     layer_model_type=cfg.layer_model_type,
                     cite=p.cites.get("draft_model_type_errors", ""))
        if p.draft_attention == "mla" and not cfg.mla:
            self.add("LOAD_ERROR", ERROR, f"{p.name}'s MLA draft class needs kv_lora_rank, "
                     "qk_nope_head_dim, qk_rope_head_dim and v_head_dim in the config: "
                     f"{cfg.mla_unread or 'it has none'} (it raises at startup)",
                     cite=p.cites.get("draft_attention", ""))
        for name, error in p.required_fields:
            if (cfg.mla or {}).get(name) is None:
                self.add("LOAD_ERROR", ERROR, f"{name} is null or absent: {error}", field=name)
        if p.missing_draft_vocab_error and cfg.draft_vocab_size.source == ABSENT:
            self.add("LOAD_ERROR", ERROR, p.missing_draft_vocab_error)
        ths = cfg.target_hidden_size
        if cfg.dialect in p.target_hidden_null_breaks_fc and ths.present and ths.value is None:
            self.add("LOAD_ERROR", ERROR, "target_hidden_size is null: the engine reads it with "
                     "hasattr (or getattr with a default) and builds fc with a None width "
                     "(TypeError: unsupported operand type(s) for *: 'NoneType' and 'int'); "
                     "remove the key or set a number", cite=p.cites.get("target_hidden_null", ""))
        self._check_config_rules()

    def _check_config_rules(self) -> None:
        """The config values the engine's config reader or draft class raises on (one finding
        per field: the first rule it breaks)."""
        raw, seen = self.cfg.raw, set()
        for rule in self.p.config_rules:
            how = breach(rule, raw, self._draft_path()) if rule.dialect == self.cfg.dialect \
                else ""
            if not how and rule.path_words and rule.path not in seen:
                self._report_guessed_type(rule)
            if not how or rule.path in seen:
                continue
            seen.add(rule.path)
            error = rule.error.format(value=value_text(raw, rule.path))
            path = {"path_checked": self._draft_path()} if how == "unguessed" else {}
            self.add("LOAD_ERROR", ERROR, f"{shown(rule, raw, how)}: {error}; fix it in "
                     "config.json (a copy of it)", config_field=rule.path, cite=rule.cite,
                     **path)

    def _draft_path(self) -> str:
        """The draft's path as the engine is given it, which its guesses from the path see:
        the serving command's (--launch, or the log's server arguments) when one names it,
        else the directory the kit was given."""
        return self.served_path or self.cfg.where.removesuffix("config.json").rstrip("/")

    def _report_guessed_type(self, rule) -> None:
        """model_type absent, and a model type other than llama written in the draft's path:
        AutoConfig builds that type's config class from config.json (rule.cite)."""
        if rule.path in self.cfg.raw or rule.dialect != self.cfg.dialect:
            return
        kind = guessed_type(self._draft_path(), rule.path_words)
        if kind and kind != "llama":
            self.add("CONFIG_GUESSED", WARNING, f"model_type is absent: the engine's AutoConfig "
                     f"reads config.json as the {kind!r} model type's config class, guessed from "
                     f"{kind!r} in the draft's path {self._draft_path()!r}, not as LlamaConfig; "
                     "whether the draft then builds depends on that class's fields; add "
                     "\"model_type\": \"llama\" to config.json (a copy of it)",
                     config_field=rule.path, guessed=kind, cite=rule.cite)

    def _check_architecture(self) -> None:
        archs = self.cfg.architectures
        arch = archs[0] if archs else None
        if arch in self.p.architectures or "*" in self.p.architectures:
            return
        why = self.p.architecture_errors.get(arch or "")
        known = ", ".join(self.p.architectures)
        self.add("LOAD_ERROR", ERROR, f"architectures[0] is {arch!r}: "
                 + (why or f"no draft class for it (accepted: {known})"), architecture=arch)

    # --- config flags ------------------------------------------------------------------------
    def report_flags(self) -> None:
        for name in NORM_FLAGS:
            rule, given = self.p.flags[name], self.cfg.flag(name)
            if given.present and given.value and self.cfg.dialect in rule.ignored_in:
                self.add("NORM_FLAG_IGNORED", ERROR, f"{name}: true in the config, but the "
                         f"engine's {self.cfg.dialect} config path does not pass it on, so the "
                         "draft is computed as if it were false", flag=name,
                         cite=self.p.cites.get("norm_flags", ""))
            elif given.present and given.value and not rule.read:
                self.add("NORM_FLAG_IGNORED", ERROR, f"{name}: true in the config but "
                         f"the engine never reads it, so the draft is computed as if it were "
                         "false (lower acceptance, no error)", flag=name)
            elif given.present and given.value and given.source not in rule.sources:
                self.add("NORM_FLAG_IGNORED", ERROR, f"{name}: set at {given.source}, where "
                         f"the engine does not look (it reads {'/'.join(rule.sources)})", flag=name)
            elif not given.present and rule.read:
                self._report_flag_default(name)

    def _report_flag_default(self, name: str) -> None:
        trained = TRAINER_FLAG_DEFAULTS[name][self.cfg.dialect]
        served = self.flags[name]
        if len(trained) > 1 or served not in trained:
            options = " or ".join(str(v).lower() for v in sorted(trained))
            self.add("NORM_FLAG_AMBIGUOUS", WARNING, f"{name} is absent: the engine assumes "
                     f"{str(served).lower()}, while a {self.cfg.dialect} trainer may have used "
                     f"{options}; write the value training used into config.json",
                     flag=name, engine_default=served, trainer_defaults=sorted(trained),
                     cite=self.p.cites.get(name, ""))

    def report_context(self) -> None:
        target, cfg = self.target, self.cfg
        if not target or not target.max_position_embeddings:
            return
        draft = cfg.max_position_embeddings.value or DEFAULT_MAX_POSITIONS
        if target.max_position_embeddings <= draft:
            return
        msg = (f"draft max_position_embeddings {draft} < target context "
               f"{target.max_position_embeddings}")
        if self.p.context_error:
            self.add("LOAD_ERROR", ERROR, f"{msg}: {self.p.context_error}",
                     cite=self.p.cites.get("context", ""))
        self.add("CONTEXT_TOO_SHORT", WARNING, f"{msg}: either the draft was trained on a "
                 "shorter window, and acceptance drops on prompts past it (sglang #6783), or "
                 "the config value is simply wrong: trainers often copy a default, and raising "
                 "it in the config with no retraining has restored acceptance in public reports. "
                 "Check the training sequence length before retraining", draft=draft,
                 target=target.max_position_embeddings, cite=CONTEXT_CITE)
