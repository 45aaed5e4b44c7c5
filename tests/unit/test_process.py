"""Logged builds and interrupts: real signals, real children.

Each signal goes to a small Python child that plays the harness (pytest-xdist
runs tests off the main thread, where Python raises no KeyboardInterrupt).
SIGTERM stands in for Ctrl-C: the harness raises both as KeyboardInterrupt.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.process import beside, run_logged
from tests.guest.procs import process_gone

REPO = Path(__file__).resolve().parents[2]


def harness_child(code: str) -> subprocess.Popen[str]:
    """A Python child with the harness's SIGTERM handling, running ``code``."""
    prologue = (
        "import os, signal, sys, time\nfrom pathlib import Path\n"
        "from harness import process\nprocess.handle_sigterm()\n"
    )
    return subprocess.Popen([sys.executable, "-c", prologue + textwrap.dedent(code)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def sleeper(pidfile: Path) -> str:
    """A shell script that starts a long sleep and writes its pid to ``pidfile``."""
    return f"sleep 300 & echo $! > {pidfile}.tmp && mv {pidfile}.tmp {pidfile}; wait"


def interrupt_once_started(child: subprocess.Popen[str], pidfile: Path) -> tuple[list[str], str]:
    """SIGTERM ``child`` once its build wrote ``pidfile``: its stdout lines and its stderr.

    Then waits until the sleeper ``pidfile`` names is gone, and fails if it outlives that.
    """
    try:
        deadline = time.monotonic() + 30
        while not pidfile.exists():
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "the build never started its child"
            time.sleep(0.02)
        child.send_signal(signal.SIGTERM)
        out, err = child.communicate(timeout=30)  # a harness that waited would take 300 s
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while not process_gone(grandchild) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert process_gone(grandchild), "the build's child outlived the interrupt"
    return out.splitlines(), err


def test_an_interrupt_while_held_arrives_at_release() -> None:
    child = harness_child("""
        with process._interrupts_held() as release:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)  # a SIGTERM delivered now would end the child here
            print("held", flush=True)
            try:
                release()
                time.sleep(10)  # the held signal is raised by release() or, at the latest, here
            except process.Terminated:
                print("raised at release", flush=True)
    """)
    out, err = child.communicate(timeout=30)
    assert out.splitlines() == ["held", "raised at release"], err


def test_a_logged_command_holds_no_signal_of_ours(tmp_path: Path) -> None:
    log = tmp_path / "status.log"
    run_logged(["grep", "^SigBlk", "/proc/self/status"], log=log, what="grep")
    blocked = int(log.read_text().split("SigBlk:")[1].split()[0], 16)
    for signum in (signal.SIGINT, signal.SIGTERM):
        assert not blocked & (1 << (signum - 1)), f"{signum.name} blocked in the child"


def test_an_interrupt_kills_the_command_and_its_children(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    child = harness_child(f"""
        try:
            process.run_logged(["sh", "-c", {sleeper(pidfile)!r}],
                               log=Path({str(tmp_path)!r}) / "log", what="sleeper", timeout_s=60)
        except process.Terminated:
            print("interrupted", flush=True)
    """)
    out, err = interrupt_once_started(child, pidfile)
    assert out == ["interrupted"], err


def test_an_interrupt_stops_a_build_pool_and_what_it_had_queued(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    queued = tmp_path / "queued-build-ran"
    child = harness_child(f"""
        def build(script):
            process.run_logged(["sh", "-c", script], log=Path({str(tmp_path)!r}) / "log",
                               what="build", timeout_s=60)
        try:
            with process.build_pool(1) as pool:
                list(pool.map(build, [{sleeper(pidfile)!r}, "touch {queued}"]))
        except process.Terminated:
            print("interrupted", flush=True)
    """)
    out, err = interrupt_once_started(child, pidfile)
    assert out == ["interrupted"], err
    assert not queued.exists(), "a build queued behind the interrupt still ran"


def test_a_command_beside_runs_at_idle_priority_and_finish_gives_its_status(
    tmp_path: Path,
) -> None:
    log = tmp_path / "beside.log"
    code = "import os; print(os.sched_getscheduler(0)); raise SystemExit(3)"
    with beside([sys.executable, "-c", code], log=log, what="probe") as finish:
        assert finish() == 3
    assert log.read_text().split() == [str(os.SCHED_IDLE)]


def test_leaving_the_block_early_stops_the_command_beside(tmp_path: Path) -> None:
    log = tmp_path / "beside.log"
    code = "import os, time; print(os.getpid(), flush=True); time.sleep(600)"
    pids: list[int] = []

    def interrupted_block() -> None:
        with beside([sys.executable, "-c", code], log=log, what="sleeper"):
            pids.append(_first_line_number(log))
            raise KeyboardInterrupt  # Ctrl-C in the block

    with pytest.raises(KeyboardInterrupt):
        interrupted_block()
    assert pids
    assert process_gone(pids[0])


def _first_line_number(log: Path, timeout_s: float = 30.0) -> int:
    deadline = time.monotonic() + timeout_s
    while not log.read_text().strip():
        assert time.monotonic() < deadline, f"{log} stayed empty for {timeout_s} s"
        time.sleep(0.05)
    return int(log.read_text().split()[0])
