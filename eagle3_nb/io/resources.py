"""Where the kit's own files are: the notebooks and the bundled samples ship inside the package
(eagle3_nb/notebooks, eagle3_nb/data_samples; in a checkout, links to the top-level folders), so
an installed kit finds them wherever it was installed and whatever the working directory."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from eagle3_nb.errors import Eagle3NbError


def notebooks_dir() -> Path:
    return _packaged("notebooks")


def samples_dir() -> Path:
    return _packaged("data_samples")


def _packaged(name: str) -> Path:
    path = Path(str(resources.files("eagle3_nb") / name)).resolve()
    if not path.is_dir():
        raise Eagle3NbError(f"the kit's {name} are missing from its installation", str(path),
                            "reinstall eagle3_nb (pip install .), or in a checkout run "
                            "`make samples`")
    return path
