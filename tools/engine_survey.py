#!/usr/bin/env python3
"""Survey how an engine's EAGLE-3 serving code changed between releases.

Reads a bare git directory of SGLang or vLLM (no network), walks its release tags and prints,
per consecutive release pair, which watched files and functions changed and which commits
(with their PR numbers) touched them; plus, per release, which model classes support aux
hidden-state capture, and the first release that ships the EAGLE-3 draft model.

    python tools/engine_survey.py GIT_DIR sglang --since v0.4.4.post2 --until v0.5.23 [--json]

Where a release has no upstream history (the full repository is too large to fetch), the
`--graft-wheel` mode adds it from a downloaded wheel as one tagged commit on top of its parent
release, so the survey can still diff it; its commits are then recovered only where both file
versions also exist on the history branch (`--history-branch`, default main):

    python tools/engine_survey.py GIT_DIR sglang --graft-wheel sglang-0.5.19-....whl --tag v0.5.19

Python 3.11, stdlib only.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import fnmatch
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from datetime import datetime, timezone


@dataclass(frozen=True)
class Watch:
    """A group of files that decides how an EAGLE-3 draft is served."""

    name: str
    why: str
    globs: tuple[str, ...]
    # A file matching `globs` is watched only if its text matches `grep` (at either tag).
    grep: str | None = None
    # Only functions whose name or source matches `focus` are reported; commits must add or
    # remove a line matching it (git log -G). None: every function and every commit.
    focus: str | None = None


@dataclass(frozen=True)
class CaptureRule:
    """How to tell that a target model class can hand aux hidden states to an EAGLE-3 draft."""

    globs: tuple[str, ...]
    methods: tuple[str, ...]
    bases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Engine:
    name: str
    draft_file: str  # its first appearance is "first release with EAGLE-3"
    package_dir: str  # where a wheel's package tree lives in the repository
    watches: tuple[Watch, ...]
    capture: CaptureRule


SGLANG_SRT = "python/sglang/srt/"
AUX_IDS_VLLM = r"eagle_aux_hidden_state_layer_ids|eagle3_aux|use_aux_hidden_state_outputs"
VLLM_MODELS = "vllm/model_executor/models/"

ENGINES = {
    "sglang": Engine(
        name="sglang",
        draft_file=SGLANG_SRT + "models/llama_eagle3.py",
        package_dir="python/",
        watches=(
            Watch("draft model", "the EAGLE-3 draft modules: weight names, fc width, layers, forward",
                  (SGLANG_SRT + "models/*eagle3*.py",)),
            Watch("eagle workers", "draft/verify loop; loads the draft, maps d2t to hot_token_id",
                  (SGLANG_SRT + "speculative/eagle_worker*.py",
                   SGLANG_SRT + "speculative/multi_layer_eagle_worker*.py",
                   SGLANG_SRT + "speculative/standalone_worker*.py")),
            Watch("spec info", "spec input/output structs, spec algorithm enum, shared spec helpers",
                  (SGLANG_SRT + "speculative/spec_info.py", SGLANG_SRT + "speculative/spec_utils.py",
                   SGLANG_SRT + "speculative/eagle_info*.py", SGLANG_SRT + "speculative/eagle_utils.py")),
            Watch("hot_token_id / d2t", "where the draft vocab is mapped to target ids",
                  (SGLANG_SRT + "*.py",), grep=r"hot_token_id|\bd2t\b", focus=r"hot_token_id|\bd2t\b"),
            Watch("aux layer ids", "where the captured target layers are read from the draft config",
                  (SGLANG_SRT + "*.py",), grep=r"eagle_aux_hidden_state_layer_ids",
                  focus=r"eagle_aux_hidden_state_layer_ids|layers_to_capture"),
            Watch("target capture", "target models that capture aux hidden states (+1 offsets live here)",
                  (SGLANG_SRT + "models/*.py",), grep=r"def set_eagle3_layers_to_capture",
                  focus=r"eagle3|aux_hidden|layers_to_capture"),
            Watch("server args", "speculative defaults and EAGLE3 argument checks",
                  (SGLANG_SRT + "server_args.py", SGLANG_SRT + "arg_groups/speculative*.py"),
                  focus=r"EAGLE3|speculative_(algorithm|num_steps|eagle_topk|num_draft_tokens|draft)"),
            Watch("accept-rate metrics", "decode log 'accept len/accept rate' and spec metrics",
                  (SGLANG_SRT + "*.py",), grep=r"accept len: |accept rate: |spec_accept_(length|rate)",
                  focus=r"accept len|accept rate|spec_accept_(length|rate)"),
        ),
        capture=CaptureRule(globs=(SGLANG_SRT + "models/*.py",),
                            methods=("set_eagle3_layers_to_capture",)),
    ),
    "vllm": Engine(
        name="vllm",
        draft_file=VLLM_MODELS + "llama_eagle3.py",
        package_dir="",
        watches=(
            Watch("draft model", "EAGLE-3 draft modules (llama/qwen/deepseek...): weight names, fc width, d2t",
                  (VLLM_MODELS + "*eagle3*.py",)),
            Watch("eagle proposer", "drafting loop: feeds aux states to the draft, maps draft ids",
                  ("vllm/v1/spec_decode/eagle*.py", "vllm/v1/spec_decode/llm_base_proposer.py",
                   "vllm/v1/spec_decode/vocab_mapping.py", "vllm/v1/spec_decode/utils.py",
                   "vllm/v1/worker/gpu/spec_decode/eagle/*.py")),
            Watch("speculative config", "method detection (eagle3), draft config, speculators conversion",
                  ("vllm/config/speculative.py", "vllm/config.py", "vllm/config/__init__.py",
                   "vllm/transformers_utils/configs/eagle.py",
                   "vllm/transformers_utils/configs/speculators/*.py"),
                  focus=r"eagle|Eagle|EAGLE|speculators|draft_vocab|aux_hidden"),
            Watch("aux layer ids", "where the target's captured layers are chosen and switched on",
                  ("vllm/v1/*.py", "vllm/config/*.py", "vllm/config.py", "vllm/transformers_utils/*.py"),
                  grep=AUX_IDS_VLLM, focus=AUX_IDS_VLLM),
            Watch("eagle3 interface", "SupportsEagle3 and the target classes that implement capture",
                  (VLLM_MODELS + "*.py",), grep=r"SupportsEagle3|def set_aux_hidden_state_layers",
                  focus=r"SupportsEagle3|aux_hidden_state|eagle3"),
            Watch("spec-decode metrics", "acceptance log line and Prometheus counters",
                  ("vllm/v1/spec_decode/metrics.py", "vllm/v1/metrics/*.py"),
                  grep=r"num_accepted_tokens|[Aa]cceptance (length|rate)",
                  focus=r"num_accepted_tokens|num_draft|[Aa]cceptance"),
        ),
        capture=CaptureRule(globs=(VLLM_MODELS + "*.py",),
                            methods=("set_aux_hidden_state_layers",), bases=("SupportsEagle3",)),
    ),
}

RELEASE_TAG = re.compile(r"^v(\d+(?:\.\d+)+)(?:\.post(\d+))?$")
# pre-releases, surveyed only with --pre-releases: v0.5.0rc0, v0.9.1rc1, v0.10.0.dev2
ANY_TAG = re.compile(r"^v(\d+(?:\.\d+)+)(?:\.post(\d+)|(rc|\.?dev)(\d+))?$")
STAGE = {".dev": -2, "dev": -2, "rc": -1}
PR_NUMBER = re.compile(r"\(#(\d+)\)")
GRAFT_MARK = "grafted from wheel"


class SurveyError(Exception):
    """Reported as one line on stderr, exit status 2."""


# ---------------------------------------------------------------- git access

class Repo:
    def __init__(self, git_dir: str):
        self.git_dir = git_dir
        if not os.path.isdir(git_dir):
            raise SurveyError(f"git dir not found: {git_dir}")
        if self._run(["rev-parse", "--git-dir"], check=False).returncode != 0:
            raise SurveyError(f"not a git directory: {git_dir}")
        self._batch: subprocess.Popen | None = None

    def _run(self, args: list[str], check: bool = True, stdin: str | None = None,
             env: dict | None = None) -> subprocess.CompletedProcess:
        proc = subprocess.run(["git", "--git-dir", self.git_dir, *args], input=stdin,
                              capture_output=True, text=True, errors="replace",
                              env={**os.environ, **(env or {})})
        if check and proc.returncode != 0:
            raise SurveyError(f"git {' '.join(args[:3])} failed: {proc.stderr.strip()[:200]}")
        return proc

    def git(self, *args: str, **kw) -> str:
        return self._run(list(args), **kw).stdout

    def tags(self) -> list[str]:
        return self.git("tag", "--list").split()

    def has_ref(self, ref: str) -> bool:
        return self._run(["rev-parse", "--verify", "--quiet", ref + "^{commit}"],
                         check=False).returncode == 0

    def files(self, tag: str) -> list[str]:
        return self.git("ls-tree", "-r", "--name-only", tag).splitlines()

    def grep_files(self, tag: str, pattern: str, prefixes: list[str]) -> set[str]:
        proc = self._run(["grep", "-l", "-E", pattern, tag, "--", *prefixes], check=False)
        return {line.split(":", 1)[1] for line in proc.stdout.splitlines() if ":" in line}

    def read(self, tag: str, path: str) -> tuple[str, str] | None:
        """(blob id, text) of path at tag, or None; one long-lived `git cat-file --batch`."""
        if self._batch is None:
            self._batch = subprocess.Popen(["git", "--git-dir", self.git_dir, "cat-file", "--batch"],
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._batch.stdin.write(f"{tag}:{path}\n".encode())
        self._batch.stdin.flush()
        header = self._batch.stdout.readline().decode().split()
        if len(header) != 3:
            return None  # "<name> missing" (or ambiguous)
        data = self._batch.stdout.read(int(header[2]) + 1)[:-1]
        return (header[0], data.decode("utf-8", "replace")) if header[1] == "blob" else None

    def show(self, tag: str, path: str) -> str | None:
        found = self.read(tag, path)
        return found[1] if found else None

    def blob_id(self, tag: str, path: str) -> str | None:
        found = self.read(tag, path)
        return found[0] if found else None

    def is_ancestor(self, older: str, newer: str) -> bool:
        return self._run(["merge-base", "--is-ancestor", older, newer], check=False).returncode == 0

    def commit_info(self, tag: str) -> tuple[str, str]:
        sha, date = self.git("log", "-1", "--format=%H %cs", tag).split()
        return sha, date


# ---------------------------------------------------------------- releases

def release_key(tag: str) -> tuple:
    match = ANY_TAG.match(tag)
    numbers = tuple(int(n) for n in match.group(1).split("."))
    # pad so that v0.9.0 < v0.9.0.1 < v0.9.1, and rank v0.5.9rc0 < v0.5.9 < v0.5.9.post1
    if match.group(3):
        stage = (STAGE[match.group(3)], int(match.group(4)))
    else:
        stage = (0, int(match.group(2) or 0))
    return numbers + (0,) * (5 - len(numbers)) + stage


def release_tags(repo: Repo, pre_releases: bool = False) -> list[str]:
    pattern = ANY_TAG if pre_releases else RELEASE_TAG
    return sorted((t for t in repo.tags() if pattern.match(t)), key=release_key)


def select_range(tags: list[str], repo: Repo, since: str | None, until: str | None,
                 pre_releases: bool = False) -> list[str]:
    for bound in (since, until):
        if bound is None:
            continue
        if not repo.has_ref(f"refs/tags/{bound}"):
            raise SurveyError(f"tag not found: {bound}")
        if not (ANY_TAG if pre_releases else RELEASE_TAG).match(bound):
            raise SurveyError(f"not a release tag: {bound}")
    low = release_key(since) if since else None
    high = release_key(until) if until else None
    return [t for t in tags if (low is None or release_key(t) >= low)
            and (high is None or release_key(t) <= high)]


def first_with_file(repo: Repo, tags: list[str], path: str) -> str | None:
    return next((t for t in tags if repo.blob_id(t, path)), None)


# ---------------------------------------------------------------- function extraction

def extract_functions(source: str) -> dict[str, str]:
    """Map qualified names (Class.method, function, Class.field) to their source text."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return extract_functions_by_regex(source)
    lines = source.splitlines()
    found: dict[str, str] = {}
    _collect(tree.body, "", lines, found)
    return found


