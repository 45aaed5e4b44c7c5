"""``pip install -e DIR``: a scaffolded flavour found through its entry point, no path named.

The other route (``--flavour-path``) and a hand-written ``dist-info`` are the unit
tier's (``tests/unit/agent/test_discovery.py``); here pip itself installs `invoke
new-flavour`'s package, editable, into a throwaway venv, and a child of that venv's
Python finds it as the bench does (`harness.agent.flavours`,
`harness.agent.external.check_outside`), with no ``--flavour-path`` and no
``PROFBENCH_FLAVOUR_PATH``. The venv sees this interpreter's packages (a ``.pth`` file:
the bench's environment, which a user installs into) and this checkout ahead of them.

pip builds the editable wheel without build isolation where the venv can (setuptools
70.1 or later, or setuptools 64 with ``wheel``: no index needed); otherwise in an
isolated environment that fetches setuptools from the index: 15 to 57 s measured on a
busy 2-core host with PyPI, too slow for the unit tier, so it is a self-check of the
guest tier's (it boots nothing): `invoke ci` and ``invoke test --selftests`` run it,
the default ``invoke test`` does not. Where no index answers, it skips saying so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from harness.agent.scaffold import new_flavour
from harness.paths import REPO_ROOT

pytestmark = pytest.mark.selftest  # no guest: the harness's discovery, through pip

#: What the venv's child prints: the outside flavours, and where the registry found them.
FIND = """\
import json
from harness.agent import flavours
from harness.agent.external import check_outside
check_outside()
found = flavours.outside()
print(json.dumps({"outside": found, "origins": [flavours.package(n).origin for n in found],
                  "paths": [str(p) for p in flavours.flavour_paths()]}))
"""
#: Whether the venv can build an editable wheel with what it has (no index).
OFFLINE = """\
import importlib.util, setuptools
major, minor = (int(part) for part in setuptools.__version__.split(".")[:2])
wheel = importlib.util.find_spec("wheel") is not None
print((major, minor) >= (70, 1) or ((major, minor) >= (64, 0) and wheel))
"""
#: pip's words when no index gave it the build backend (no network, no mirror).
UNREACHABLE = "No matching distribution found for setuptools"


def _venv(root: Path) -> Path:
    """A venv at ``root`` seeing this interpreter's packages after its own; its Python."""
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                    str(root)], check=True, timeout=120)  # fmt: skip
    python = root / "bin" / "python"
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = subprocess.run([python, "-c", where], check=True, capture_output=True, text=True,
                          timeout=60).stdout.strip()  # fmt: skip
    (Path(site) / "bench-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def _pip_install(python: Path, directory: Path) -> subprocess.CompletedProcess[str]:
    """``pip install --no-deps -e directory`` into ``python``'s venv (this pip, its target)."""
    offline = subprocess.run([python, "-c", OFFLINE], check=True, capture_output=True,
                             text=True, timeout=60).stdout.strip() == "True"  # fmt: skip
    isolation = ["--no-build-isolation"] if offline else []
    argv = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
            "--disable-pip-version-check", *isolation, "-e", str(directory)]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.limit_s(600)  # a venv, and pip perhaps fetching setuptools: see the docstring
def test_pip_install_e_makes_the_flavour_found_through_its_entry_point(tmp_path: Path) -> None:
    made = new_flavour("pipped", tmp_path / "checkout")
    python = _venv(tmp_path / "venv")
    installed = _pip_install(python, made.out)
    if installed.returncode != 0 and UNREACHABLE in installed.stdout + installed.stderr:
        pytest.skip(f"pip could not fetch the scaffold's build backend ({UNREACHABLE}): "
                    "with an index, `invoke test --selftests -k test_pip_install`")  # fmt: skip
    assert installed.returncode == 0, installed.stdout + installed.stderr
    env = {key: value for key, value in os.environ.items() if key != "PROFBENCH_FLAVOUR_PATH"}
    env["PYTHONPATH"] = str(REPO_ROOT)  # this checkout's harness, not an installed one
    found = subprocess.run([python, "-c", FIND], capture_output=True, text=True, env=env,
                           cwd=tmp_path, timeout=120, check=False)  # fmt: skip
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout) == {
        "outside": ["pipped"],
        "origins": ["entry point profbench.flavours:pipped"],
        "paths": [],  # no --flavour-path, no PROFBENCH_FLAVOUR_PATH: pip's entry point alone
    }
