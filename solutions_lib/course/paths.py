"""Where the course lives on disk."""
from __future__ import annotations

import os
from pathlib import Path


def course_root() -> Path:
    """The course root: $TAS_COURSE_ROOT if set, else the repository holding this package.

    The self-check needs the instructor's source notebooks (they carry the hidden tests),
    so it works from a clone of the course repository (an editable install, the README path).
    """
    env = os.environ.get("TAS_COURSE_ROOT")
    root = Path(env) if env else Path(__file__).resolve().parents[2]
    if not (root / "nbgrader_config.py").is_file() or not (root / "source").is_dir():
        raise FileNotFoundError(
            f"no course found at {root}: expected nbgrader_config.py and source/ there. "
            "Run from a clone of the course repository or set TAS_COURSE_ROOT."
        )
    return root


def assignments(root: Path | None = None) -> list[str]:
    """Assignment folder names under source/, in course order."""
    root = root or course_root()
    return sorted(p.name for p in (root / "source").iterdir() if p.is_dir() and not p.name.startswith("."))


def source_notebooks(root: Path | None = None) -> list[Path]:
    """Every source notebook, in course order."""
    root = root or course_root()
    out = []
    for a in assignments(root):
        out += sorted(p for p in (root / "source" / a).glob("*.ipynb"))
    return out
