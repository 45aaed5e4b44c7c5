"""Tiny flavour packages written into a test's directory, and a registry isolated for them.

`write_package` writes the parts a flavour package holds (``data.py``, ``flavour.py``,
``<name>.c.j2``), each replaceable or left out, so a test can break one part at a time;
`isolated_registry` gives a test a registry that has searched nothing yet, and puts
``sys.path``, ``sys.modules`` and ``PROFBENCH_FLAVOUR_PATH`` back afterwards. Every
package gets a fresh name (`fresh_name`): imported modules and template roots outlive
a test in its worker process.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.agent import flavours
from harness.agent.flavours.discovery import PATH_ENV

_NUMBERS = itertools.count(1)

DATA = """\
from harness.agent.values.info import FlavourInfo, Mutant
from harness.agent.values.layouts import Field, RecordLayout

RECORD = RecordLayout("{name}_rec", "{name}Rec", "one record", (Field("pc", "u64", "the PC"),))
INFO = FlavourInfo(
    name="{name}",
    flavour_id={flavour_id},
    stats=(("x_calls", "producer calls"),),
    stats_percpu=(("x_recorded", "recorded"),),
    quirks=(),
    record=RECORD,
    layouts=(RECORD,),
    mutants=(Mutant("{name}_lose", "loses one", ("OWN",)),),
)
"""

FLAVOUR = """\
from typing import NoReturn

from harness.agent.flavour import Flavour, Judges

from {package}.data import INFO


def _never(*args: object) -> NoReturn:
    raise AssertionError("no unit test runs a flavour")


FLAVOUR = Flavour(
    info=INFO, judges=Judges((), _never, _never, _never, _never, _never),
    standard_run=_never, exact_run=_never, run_script=_never,
)
"""

TEMPLATE = """\
/* {{{{ spec.flavour }}}}: period {{{{ spec.period }}}} */
{{% for name in {name}.stat_names %}}
/* stat {{{{ name }}}} */
{{% endfor %}}
struct pa_flavour pa_flavour_{name} = {{ .name = "{name}" }};
"""


def fresh_name(stem: str = "fl") -> str:
    """A flavour name no other test in this process used."""
    return f"{stem}{next(_NUMBERS)}"


def write_package(
    root: Path,
    name: str,
    *,
    data: str | None = DATA,
    flavour: str | None = FLAVOUR,
    template: str | None = TEMPLATE,
    package: str = "",
) -> Path:
    """Write flavour ``name``'s package under ``root`` (None: leave that part out); its path.

    The package is ``pbt_<name>`` unless ``package`` names it; the texts are formatted
    with ``name``, ``package`` and a flavour id of their own.
    """
    package = package or f"pbt_{name}"
    directory = root / package
    directory.mkdir(parents=True)
    (directory / "__init__.py").write_text(f'"""Flavour {name}, for a unit test."""\n')
    values = {"name": name, "package": package, "flavour_id": 1000 + next(_NUMBERS)}
    parts = {"data.py": data, "flavour.py": flavour, f"{name}.c.j2": template}
    for file, text in parts.items():
        if text is not None:
            (directory / file).write_text(text.format(**values))
    return directory


def write_pyproject(checkout: Path, entries: dict[str, str]) -> Path:
    """A ``pyproject.toml`` in ``checkout`` declaring ``entries`` (name → module)."""
    table = "".join(f'{name} = "{module}"\n' for name, module in entries.items())
    text = f'[project]\nname = "x"\n\n[project.entry-points."profbench.flavours"]\n{table}'
    (checkout / "pyproject.toml").write_text(text)
    return checkout


def write_distribution(site: Path, entries: dict[str, str]) -> Path:
    """An installed distribution's metadata in ``site`` declaring ``entries``, as pip leaves it."""
    distribution = f"pbt_dist{next(_NUMBERS)}"
    info = site / f"{distribution}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1\n")
    table = "".join(f"{name} = {module}\n" for name, module in entries.items())
    (info / "entry_points.txt").write_text(f"[profbench.flavours]\n{table}")
    return site


@pytest.fixture
def isolated_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A registry that has searched nothing yet; path, modules and environment put back.

    Put back whatever the code under test did: ``monkeypatch.delenv`` of a variable
    that was not set records nothing to restore, so the environment is restored here
    from a copy, not through monkeypatch.
    """
    monkeypatch.setattr(flavours, "_OUTSIDE", flavours._Outside())
    environment = dict(os.environ)
    os.environ.pop(PATH_ENV, None)
    monkeypatch.setattr(sys, "path", list(sys.path))
    modules = set(sys.modules)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(environment)
        for module in set(sys.modules) - modules:
            if module.startswith(("pbt_", "profbench_")):  # these packages, scaffolded ones
                del sys.modules[module]
