"""The workload model's numbers, measured: the truth binary run under QEMU's user mode.

``qemu-aarch64 -singlestep -d nochain,exec`` logs one ``Trace`` line per instruction
the program executes in user mode, and ``-strace`` one line per system call: exact
counts of what the model (`harness.agent.truth.program`) bounds, measured on the binary this
tree builds, independently of any agent.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness import arches
from harness.agent.truth import program
from harness.agent.truth.build import compile_truth
from harness.process import tool_version

QEMU_USER = "qemu-aarch64"


@pytest.fixture(scope="module")
def binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    compiler = f"{arches.get('arm64').cross_compile}gcc"
    if not tool_version(compiler):
        pytest.skip(f"{compiler} is not installed (`invoke setup`)")
    if not tool_version(QEMU_USER):
        pytest.skip(f"{QEMU_USER} is not installed (`invoke setup` installs qemu-user)")
    return compile_truth(tmp_path_factory.mktemp("model"), compiler, timeout_s=120)


def _instructions(binary: Path, tmp_path: Path, *args: str) -> int:
    log = tmp_path / "trace.log"
    argv = [QEMU_USER, "-singlestep", "-d", "nochain,exec", "-D", str(log), str(binary), *args]
    subprocess.run(argv, check=True, capture_output=True, timeout=120)
    with log.open(encoding="utf-8", errors="replace") as lines:
        return sum(1 for line in lines if line.startswith("Trace"))


def _syscalls(binary: Path, *args: str) -> int:
    argv = [QEMU_USER, "-strace", str(binary), *args]
    done = subprocess.run(argv, check=True, capture_output=True, text=True, timeout=120)
    return sum(1 for line in done.stderr.splitlines() if line.split(" ", 1)[0].isdigit())


@pytest.mark.parametrize("mode", ["chain", "mix"])
def test_a_life_without_a_phase_fits_the_bounds_of_an_untimed_population(
    binary: Path, tmp_path: Path, mode: str
) -> None:
    """Start-up, the worker thread and exit: within LIFE_INSNS and LIFE_SYSCALLS.

    profctl's child before exec adds at most a few hundred instructions and 4 calls
    (setaffinity, open, dup2, execve), which the bounds leave room for.
    """
    insns = _instructions(binary, tmp_path, mode, "0", "0")
    assert 0 < insns <= program.LIFE_INSNS - 2_000
    assert 0 < _syscalls(binary, mode, "0", "0") <= program.LIFE_SYSCALLS[mode] - 4
