"""Kconfig fragments: parse, merge, and verify that they survived (pure).

Fragments are ``CONFIG_FOO=y`` / ``# CONFIG_FOO is not set`` lines. The kernel
build applies the merged fragments on top of ``tinyconfig``, runs
``olddefconfig``, then `verify` names every requested option that Kconfig
dropped or changed (a missing dependency, a symbol this arch lacks)::

    wanted = merge_fragments([("base.config", text1), ("arm64/arch.config", text2)])
    problems = verify(wanted.options, Path(".config").read_text())
    # ['CONFIG_ARM64_PSEUDO_NMI: requested y, olddefconfig left it unset']
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from harness.errors import ConfigError

_SET = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
_UNSET = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$")
NOT_SET = "n"


def parse_config(text: str, *, source: str = "<config>") -> dict[str, str]:
    """Map each option to its value; ``# ... is not set`` becomes ``"n"``.

    :raise ConfigError: a line that is neither an option, a comment nor blank.
    """
    options: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if match := _SET.match(line):
            options[match[1]] = match[2]
        elif match := _UNSET.match(line):
            options[match[1]] = NOT_SET
        elif line and not line.startswith("#"):
            raise ConfigError(f"{source}:{number}: not a Kconfig line: {raw!r}")
    return options


@dataclass(frozen=True, slots=True)
class MergedConfig:
    """Merged fragment options, and which fragment overrode which value."""

    options: tuple[tuple[str, str], ...]
    overrides: tuple[str, ...]

    def as_text(self) -> str:
        """The merged fragment as ``.config`` lines."""
        return "".join(_line(name, value) + "\n" for name, value in self.options)


def merge_fragments(fragments: Iterable[tuple[str, str]]) -> MergedConfig:
    """Merge ``(name, text)`` fragments in order; later ones win, overrides are noted."""
    merged: dict[str, str] = {}
    origin: dict[str, str] = {}
    overrides: list[str] = []
    for name, text in fragments:
        for option, value in parse_config(text, source=name).items():
            if option in merged and merged[option] != value:
                overrides.append(
                    f"{option}: {origin[option]} sets {merged[option]}, {name} sets {value}"
                )
            merged[option] = value
            origin[option] = name
    return MergedConfig(tuple(sorted(merged.items())), tuple(overrides))


def apply_fragment(base_config: str, merged: MergedConfig) -> str:
    """Return ``base_config`` with every merged option set, replacing earlier lines."""
    wanted = dict(merged.options)
    kept = []
    for line in base_config.splitlines():
        match = _SET.match(line.strip()) or _UNSET.match(line.strip())
        if match is None or match[1] not in wanted:
            kept.append(line)
    return "\n".join(kept) + "\n" + merged.as_text()


def verify(requested: Iterable[tuple[str, str]], final_config: str) -> list[str]:
    """Name each requested option whose value the final ``.config`` does not have."""
    final: Mapping[str, str] = parse_config(final_config, source=".config")
    problems = []
    for option, value in requested:
        got = final.get(option, NOT_SET)
        if got != value:
            shown = "unset" if got == NOT_SET else got
            problems.append(f"{option}: requested {value}, olddefconfig left it {shown}")
    return problems


def _line(option: str, value: str) -> str:
    return f"# {option} is not set" if value == NOT_SET else f"{option}={value}"
