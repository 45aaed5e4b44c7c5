"""Read a TOML file for a loader, with the file named in every error.

::

    raw = read_toml(path, "scenario")     # ConfigError: "<path>: not valid TOML: ..."
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from harness.errors import ConfigError


def read_toml(path: Path, what: str) -> dict[str, object]:
    """The parsed table of ``path`` (a ``what`` file: "matrix", "scenario").

    :raise ConfigError: the file cannot be read or is not valid TOML.
    """
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the {what} file: {exc.strerror}") from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
