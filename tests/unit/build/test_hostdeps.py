from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import NoReturn

import pytest

from harness.builder import hostdeps
from harness.builder.hostdeps import Requirement, ensure_host
from harness.errors import HostSetupError

MISSING = Requirement("profbench-no-such-program", "profbench-fake-package")


def no_subprocess(*args: object, **kwargs: object) -> NoReturn:
    pytest.fail(f"apt must not run: {args}")


@pytest.fixture(autouse=True)
def _never_run_apt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subprocess, "run", no_subprocess)


def only(monkeypatch: pytest.MonkeyPatch, *reqs: Requirement) -> None:
    monkeypatch.setattr(hostdeps, "requirements", lambda: reqs)


def test_missing_program_without_install_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    only(monkeypatch, Requirement("sh", "dash"), MISSING)
    with pytest.raises(HostSetupError) as caught:
        ensure_host(install=False)
    text = str(caught.value)
    assert caught.value.missing == ("profbench-no-such-program",)
    assert "apt-get install -y --no-install-recommends profbench-fake-package" in text


def test_missing_file_requirement(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    header = tmp_path / "include" / "libelf.h"
    only(monkeypatch, Requirement(str(header), "libelf-dev"))
    with pytest.raises(HostSetupError, match="libelf-dev"):
        ensure_host(install=False)


def test_everything_present_is_an_empty_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    header = tmp_path / "ssl.h"
    header.touch()
    present = (Requirement("sh", "dash"), Requirement(str(header), "libssl-dev"))
    only(monkeypatch, *present)
    looked_at: list[str] = []
    check = Requirement.present

    def counted(req: Requirement) -> bool:
        looked_at.append(req.what)
        return check(req)

    monkeypatch.setattr(Requirement, "present", counted)
    report = ensure_host(install=True)
    assert (report.missing_before, report.installed) == ((), ())
    # The fast path: one look at PATH or the file per requirement, and no apt
    # (`_never_run_apt` fails the test on any subprocess.run).
    assert looked_at == [req.what for req in present]


def test_non_root_cannot_install(monkeypatch: pytest.MonkeyPatch) -> None:
    only(monkeypatch, MISSING)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(HostSetupError, match="as root run: apt-get update"):
        ensure_host(install=True)


def test_each_package_named_once_and_sorted(monkeypatch: pytest.MonkeyPatch) -> None:
    only(
        monkeypatch,
        Requirement("profbench-missing-b", "zz-pkg"),
        Requirement("profbench-missing-a", "aa-pkg"),
        Requirement("profbench-missing-c", "zz-pkg"),
    )
    with pytest.raises(HostSetupError) as caught:
        ensure_host(install=False)
    assert caught.value.fix.endswith("--no-install-recommends aa-pkg zz-pkg")


def test_real_requirements_cover_both_arches() -> None:
    programs = {req.what for req in hostdeps.requirements()}
    assert {"qemu-system-aarch64", "qemu-system-x86_64", "aarch64-linux-gnu-gcc"} <= programs
