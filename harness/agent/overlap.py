"""Spinners that read every CPU's indices and state while a flavour's runs produce.

KCSAN sees a race only when the two sides meet inside a watch's stall
(`harness.vm.kcsan`). A flavour's own reader reads a CPU's ring index only after a
publish woke it, so on its own it almost never overlaps the producer's next store.
The overlap watch (`overlap_watch`) runs the flavour's runs with a spinner for every CPU
that reads, in a loop for the whole of them, what the module's ``stats_percpu``, ``nmi``
and ``state`` show: every flavour's ``show_stats_percpu`` reads each CPU's ring
indices, published counts and statistics, ``nmi`` the core's per-CPU counters the NMI
raises, ``state`` the flags the control path sets: the reader's side of every pair the
port rests on, against the producers' publishes. KCSAN's
counters are read before and after::

    where = WatchSetup(guest.shell, cpus=(0, 1), budget_s=60)
    runs, watch = overlap_watch(where, "dt kcsan", lambda: [run(...) for run in runs])
    watch.describe()      # "KCSAN dt kcsan: 812 watchpoints set, 0 found a racing access..."

Each spinner is a shell loop of profctl processes, each writing the module's spinner
hook (`SPIN_HOOK`) `SPIN_REPEAT` times, until a stop file appears; it writes how many
processes' writes all succeeded. An
open debugfs file holds the module, so the agent's unload pauses them
(`unload_command`).

Each declared pair (`declared_pairs`) is held to the model over the watch
(`pair_covers`); a pair not met has its drive repeated (`harness.agent.rarerounds`).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from harness.agent.runner import AgentRun
from harness.agent.steps import DEBUGFS, GUEST_DIR
from harness.agent.values.stress import RacePair, RareWriters
from harness.errors import HarnessError
from harness.timeouts import wait_until
from harness.vm.kcsan import (
    KCSAN_DEBUGFS,
    OVERLAP,
    READ_SETTINGS,
    KcsanSettings,
    KcsanWatch,
    PairCover,
    co_scheduled,
    pair_cover,
    parse_kcsan_stats,
    parse_settings,
    reads_meeting,
)
from harness.vm.shell import CommandShell

T = TypeVar("T")
SPIN_DIR = f"{GUEST_DIR}/spin"
#: The module's spinner hook: ``count=N`` reads, N times in the kernel, what the stats
#: files show (each CPU's indices, counts and statistics through the flavour's
#: show_stats_percpu, the core's per-CPU ground-truth counters as ``nmi``, the state
#: flags as ``state``). Measured under KCSAN: one cat of those three files a pass made
#: about 30 passes a second a spinner, too few to meet a producer's store (the model).
SPIN_HOOK = f"{DEBUGFS}/spin"
#: Passes one write of the hook makes. A spinner looks at `SPIN_PAUSE` only between its
#: profctl processes (`SPIN_REPEAT` writes each), so these bound how long an unload
#: waits for it: at 200, hwpmc's overlap watch on 8 vCPUs, with the host's two cores also
#: running a CI tier, held the module past the 20 s wait (rmmod: EAGAIN). kprof's watch
#: in that run made 8000 passes with 2 spinners over about 56 s of runs, some 14 ms a
#: pass: a process of 5 x 200 passes took about 14 s, more on a loaded host. At 20 the
#: same hwpmc watch made 3000 passes, not 6000 (a profctl started for every 100); at 50 a
#: process takes about 3.5 s, inside `UNLOAD_WAIT_S` even at a sixth of that pace.
SPIN_COUNT = 50
#: How long `unload_command` retries rmmod while a spinner still holds the module.
UNLOAD_WAIT_S = 60
#: The kcsan overlap run of a flavour (its ``overlap`` run): the PMU's period, in cycles
#: (QEMU's 1 GHz: 250 us, 4000 producer calls a second a CPU where none fold), and how
#: long every CPU samples with no busy loop: the spinners have the CPUs to themselves,
#: and TCG's cycle counter runs on idle vCPUs too. At skip_watch 100 and a 100 us stall
#: in NMI a producer's store is watched 2n/100 times, each met by a spinner reading its
#: address at r a second with probability r x 50 us: about 0.002 r n (model in
#: harness.vm.kcsan). In dt's and tprof's standard runs the spinners shared the vCPUs
#: with a busy loop each and met the producers only in its 1 s: plain_ring_index
#: survived there (52000 spinner passes, 248301 watchpoints, 0 races).
OVERLAP_PERIOD = 250_000
#: The name of that run among a flavour's runs: the overlap watch's own, no scenario's.
OVERLAP_RUN = "overlap"
OVERLAP_MS = 5000
#: The spinners' own copy of profctl: each run deploys profctl again, and a binary being
#: executed cannot be overwritten (SFTP: "Failure", ETXTBSY).
SPIN_PROFCTL = f"{SPIN_DIR}/profctl"
#: Writes of the hook one profctl process makes (no fork between them): few, so a
#: spinner sees `SPIN_PAUSE` soon.
SPIN_REPEAT = 5
#: While this file exists the spinners open nothing of the module (`unload_command`).
SPIN_PAUSE = f"{GUEST_DIR}/spin-pause"
#: 0.1 s where busybox's sleep takes fractions, else 1 s.
SHORT_SLEEP = "sleep 0.1 2>/dev/null || sleep 1"


def spinner_script(index: int) -> str:
    """Shell commands that write spinner ``index`` and start it, detached (setsid: no nohup).

    Not pinned: one spinner a CPU, placed by the scheduler beside the runs' pinned busy
    loops; a run that isolates a CPU (moving every user task off it) can move them, and
    a task pinned to that one CPU could not be moved. While `SPIN_PAUSE` exists the
    spinner opens no file of the module, so that it can be unloaded (`pause_command`).
    """
    out = f"{SPIN_DIR}/{index}"
    steps = f"repeat:{SPIN_REPEAT}:1\\nwrite:{SPIN_HOOK}:count={SPIN_COUNT}"
    # Counted only when every write of the process succeeded (the module was loaded).
    loop = (f"n=0; while [ ! -e {SPIN_DIR}/stop ]; do if [ -e {SPIN_PAUSE} ]; then "
            f"{SHORT_SLEEP}; continue; fi; o=\\$({SPIN_PROFCTL} -f {out}.steps 2>&1); "
            f"case \\$o in *failed=0*ok=1*) n=\\$((n+1));; esac; done; "
            f"echo \\$n > {out}.passes")  # fmt: skip
    return (f"printf '{steps}\\n' > {out}.steps && printf '%s\\n' \"{loop}\" > {out}.sh && "
            f"setsid /bin/sh {out}.sh < /dev/null > /dev/null 2>&1 &")  # fmt: skip


def unload_command(module: str) -> str:
    """``rmmod module`` while spinners may hold its debugfs files open (each open holds it).

    Pauses the spinners, retries until their last open closed (`UNLOAD_WAIT_S`), then
    lets them go on; exits with rmmod's status. Harmless where no spinner runs.
    """
    return (f"touch {SPIN_PAUSE}; i=0; until rmmod {module} 2>/dev/null; do i=$((i+1)); "
            f"if [ $i -ge {UNLOAD_WAIT_S * 10} ]; then rmmod {module}; s=$?; rm -f {SPIN_PAUSE}; "
            "exit $s; fi; "
            f"{SHORT_SLEEP}; done; rm -f {SPIN_PAUSE}")  # fmt: skip


#: Unload the agent if it is loaded (spinners may hold it: `unload_command`).
UNLOAD_IF_LOADED = f"if grep -q '^profagent ' /proc/modules; then {unload_command('profagent')}; fi"


def spinner_count(cpus: tuple[int, ...]) -> int:
    """Spinners for ``cpus``: one a vCPU, at most one a host core.

    Two vCPUs meet only while both their threads hold a host core, so spinners beyond
    the host's cores add no meeting, only load: an 8-vCPU kcsan guest with 8 spinners on
    2 host cores lost its SSH connection in tprof's and dt's first runs (no report, no
    panic on its console).
    """
    return max(1, min(len(cpus), os.cpu_count() or 1))


def start_spinners(shell: CommandShell, cpus: tuple[int, ...], budget_s: float) -> None:
    """`spinner_count` spinners (profctl deployed), running until `stop_spinners`."""
    scripts = " ".join(spinner_script(index) for index in range(spinner_count(cpus)))
    shell.run(f"rm -rf {SPIN_DIR} {SPIN_PAUSE}; mkdir -p {SPIN_DIR}; "
              f"cp {GUEST_DIR}/profctl {SPIN_PROFCTL}; {scripts}", timeout_s=budget_s)  # fmt: skip


def stop_spinners(shell: CommandShell, cpus: tuple[int, ...], budget_s: float) -> int:
    """Stop the spinners; the passes they made while the module was loaded, in all.

    Blocks until every spinner wrote its count (its profctl's last pass ended), at most
    ``budget_s`` (each command, and the wait).
    """
    shell.run(f"touch {SPIN_DIR}/stop", timeout_s=budget_s)
    files = " ".join(f"{SPIN_DIR}/{index}.passes" for index in range(spinner_count(cpus)))

    def counted() -> int | None:
        out = shell.run(f"cat {files} 2>/dev/null", timeout_s=budget_s, check=False).stdout.split()
        done = len(out) == spinner_count(cpus)
        return sum(map(int, out)) * SPIN_REPEAT * SPIN_COUNT if done else None

    return wait_until(counted, timeout_s=budget_s, what="the spinners to stop", interval_s=0.5)


def read_kcsan(shell: CommandShell, budget_s: float) -> str:
    """KCSAN's debugfs file as text."""
    return shell.run(f"cat {KCSAN_DEBUGFS}", timeout_s=budget_s).stdout


@dataclass(frozen=True, slots=True)
class WatchSetup:
    """Where an overlap watch runs: the guest's shell (profctl deployed), its CPUs, a budget."""

    shell: CommandShell
    cpus: tuple[int, ...]
    budget_s: float  # each guest command's, and the spinners' stop
    settings: KcsanSettings = OVERLAP


def overlap_watch(where: WatchSetup, title: str, runs: Callable[[], T]) -> tuple[T, KcsanWatch]:
    """``runs()`` with a spinner on every CPU; its result and what KCSAN did meanwhile.

    KCSAN's knobs are set first (`WatchSetup.settings`) and put back as they were after,
    however ``runs`` ends: nothing outlives the watch (a rare-writer round's stalls are
    not the next case's). The spinners are stopped however ``runs`` ends.
    """
    saved = parse_settings(where.shell.run(READ_SETTINGS, timeout_s=where.budget_s).stdout)
    set_settings(where, where.settings)
    try:
        found = _watched(where, title, runs)
    except BaseException:
        with contextlib.suppress(HarnessError):  # the error of the watch is the one to see
            set_settings(where, saved)
        raise
    set_settings(where, saved)
    return found


def set_settings(where: WatchSetup, settings: KcsanSettings) -> None:
    """Write KCSAN's knobs in the guest (one command)."""
    where.shell.run(" && ".join(settings.commands()), timeout_s=where.budget_s)


def _watched(where: WatchSetup, title: str, runs: Callable[[], T]) -> tuple[T, KcsanWatch]:
    """`overlap_watch` under the settings already set: counters around spinners around runs."""
    before = parse_kcsan_stats(read_kcsan(where.shell, where.budget_s))
    start_spinners(where.shell, where.cpus, where.budget_s)
    started = time.monotonic()
    try:
        result = runs()
    finally:
        seconds = time.monotonic() - started
        reads = stop_spinners(where.shell, where.cpus, where.budget_s)
    after = parse_kcsan_stats(read_kcsan(where.shell, where.budget_s))
    return result, KcsanWatch(title, where.settings, before.until(after), reads, seconds)


#: The core's variable every flavour's producer writes and the spinners read (``nmi``).
CORE_PAIRS = (RacePair("the core's producer-call count", "core.{cpu}.x_producer_calls"),)


#: The drive of a pair written in NMI that declares none: every CPU sampling at the
#: overlap period. Such a writer runs once a producer call at least (the core's count, a
#: ring's index), so more overflows are more writes. A scaffolded port declared no drive,
#: and on 2 vCPUs its ring index and the core's count went unmet over its standard and
#: exact runs (1747 and 1758 writes, p 0.83). A pair written outside NMI (a reader's
#: index) needs its flavour's own drive: sampling does not move it.
SAMPLING = RareWriters("every CPU sampling at 250 us", {"period": OVERLAP_PERIOD},
                       ({"op": "idle", "ms": OVERLAP_MS},))  # fmt: skip


def declared_pairs(race_pairs: Sequence[RacePair]) -> tuple[RacePair, ...]:
    """`CORE_PAIRS`, then a flavour's ``race_pairs``: every pair its overlap watch covers.

    The core's count rises with every producer call, so the flavour's first pair's drive
    (its producer's, in the tree) drives it too. A pair written in NMI with no drive,
    and the core's where the flavour's first pair has none, gets `SAMPLING`.
    """
    first = race_pairs[0].drive if race_pairs else None
    core = (replace(pair, drive=pair.drive or first or SAMPLING) for pair in CORE_PAIRS)
    own = (replace(pair, drive=SAMPLING) if pair.in_nmi and pair.drive is None else pair
           for pair in race_pairs)  # fmt: skip
    return (*core, *own)


def host_share(vcpus: int) -> float:
    """The time two of ``vcpus`` vCPUs hold this host's cores at once (`co_scheduled`)."""
    return co_scheduled(vcpus, os.cpu_count() or 1)


def pair_covers(pairs: Sequence[RacePair], runs: Sequence[AgentRun], watch: KcsanWatch,
                vcpus: int) -> list[PairCover]:  # fmt: skip
    """Each declared pair over the watch, by the model (`harness.vm.kcsan.pair_cover`).

    Its writer's executions are summed over ``runs``' numbers on every CPU; the
    spinners' rate comes from ``watch``. The spinners are placed by the scheduler, one
    per host core at most (`spinner_count`); a writer's vCPU and a spinner's hold host
    cores at once `co_scheduled` of the time; a writer in NMI meets only the reads made
    on the other vCPUs (`reads_meeting`).
    """
    share, rate = host_share(vcpus), watch.reads_per_s
    numbers = [run.numbers() for run in runs]  # once a run: it derives content counts too
    covers = []
    for pair in pairs:
        done = sum(found.get(pair.writer.format(cpu=cpu), 0)
                   for found in numbers for cpu in range(vcpus))  # fmt: skip
        reads = reads_meeting(rate, vcpus, in_nmi=pair.in_nmi)
        covers.append(pair_cover(pair.name, done, in_nmi=pair.in_nmi, share=share,
                                 reads_per_s=reads, settings=watch.settings))  # fmt: skip
    return covers
