"""Every document the kit's code, notebooks and README cite exists in the repository: a citation
a user cannot open in a clone is a dead end."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CITED = re.compile(r"(?<![\w/.])((?:docs|tools|benchmarks)/[\w./-]+?\.(?:md|py|json))")


def sources() -> list[Path]:
    return ([p for p in (REPO / "eagle3_nb").rglob("*.py")] + sorted((REPO / "notebooks").glob("*.ipynb"))
            + [REPO / "README.md", REPO / "tools" / "README.md"])


def test_every_cited_document_exists():
    missing = {}
    for path in sources():
        for cited in CITED.findall(path.read_text(encoding="utf-8")):
            if not (REPO / cited).exists():
                missing.setdefault(cited, []).append(path.name)
    assert not missing, missing


def test_nothing_cites_the_team_folder_outside_the_repository():
    for path in sources():
        assert "../shared" not in path.read_text(encoding="utf-8"), path