def _segment(node: ast.AST, lines: list[str]) -> str:
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return "\n".join(line.rstrip() for line in lines[start - 1:node.end_lineno])


def _add(found: dict[str, str], name: str, text: str) -> None:
    # same name defined twice (if/else branches, overloads): keep both, numbered
    key, n = name, 2
    while key in found:
        key, n = f"{name}#{n}", n + 1
    found[key] = text


def _collect(body: list[ast.stmt], prefix: str, lines: list[str], found: dict[str, str]) -> None:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _add(found, prefix + node.name, _segment(node, lines))
        elif isinstance(node, ast.ClassDef):
            _collect(node.body, f"{prefix}{node.name}.", lines, found)
        elif prefix and isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            _add(found, prefix + node.target.id, _segment(node, lines))
        elif isinstance(node, (ast.If, ast.Try)):
            _collect(node.body, prefix, lines, found)
            _collect(getattr(node, "orelse", []), prefix, lines, found)


DEF_LINE = re.compile(r"^(\s*)(?:async\s+)?(def|class)\s+(\w+)")


def extract_functions_by_regex(source: str) -> dict[str, str]:
    """Fallback for files that this Python cannot parse: indentation-delimited blocks."""
    lines = source.splitlines()
    found: dict[str, str] = {}
    stack: list[tuple[int, str, str]] = []  # (indent, kind, name) of the enclosing blocks
    for i, line in enumerate(lines):
        match = DEF_LINE.match(line)
        if not match:
            continue
        indent, kind, name = len(match.group(1)), match.group(2), match.group(3)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        inside_function = any(k == "def" for _, k, _ in stack)
        stack.append((indent, kind, name))
        if kind == "class" or inside_function:
            continue  # nested defs are part of their function's text
        end = i + 1
        while end < len(lines) and (not lines[end].strip()
                                     or len(lines[end]) - len(lines[end].lstrip()) > indent):
            end += 1
        prefix = "".join(f"{n}." for _, k, n in stack[:-1])
        _add(found, prefix + name, "\n".join(l.rstrip() for l in lines[i:end]).rstrip())
    return found


