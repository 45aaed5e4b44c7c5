"""``invoke new-flavour NAME --out DIR``: a working flavour package to start a port from.

The package is profbench's ``scaffold/`` directory, a flavour called ``skel`` that the
bench's own checks keep working (ruff, mypy, and a unit test that scaffolds it, renders
it and runs its tests). A copy is that directory with every ``skel``, ``Skel`` and
``SKEL`` (in names and in text) turned into the new name in the same case::

    made = new_flavour("myport", Path("/src/myport"))
    made.package                 # 'profbench_myport'
    made.files                   # pyproject.toml, README.md, profbench_myport/..., tests/...

Every file says it was generated (its first line) and that it is the user's to edit.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass
from pathlib import Path

from harness.agent import flavours
from harness.agent.flavours.discovery import NAME_PATTERN
from harness.errors import ConfigError
from harness.paths import REPO_ROOT

SCAFFOLD_DIR = REPO_ROOT / "scaffold"
#: The scaffold's own flavour name, replaced in every file name and text.
STEM = "skel"
_SKIPPED = ("__pycache__", ".pyc", ".mypy_cache", ".pytest_cache", ".ruff_cache")


@dataclass(frozen=True, slots=True)
class Scaffolded:
    """A new flavour package: where it is, its import name, and what was written."""

    name: str
    out: Path
    package: str
    files: tuple[Path, ...]


def spellings(name: str) -> dict[str, str]:
    """The scaffold's spellings of its own name → this name's: ``SKEL``, ``Skel``, ``skel``."""
    camel = "".join(part.capitalize() for part in name.split("_"))
    return {STEM.upper(): name.upper(), STEM.capitalize(): camel, STEM: name}


def new_flavour(name: str, out: Path) -> Scaffolded:
    """Write flavour ``name``'s package into ``out`` (a new or empty directory).

    :raise ConfigError: ``name`` cannot be a flavour's (or is an in-tree one's), or
        ``out`` holds files already.
    """
    check_name(name)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out}: not an empty directory; new-flavour writes a new one")
    names = spellings(name)
    written = []
    for source in sorted(SCAFFOLD_DIR.rglob("*")):
        relative = source.relative_to(SCAFFOLD_DIR)
        if source.is_dir() or any(part in str(relative) for part in _SKIPPED):
            continue
        target = out / _renamed(str(relative), names)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_renamed(source.read_text(), names))
        written.append(target)
    return Scaffolded(name, out, f"profbench_{name}", tuple(written))


def check_name(name: str) -> None:
    """:raise ConfigError: ``name`` is not a usable flavour name, or an in-tree flavour's."""
    if not NAME_PATTERN.match(name) or keyword.iskeyword(name) or name in ("true", "false", "none"):
        raise ConfigError(
            f"flavour name {name!r}: lower-case letters, digits and _, at most 32, a letter "
            "first, and not a Python keyword (it names a C symbol, a module and a parameter)"
        )
    if name in flavours.FLAVOURS:
        raise ConfigError(f"flavour name {name!r} is an in-tree flavour's: choose another")


def _renamed(text: str, names: dict[str, str]) -> str:
    for old, new in names.items():
        text = text.replace(old, new)
    return text
