#!/usr/bin/env python3
"""Build a bare git repository of an engine's releases from its wheels, one commit per release.

Each release's wheel is downloaded once into a cache directory (`pip download --no-deps`, wheels
only) and grafted in release order (eagle3_nb.engines.profile.release_key) with
engine_survey.py's `graft_wheel`: one commit per wheel, its package's Python files, tagged
`v<version>`, on top of the release before. The files land where the engine's own repository
keeps them (engine_survey.ENGINES: SGLang's under python/), so tools/release_fields.py and its
markers read the result like the upstream repository. Use it when the upstream repository
cannot be fetched; it works for engines whose wheels ship the source the markers read (SGLang's
do: pure Python up to 0.5.10.post1, then per-Python platform wheels with a few Rust extensions
beside the full Python source, so pip picks the wheel for the Python that runs it).

    python tools/wheel_history.py /tmp/survey/sglang-wheels.git sglang --since 0.4.4.post2
    python tools/wheel_history.py /tmp/survey/vllm-wheels.git vllm --versions 0.32.0 0.33.0
    python tools/release_fields.py /tmp/survey/sglang-wheels.git sglang --check-profiles

Without --versions every final release (no rc / dev) that `pip index versions` lists from
--since to --until is taken. A wheel that cannot be downloaded, or that holds none of the
package's files, is reported on stderr and skipped. GIT_DIR must not exist yet (wheels are cached:
a rebuild downloads nothing). Needs git and pip; Python 3.11, stdlib only (plus eagle3_nb for
the release order).
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for where in (ROOT, ROOT / "tools"):
    if str(where) not in sys.path:
        sys.path.insert(0, str(where))

from engine_survey import ENGINES, SurveyError, graft_wheel  # noqa: E402
from eagle3_nb.engines.profile import release_key  # noqa: E402
from eagle3_nb.errors import EngineSpecError  # noqa: E402

FINAL_RELEASE = re.compile(r"^\d+(?:\.\d+)+(?:\.post\d+)?$")


class HistoryError(Exception):
    """Reported as one line on stderr, exit status 2."""


# ---------------------------------------------------------------- versions

def final_releases(package: str, pip: list[str]) -> list[str]:
    """Every final release pip can see for the package (pre-releases are not listed)."""
    proc = subprocess.run([*pip, "index", "versions", package], capture_output=True, text=True)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("Available versions:")),
                None)
    if proc.returncode != 0 or line is None:
        raise HistoryError(f"pip index versions {package} failed: "
                           f"{(proc.stderr.strip().splitlines() or ['no versions'])[-1]}")
    found = [v.strip() for v in line.split(":", 1)[1].split(",")]
    return [v for v in found if FINAL_RELEASE.match(v)]


def select_versions(versions: list[str], since: str | None, until: str | None) -> list[str]:
    """Unique versions from `since` to `until` (inclusive), oldest first."""
    low = release_key(since) if since else None
    high = release_key(until) if until else None
    unique = {release_key(v): v for v in versions}
    return [v for k, v in sorted(unique.items())
            if (low is None or k >= low) and (high is None or k <= high)]


# ---------------------------------------------------------------- wheels

def cached_wheel(cache: Path, package: str, version: str) -> Path | None:
    stem = re.sub(r"[-_.]+", "_", package).lower()    # the name as wheel file names spell it
    hits = sorted(cache.glob(f"{stem}-{version}-*.whl"))
    return hits[0] if hits else None


def fetch_wheel(package: str, version: str, cache: Path, pip: list[str]) -> Path | None:
    """The cached wheel, downloaded first when missing; None (reported) when pip fails."""
    wheel = cached_wheel(cache, package, version)
    if wheel is not None:
        return wheel
    cmd = [*pip, "download", "--no-deps", "--only-binary=:all:", "--quiet", "--dest", str(cache),
           f"{package}=={version}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheel = cached_wheel(cache, package, version)
    if proc.returncode != 0 or wheel is None:
        why = (proc.stderr.strip().splitlines() or ["no wheel written"])[-1]
        print(f"wheel_history: skipped {version}: download failed: {why}", file=sys.stderr)
        return None
    return wheel


def has_package_source(wheel: Path, package: str) -> bool:
    """Whether the wheel holds any of the package's Python files (what graft_wheel commits)."""
    with zipfile.ZipFile(wheel) as archive:
        return any(n.startswith(package + "/") and n.endswith(".py") for n in archive.namelist())