def diff_functions(old: dict[str, str], new: dict[str, str], focus: str | None) -> dict:
    """Added/removed/changed names; with a focus, only where the focus is in what changed."""
    pattern = re.compile(focus) if focus else None

    def keep(text: str) -> bool:
        return pattern is None or bool(pattern.search(text))

    return {
        "added": sorted(n for n in new if n not in old and keep(n + "\n" + new[n])),
        "removed": sorted(n for n in old if n not in new and keep(n + "\n" + old[n])),
        "changed": sorted(n for n in new if n in old and new[n] != old[n]
                          and keep(changed_lines(old[n], new[n]))),
    }


def changed_lines(old: str, new: str) -> str:
    diff = difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0)
    return "\n".join(line[1:] for line in diff
                     if line[:1] in "+-" and not line.startswith(("+++", "---")))


# ---------------------------------------------------------------- watched files

def _fixed_prefix(glob: str) -> str:
    head = re.split(r"[*?\[]", glob, maxsplit=1)[0]
    return head if head.endswith("/") or head == glob else head.rsplit("/", 1)[0] + "/"


class Survey:
    def __init__(self, repo: Repo, engine: Engine, history_branch: str = "main"):
        self.repo, self.engine, self.history_branch = repo, engine, history_branch
        self._files: dict[str, list[str]] = {}
        self._parsed: dict[str, dict[str, str]] = {}  # by blob id
        self._capture: dict[str, list[str]] = {}  # by blob id
        self._matching: dict[tuple, set[str]] = {}
        self._intro: dict[str, dict[str, str]] = {}  # path -> blob id -> commit
        self._has_history: bool | None = None

    def files(self, tag: str) -> list[str]:
        if tag not in self._files:
            self._files[tag] = self.repo.files(tag)
        return self._files[tag]

    def matching(self, tag: str, globs: tuple[str, ...], grep: str | None) -> set[str]:
        key = (tag, globs, grep)
        if key not in self._matching:
            paths = {p for p in self.files(tag) if any(fnmatch.fnmatchcase(p, g) for g in globs)}
            if grep is not None:
                prefixes = sorted({_fixed_prefix(g) for g in globs})
                paths &= self.repo.grep_files(tag, grep, prefixes)
            self._matching[key] = paths
        return self._matching[key]

    def functions(self, tag: str, path: str) -> dict[str, str]:
        found = self.repo.read(tag, path)
        if found is None:
            return {}
        blob, text = found
        if blob not in self._parsed:
            self._parsed[blob] = extract_functions(text)
        return self._parsed[blob]

    # ------------------------------------------------------------ per pair

    def changed_paths(self, old: str, new: str, paths: set[str]) -> list[tuple[str, str, str]]:
        """(status, old path, new path) for watched paths that differ, renames paired."""
        if not paths:
            return []
        out = self.repo.git("diff", "--name-status", "-M", old, new, "--", *sorted(paths))
        rows = []
        for line in out.splitlines():
            parts = line.split("\t")
            status = parts[0][0]
            rows.append((status, parts[1], parts[-1]))
        return rows

    def watch_changes(self, watch: Watch, old: str, new: str, grafted: bool) -> dict:
        paths = self.matching(old, watch.globs, watch.grep) | self.matching(new, watch.globs, watch.grep)
        files, commits = [], []
        for status, old_path, new_path in self.changed_paths(old, new, paths):
            delta = diff_functions(self.functions(old, old_path), self.functions(new, new_path),
                                   watch.focus)
            if watch.focus and status == "M" and not any(delta.values()):
                continue  # the change is outside the focus (e.g. an unrelated part of scheduler.py)
            entry = {"status": status, "path": new_path, **delta}
            if old_path != new_path:
                entry["old_path"] = old_path
            if grafted:
                found = self.recovered_commits(old, new, old_path, new_path, watch.focus)
                entry["history_matched"] = found is not None
                commits += found or []
            files.append(entry)
        if not grafted:
            commits = self.log(f"{old}..{new}", paths, watch.focus)
        return {"watch": watch.name, "files": files, "commits": commits}

    def log(self, revisions: str, paths: set[str], focus: str | None, recovered: bool = False,
            first_parent: bool = False) -> list[dict]:
        if not paths:
            return []
        args = ["log", "--format=%H%x1f%cs%x1f%s", revisions] + ["--first-parent"] * first_parent
        if focus:
            args += ["-G", focus]
        out = self.repo.git(*args, "--", *sorted(paths))
        commits = []
        for line in out.splitlines():
            sha, date, subject = line.split("\x1f", 2)
            commits.append({"sha": sha[:12], "date": date, "subject": subject,
                            "prs": [int(n) for n in PR_NUMBER.findall(subject)],
                            "recovered": recovered})
        return commits

    def is_grafted(self, tag: str) -> bool:
        return GRAFT_MARK in self.repo.git("log", "-1", "--format=%s", tag)

    def recovered_commits(self, old: str, new: str, old_path: str, new_path: str,
                          focus: str | None) -> list[dict] | None:
        """For a grafted release: mainline commits between the commits that wrote the two versions.

        Found only when both file versions exist verbatim on the history branch (the release
        did not cherry-pick a different version, and the branch history reaches that far).
        """
        start = self.introductions(old_path).get(self.repo.blob_id(old, old_path) or "")
        end = self.introductions(new_path).get(self.repo.blob_id(new, new_path) or "")
        if not start or not end or not self.repo.is_ancestor(start, end):
            return None
        return self.log(f"{start}..{end}", {old_path, new_path}, focus, recovered=True,
                        first_parent=True)

    def introductions(self, path: str) -> dict[str, str]:
        """Blob id -> the oldest mainline commit that wrote that version of path."""
        if self._has_history is None:
            self._has_history = self.repo.has_ref(self.history_branch)
        if not self._has_history:
            return {}
        if path not in self._intro:
            out = self.repo.git("log", "--first-parent", self.history_branch, "--format=%x00%H", "--raw",
                                "--no-abbrev", "--no-renames", "--", path)
            intro, sha = {}, ""
            for line in out.splitlines():  # newest first, so older commits overwrite
                if line.startswith("\0"):
                    sha = line[1:]
                elif line.startswith(":"):
                    intro[line.split()[3]] = sha
            self._intro[path] = intro
        return self._intro[path]

    def pair(self, old: str, new: str) -> dict:
        grafted = self.is_grafted(new)
        watches = [self.watch_changes(w, old, new, grafted) for w in self.engine.watches]
        merged: dict[str, dict] = {}
        for w in watches:
            for c in w["commits"]:
                watched_by = merged.setdefault(c["sha"], {**c, "watches": []})["watches"]
                if w["watch"] not in watched_by:
                    watched_by.append(w["watch"])
        commits = sorted(merged.values(), key=lambda c: (c["date"], c["sha"]))
        prs = sorted({p for c in commits for p in c["prs"]})
        return {"from": old, "to": new, "grafted": grafted,
                "watches": [{"watch": w["watch"], "files": w["files"]} for w in watches if w["files"]],
                "commits": commits, "prs": prs}

    # ------------------------------------------------------------ capture support

    def capture_classes(self, tag: str) -> list[str]:
        rule = self.engine.capture
        grep = "|".join([rf"def {m}\b" for m in rule.methods] + [rf"\b{b}\b" for b in rule.bases])
        classes = []
        for path in sorted(self.matching(tag, rule.globs, grep)):
            blob, source = self.repo.read(tag, path) or ("", "")
            if blob not in self._capture:
                self._capture[blob] = capture_classes_in(source, rule)
            classes += [f"{name} ({path.rsplit('/', 1)[-1]})" for name in self._capture[blob]]
        return classes


