"""Spinners that read every CPU's indices and state while a flavour's runs produce.

KCSAN sees a race only when the two sides meet inside a watch's stall
(`harness.vm.kcsan`). A flavour's own reader reads a CPU's ring index only after a
publish woke it, so on its own it almost never overlaps the producer's next store.
The kcsan case (`overlap_case`) runs the flavour's runs with a spinner pinned to every
CPU that reads the module's ``stats_percpu``, ``nmi`` and ``state`` in a loop for the
whole of them: every flavour's ``show_stats_percpu`` reads each CPU's ring indices,
published counts and statistics, ``nmi`` the core's per-CPU counters the NMI raises,
``state`` the flags the control path sets: the reader's side of every pair the port
rests on, against the producers' publishes. KCSAN's
counters are read before and after::

    where = OverlapCase(guest.shell, cpus=(0, 1), budget_s=60)
    runs, watch = overlap_case(where, "dt kcsan", lambda: [run(...) for run in runs])
    watch.describe()      # "KCSAN dt kcsan: 812 watchpoints set, 0 found a racing access..."

Each spinner is a shell loop of profctl processes, each ``cat``-ing the two files
`SPIN_REPEAT` times, until a stop file appears; it writes how many passes it made.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from harness.agent.steps import DEBUGFS, GUEST_DIR
from harness.timeouts import wait_until
from harness.vm.kcsan import (
    KCSAN_DEBUGFS,
    OVERLAP,
    KcsanSettings,
    KcsanWatch,
    parse_kcsan_stats,
)
from harness.vm.shell import CommandShell

T = TypeVar("T")
SPIN_DIR = f"{GUEST_DIR}/spin"
#: The files every spinner reads each pass: each CPU's indices, counts and statistics
#: (the flavour's), the core's per-CPU ground-truth counters (``nmi``), the state flags.
SPIN_FILES = (f"{DEBUGFS}/stats_percpu", f"{DEBUGFS}/nmi", f"{DEBUGFS}/state")
#: Passes one profctl process makes (in-process: no fork between passes).
SPIN_REPEAT = 50


def spinner_script(cpu: int) -> str:
    """Shell commands that write ``cpu``'s spinner and start it, detached (setsid: no nohup).

    profctl's ``exec`` step starts the loop pinned to ``cpu``; the loop's profctl
    processes inherit that mask and never pin themselves, so a run that isolates a CPU
    (moving every user task off it) keeps its spinner off it too, until it restores it.
    """
    out = f"{SPIN_DIR}/{cpu}"
    steps = "\\n".join((f"repeat:{SPIN_REPEAT}:{len(SPIN_FILES)}",
                         *(f"cat:{path}" for path in SPIN_FILES)))  # fmt: skip
    loop = (f"n=0; while [ ! -e {SPIN_DIR}/stop ]; do {GUEST_DIR}/profctl -f {out}.steps "
            f"> /dev/null 2>&1; n=\\$((n+1)); done; echo \\$n > {out}.passes")  # fmt: skip
    return (f"printf '{steps}\\n' > {out}.steps && printf '%s\\n' \"{loop}\" > {out}.sh && "
            f"setsid {GUEST_DIR}/profctl 'exec:{cpu}:{out}.log:/bin/sh {out}.sh' "
            "< /dev/null > /dev/null 2>&1 &")  # fmt: skip


def start_spinners(shell: CommandShell, cpus: tuple[int, ...], budget_s: float) -> None:
    """A spinner on each of ``cpus`` (profctl deployed), running until `stop_spinners`."""
    scripts = " ".join(spinner_script(cpu) for cpu in cpus)  # each ends in '&'
    shell.run(f"rm -rf {SPIN_DIR}; mkdir -p {SPIN_DIR}; {scripts}", timeout_s=budget_s)


def stop_spinners(shell: CommandShell, cpus: tuple[int, ...], budget_s: float) -> int:
    """Stop the spinners; the passes they made, in all (each `SPIN_REPEAT` reads per file).

    Blocks until every spinner wrote its count (its profctl's last pass ended), at most
    ``budget_s`` (each command, and the wait).
    """
    shell.run(f"touch {SPIN_DIR}/stop", timeout_s=budget_s)
    files = " ".join(f"{SPIN_DIR}/{cpu}.passes" for cpu in cpus)

    def counted() -> int | None:
        out = shell.run(f"cat {files} 2>/dev/null", timeout_s=budget_s, check=False).stdout.split()
        return sum(map(int, out)) * SPIN_REPEAT if len(out) == len(cpus) else None

    return wait_until(counted, timeout_s=budget_s, what="the spinners to stop", interval_s=0.5)


def read_kcsan(shell: CommandShell, budget_s: float) -> str:
    """KCSAN's debugfs file as text."""
    return shell.run(f"cat {KCSAN_DEBUGFS}", timeout_s=budget_s).stdout


@dataclass(frozen=True, slots=True)
class OverlapCase:
    """Where an overlap case runs: the guest's shell (profctl deployed), its CPUs, a budget."""

    shell: CommandShell
    cpus: tuple[int, ...]
    budget_s: float  # each guest command's, and the spinners' stop
    settings: KcsanSettings = OVERLAP


def overlap_case(where: OverlapCase, case: str, runs: Callable[[], T]) -> tuple[T, KcsanWatch]:
    """``runs()`` with a spinner on every CPU; its result and what KCSAN did meanwhile.

    KCSAN's knobs are set first (`OverlapCase.settings`); the spinners are stopped
    however ``runs`` ends.
    """
    for command in where.settings.commands():
        where.shell.run(command, timeout_s=where.budget_s)
    before = parse_kcsan_stats(read_kcsan(where.shell, where.budget_s))
    start_spinners(where.shell, where.cpus, where.budget_s)
    try:
        result = runs()
    finally:
        reads = stop_spinners(where.shell, where.cpus, where.budget_s)
    after = parse_kcsan_stats(read_kcsan(where.shell, where.budget_s))
    return result, KcsanWatch(case, where.settings, before.until(after), reads)
