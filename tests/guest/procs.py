"""Process checks shared by the guest tier: host processes, the guest's profctl spins and
its kernel log.

A test that signals a child starts it through `as_if_typed`, so the signal does what it
does at a terminal whatever this runner inherited; a test that looks for a kernel message
reads only what was printed after its own `dmesg_mark`::

    holder = subprocess.Popen(as_if_typed([sys.executable, "-m", "tests.guest.hold_guest"]))
    mark = dmesg_mark(shell)
    ...                                   # what should print the message
    assert "profagent: unloaded" in dmesg_since(shell, mark)
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.vm.shell import CommandShell

#: The signals the tests send to children they start (SIGKILL cannot be ignored or blocked).
SIGNALS_SENT = (signal.SIGINT, signal.SIGTERM)


def process_gone(pid: int) -> bool:
    """True once ``pid`` no longer runs (exited and reaped, or a zombie about to be)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def qemu_children(parent: int) -> list[int]:
    """PIDs of running QEMU processes whose parent is ``parent`` (ours, never others')."""
    found = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            stat = stat_file.read_text()
        except OSError:  # gone meanwhile
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        if name.startswith("qemu-system") and int(fields[1]) == parent and fields[0] != "Z":
            found.append(int(stat_file.parent.name))
    return found


def kill_spins(pidfile: str) -> str:
    """A guest shell command: kill the spin children whose ``pid=`` profctl printed to
    ``pidfile`` (``profctl spin:CPU:MS ... > pidfile``)."""
    return f"kill $(sed -n 's/.* pid=\\([0-9]*\\).*/\\1/p' {pidfile})"


def as_if_typed(argv: Sequence[str]) -> list[str]:
    """``argv`` run with `SIGNALS_SENT` at their defaults and unblocked, as at a terminal.

    A runner started in the background of a non-interactive shell (``nohup .ci/run &``,
    as a scheduler may) has SIGINT ignored; its children inherit that, and Python then
    installs no KeyboardInterrupt handler, so a SIGINT the test sends does nothing. A
    small Python prologue resets the dispositions and the mask, then execs ``argv``.
    """
    numbers = ", ".join(str(int(signum)) for signum in SIGNALS_SENT)
    prologue = (
        "import os, signal, sys\n"
        f"for signum in ({numbers},):\n"
        "    signal.signal(signum, signal.SIG_DFL)\n"
        f"signal.pthread_sigmask(signal.SIG_UNBLOCK, ({numbers},))\n"
        "os.execvp(sys.argv[1], sys.argv[1:])\n"
    )
    return [sys.executable, "-c", prologue, *argv]


def dmesg_mark(shell: CommandShell) -> str:
    """The guest kernel log's last line now: where `dmesg_since` starts reading."""
    lines = shell.run("dmesg | tail -n 1").stdout.splitlines()
    return lines[-1] if lines else ""


def dmesg_since(shell: CommandShell, mark: str) -> list[str]:
    """The guest kernel log's lines printed after ``mark`` (from `dmesg_mark`).

    Every line starts with its printk time (``CONFIG_PRINTK_TIME``, guest/kconfig), so
    the mark's text is not printed again. A mark no longer in the log was overwritten
    (the ring wrapped): then every line still there came after it.
    """
    lines = shell.run("dmesg").stdout.splitlines()
    if mark not in lines:
        return lines
    return lines[len(lines) - lines[::-1].index(mark) :]