def capture_classes_in(source: str, rule: CaptureRule) -> list[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return _capture_classes_by_regex(source, rule)
    names = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
        methods = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        is_interface = node.name in rule.bases
        if not is_interface and (bases & set(rule.bases) or methods & set(rule.methods)):
            names.append(node.name)
    return names


def _capture_classes_by_regex(source: str, rule: CaptureRule) -> list[str]:
    names = []
    for name, text in extract_functions_by_regex(source).items():
        if "." in name and name.split(".")[-1] in rule.methods:
            names.append(name.split(".")[-2])
    for match in re.finditer(r"^class\s+(\w+)\(([^)]*)\)", source, re.M):
        if any(re.search(rf"\b{b}\b", match.group(2)) for b in rule.bases):
            names.append(match.group(1))
    return sorted(set(names) - set(rule.bases))


# ---------------------------------------------------------------- the whole survey

def run_survey(git_dir: str, engine_name: str, since: str | None = None, until: str | None = None,
               history_branch: str = "main", pre_releases: bool = False) -> dict:
    engine = ENGINES[engine_name]
    repo = Repo(git_dir)
    survey = Survey(repo, engine, history_branch)
    all_tags = release_tags(repo, pre_releases)
    tags = select_range(all_tags, repo, since, until, pre_releases)
    if not tags:
        raise SurveyError("no release tags in range")
    upto = [t for t in all_tags if release_key(t) <= release_key(tags[-1])]
    releases = []
    for tag in tags:
        sha, date = repo.commit_info(tag)
        releases.append({"tag": tag, "date": date, "commit": sha[:12],
                         "eagle3_draft": repo.blob_id(tag, engine.draft_file) is not None,
                         "capture": survey.capture_classes(tag)})
    return {
        "engine": engine.name,
        "git_dir": os.path.abspath(git_dir),
        "range": [tags[0], tags[-1]],
        "history_branch": history_branch,
        "first_eagle3_release": first_with_file(repo, upto, engine.draft_file),
        "draft_file": engine.draft_file,
        "watch": [{"name": w.name, "why": w.why, "globs": list(w.globs), "grep": w.grep,
                   "focus": w.focus} for w in engine.watches],
        "releases": releases,
        "pairs": [survey.pair(a, b) for a, b in zip(tags, tags[1:])],
    }


# ---------------------------------------------------------------- markdown

def to_markdown(report: dict, max_commits: int | None = None) -> str:
    out = [f"# {report['engine']} EAGLE-3 survey: {report['range'][0]} .. {report['range'][1]}", ""]
    out += [f"- git dir: `{report['git_dir']}`",
            f"- releases in range: {len(report['releases'])}",
            f"- first release with `{report['draft_file']}`: {report['first_eagle3_release']}", ""]
    out += _watch_table(report) + _release_table(report) + _capture_tables(report)
    out += ["## Changes per release pair", ""]
    for pair in report["pairs"]:
        out += _pair_section(pair, max_commits, report["history_branch"])
    return "\n".join(out).rstrip() + "\n"


def _watch_table(report: dict) -> list[str]:
    rows = ["## Watch list", "", "| watch | paths | selected by | why |", "|---|---|---|---|"]
    for w in report["watch"]:
        paths = ", ".join(f"`{g}`" for g in w["globs"])
        grep = f"`{w['grep']}`" if w["grep"] else "path"
        rows.append(f"| {w['name']} | {paths} | {grep} | {w['why']} |")
    return rows + [""]


def _release_table(report: dict) -> list[str]:
    rows = ["## Releases", "", "| release | commit date | commit | EAGLE-3 draft | capture classes |",
            "|---|---|---|---|---|"]
    for r in report["releases"]:
        rows.append(f"| {r['tag']} | {r['date']} | {r['commit']} | {'yes' if r['eagle3_draft'] else 'no'} "
                    f"| {len(r['capture'])} |")
    return rows + [""]


def _capture_tables(report: dict) -> list[str]:
    rows = ["## Capture support per release", "",
            "Classes that define the capture hook (or derive from the EAGLE-3 interface), "
            "as added or removed relative to the release before.", "",
            "| release | count | added | removed |", "|---|---|---|---|"]
    previous: set[str] = set()
    first: dict[str, str] = {}
    last: dict[str, str] = {}
    for r in report["releases"]:
        now = set(r["capture"])
        added, removed = sorted(now - previous), sorted(previous - now)
        rows.append(f"| {r['tag']} | {len(now)} | {', '.join(added) or '-'} | {', '.join(removed) or '-'} |")
        for name in now:
            first.setdefault(name, r["tag"])
            last[name] = r["tag"]
        previous = now
    final = report["releases"][-1]["tag"]
    rows += ["", "| class (file) | first release | last release |", "|---|---|---|"]
    for name in sorted(first, key=lambda n: (release_key(first[n]), n)):
        rows.append(f"| {name} | {first[name]} | {last[name] if last[name] != final else '(still present)'} |")
    return rows + [""]


def _pair_section(pair: dict, max_commits: int | None, history: str) -> list[str]:
    rows = [f"### {pair['from']} → {pair['to']}", ""]
    if pair["grafted"]:
        files = {f["path"]: f["history_matched"] for w in pair["watches"] for f in w["files"]}
        rows += [f"_{pair['to']} was {GRAFT_MARK}: commits below are recovered by matching file versions "
                 f"to `{history}` history ({sum(files.values())} of {len(files)} changed files matched)._", ""]
    if not pair["watches"]:
        return rows + ["No watched changes.", ""]
    for w in pair["watches"]:
        rows.append(f"- **{w['watch']}**")
        for f in w["files"]:
            unmatched = " [no upstream history found]" if f.get("history_matched") is False else ""
            rows.append(f"  - `{f['path']}` ({_status_word(f)}){_function_summary(f)}{unmatched}")
    if pair["prs"]:
        rows += ["", "PRs: " + ", ".join(f"#{n}" for n in pair["prs"])]
    commits = pair["commits"]
    if commits:
        shown = commits if max_commits is None else commits[:max_commits]
        rows += ["", f"Commits touching watched code ({len(commits)}):", ""]
        rows += [f"- {c['date']} `{c['sha'][:9]}` {c['subject']} [{', '.join(c['watches'])}]" for c in shown]
        if len(shown) < len(commits):
            rows.append(f"- … {len(commits) - len(shown)} more (see --json)")
    return rows + [""]


def _status_word(f: dict) -> str:
    word = {"A": "added", "D": "deleted", "M": "modified", "R": "renamed", "C": "copied",
            "T": "type changed"}.get(f["status"], f["status"])
    return f"{word} from `{f['old_path']}`" if "old_path" in f else word


def _function_summary(f: dict) -> str:
    parts = [f"{kind}: {', '.join(f[kind])}" for kind in ("added", "removed", "changed") if f[kind]]
    return " — " + "; ".join(parts) if parts else ""


# ---------------------------------------------------------------- graft a wheel

def graft_wheel(git_dir: str, engine_name: str, wheel: str, tag: str, parent: str | None,
                root: bool = False) -> str:
    """Add a release from a wheel's Python files as one commit on top of its parent release
    (root: as a first commit with no parent, e.g. in a scratch repository with no history)."""
    engine, repo = ENGINES[engine_name], Repo(git_dir)
    if not RELEASE_TAG.match(tag):
        raise SurveyError(f"not a release tag: {tag}")
    if repo.has_ref(f"refs/tags/{tag}"):
        raise SurveyError(f"tag exists already: {tag}")
    parent = None if root else parent or _release_below(repo, tag)
    if parent is None and not root:
        raise SurveyError(f"no release tag below {tag} to graft onto (--root: graft it as a first commit)")
    if parent is not None and not repo.has_ref(f"refs/tags/{parent}"):
        raise SurveyError(f"tag not found: {parent}")
    package = engine.name + "/"
    with tempfile.TemporaryDirectory() as tmp:
        stamp = _unpack_python_files(wheel, package, os.path.join(tmp, "tree", engine.package_dir))
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index"), "GIT_WORK_TREE": os.path.join(tmp, "tree")}
        target = engine.package_dir + package
        if parent is not None:
            _keep_executable_bits(repo, parent, target, env["GIT_WORK_TREE"])
            repo.git("read-tree", parent, env=env)
        repo.git("rm", "--cached", "-r", "-q", "--ignore-unmatch", "--", f":(glob){target}**/*.py", env=env)
        repo.git("add", "-f", "--ignore-removal", "--", target, env=env)
        tree = repo.git("write-tree", env=env).strip()
    message = f"Release {tag} ({GRAFT_MARK} {os.path.basename(wheel)}; no upstream history)\n"
    when = {"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp,
            "GIT_AUTHOR_NAME": "engine_survey", "GIT_AUTHOR_EMAIL": "engine_survey@localhost",
            "GIT_COMMITTER_NAME": "engine_survey", "GIT_COMMITTER_EMAIL": "engine_survey@localhost"}
    parents = ["-p", repo.git("rev-parse", parent + "^{commit}").strip()] if parent else []
    commit = repo.git("commit-tree", tree, *parents, stdin=message, env=when).strip()
    repo.git("update-ref", f"refs/tags/{tag}", commit)
    return commit


def _keep_executable_bits(repo: Repo, parent: str, target: str, tree_dir: str) -> None:
    """A wheel drops the executable bit; keep the parent's so that modes don't show as changes."""
    for line in repo.git("ls-tree", "-r", parent, "--", target).splitlines():
        mode, _, rest = line.partition(" ")
        path = os.path.join(tree_dir, rest.split("\t", 1)[1])
        if mode == "100755" and os.path.isfile(path):
            os.chmod(path, 0o755)


def _release_below(repo: Repo, tag: str) -> str | None:
    below = [t for t in release_tags(repo) if release_key(t) < release_key(tag)]
    return below[-1] if below else None


def _unpack_python_files(wheel: str, package: str, dest: str) -> str:
    """Write the wheel's `package/**.py` under dest; return its newest file time (commit date)."""
    if not os.path.isfile(wheel):
        raise SurveyError(f"wheel not found: {wheel}")
    newest = (1980, 1, 1, 0, 0, 0)
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            name = info.filename
            if not name.startswith(package) or not name.endswith(".py") or ".." in name.split("/"):
                continue
            path = os.path.join(dest, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as out:
                out.write(archive.read(info))
            newest = max(newest, info.date_time)
    return datetime(*newest, tzinfo=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+0000")


# ---------------------------------------------------------------- command line

def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("git_dir", help="bare git directory of the engine")
    parser.add_argument("engine", choices=sorted(ENGINES))
    parser.add_argument("--since", help="first release tag (inclusive)")
    parser.add_argument("--until", help="last release tag (inclusive)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    parser.add_argument("--max-commits", type=int, help="markdown: commits listed per pair")
    parser.add_argument("--pre-releases", action="store_true", help="also survey rc and dev tags")
    parser.add_argument("--history-branch", default="main",
                        help="linear upstream branch used to recover commits for grafted releases")
    parser.add_argument("--graft-wheel", metavar="WHEEL", help="add --tag from this wheel instead")
    parser.add_argument("--tag", help="with --graft-wheel: the release tag to create")
    parser.add_argument("--parent", help="with --graft-wheel: parent tag (default: the release below)")
    parser.add_argument("--root", action="store_true",
                        help="with --graft-wheel: a first commit with no parent (a scratch repository)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.graft_wheel:
            if not args.tag:
                raise SurveyError("--graft-wheel needs --tag")
            print(graft_wheel(args.git_dir, args.engine, args.graft_wheel, args.tag, args.parent,
                              args.root))
            return 0
        report = run_survey(args.git_dir, args.engine, args.since, args.until, args.history_branch,
                            args.pre_releases)
    except SurveyError as error:
        print(f"engine_survey: error: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        sys.stdout.write(to_markdown(report, args.max_commits))
    return 0


if __name__ == "__main__":
    sys.exit(main())