# ---------------------------------------------------------------- the build

@dataclass
class Summary:
    committed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    downloaded_bytes: int = 0
    cached: int = 0


def init_repository(git_dir: Path) -> None:
    if git_dir.exists() and any(git_dir.iterdir()):
        raise HistoryError(f"{git_dir} exists already: remove it or name a new directory "
                           "(cached wheels make a rebuild cheap)")
    proc = subprocess.run(["git", "init", "--bare", "--quiet", "--initial-branch=main",
                           str(git_dir)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise HistoryError(f"git init {git_dir} failed: {proc.stderr.strip()}")


def build(git_dir: Path, package: str, versions: list[str], cache: Path,
          pip: list[str]) -> Summary:
    """Graft each version's wheel in release order; failures are reported and skipped."""
    if package not in ENGINES:
        raise HistoryError(f"no repository layout for {package!r} (engine_survey.ENGINES: "
                           f"{', '.join(sorted(ENGINES))})")
    cache.mkdir(parents=True, exist_ok=True)
    init_repository(git_dir)
    summary, parent = Summary(), None
    for version in select_versions(versions, None, None):
        wheel = _usable_wheel(package, version, cache, pip, summary)
        if wheel is None:
            summary.skipped.append(version)
            continue
        commit = graft_wheel(str(git_dir), package, str(wheel), f"v{version}", parent,
                             root=parent is None)
        subprocess.run(["git", "--git-dir", str(git_dir), "update-ref", "refs/heads/main",
                        commit], check=True)
        parent = f"v{version}"
        summary.committed.append(version)
    return summary


def _usable_wheel(package: str, version: str, cache: Path, pip: list[str],
                  summary: Summary) -> Path | None:
    was_cached = cached_wheel(cache, package, version) is not None
    wheel = fetch_wheel(package, version, cache, pip)
    if wheel is None:
        return None
    if was_cached:
        summary.cached += 1
    else:
        summary.downloaded_bytes += wheel.stat().st_size
    try:
        usable = has_package_source(wheel, package)
    except (zipfile.BadZipFile, OSError) as exc:
        print(f"wheel_history: skipped {version}: unreadable wheel {wheel.name}: {exc}",
              file=sys.stderr)
        return None
    if not usable:
        print(f"wheel_history: skipped {version}: {wheel.name} has no {package}/ source files",
              file=sys.stderr)
        return None
    return wheel


# ---------------------------------------------------------------- command line

def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("git_dir", type=Path, help="bare git directory to create (must not exist)")
    ap.add_argument("package", help=f"the engine ({', '.join(sorted(ENGINES))})")
    ap.add_argument("--versions", nargs="+", help="these releases (default: every final "
                    "release pip lists, within --since / --until)")
    ap.add_argument("--since", help="first release (inclusive)")
    ap.add_argument("--until", help="last release (inclusive)")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/survey/wheels"),
                    help="wheel cache directory (default: /tmp/survey/wheels)")
    ap.add_argument("--pip", default=f"{shlex.quote(sys.executable)} -m pip",
                    help="pip command (default: this Python's pip)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    pip = shlex.split(args.pip)
    started = time.monotonic()
    try:
        listed = args.versions or final_releases(args.package, pip)
        versions = select_versions(listed, args.since, args.until)
        if not versions:
            raise HistoryError("no release selected")
        summary = build(args.git_dir, args.package, versions, args.cache, pip)
    except (HistoryError, SurveyError, EngineSpecError) as exc:
        print(f"wheel_history: {exc}", file=sys.stderr)
        return 2
    print(_report(summary, args.git_dir, time.monotonic() - started))
    return 0 if summary.committed else 1


def _report(summary: Summary, git_dir: Path, seconds: float) -> str:
    span = f" (v{summary.committed[0]} .. v{summary.committed[-1]})" if summary.committed else ""
    lines = [f"{git_dir}: {len(summary.committed)} releases committed{span} in {seconds:.0f} s; "
             f"{summary.downloaded_bytes / 1e6:.1f} MB downloaded, {summary.cached} wheels "
             "from the cache"]
    if summary.skipped:
        lines.append("skipped (see above): " + ", ".join(summary.skipped))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
