"""Linux perf in the guest: ``perf record`` beside a workload, and what it counts.

Debian's ``linux-perf`` is in the guest rootfs (``/usr/bin/perf`` is the binary). A
session samples given CPUs with one event and a fixed period, timestamps in
CLOCK_MONOTONIC nanoseconds, into a file under /tmp; it starts with its events off
and switches them on through a control FIFO, so `start_perf` returns only once perf
counts. `stop_perf` sends SIGINT and waits (bounded) for perf to write its file. The
guest only records: the file is copied to the host, where the host's perf reads it
(`harness.vm.perfread`) into this module's `PerfCounts`: SAMPLE, LOST and THROTTLE
records per CPU, optionally inside a time window::

    session = PerfSession(cpus=(0, 1), period=1_000_000)   # cycles
    start_perf(guest.shell, session)
    ...                                                     # the workload, the agent
    stop_perf(guest.shell, session)
    guest.shell.get(session.path("data"), local)
    counts = read_perf_data(HostShell(), session, PerfRead(local, window=(start, stop)))
    counts.cpu(1).samples, counts.cpu(1).lost, counts.cpu(1).throttles

Commands are pure; `start_perf`, `switch_perf` and `stop_perf` are the thin shell over
anything with ``run(command, timeout_s=..., check=...)`` (`harness.vm.ssh.GuestShell`).
`harness.agent.peer.counts` compares these counts with the agent's.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from harness import timing
from harness.errors import ConfigError, GuestError
from harness.vm.shell import CommandShell

#: Where the guest's perf lives (Debian's linux-perf: the binary itself, not a wrapper).
PERF = "/usr/bin/perf"
SESSION_DIR = "/tmp"
#: ``perf record`` under TCG: loading its 30 MB of libraries and opening the events
#: took 3-4 s on 2 vCPUs before it acknowledged ``enable``; stopping (SIGINT to the
#: written file) 1-3 s.
START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 120


@dataclass(frozen=True, slots=True)
class PerfSession:
    """One ``perf record`` in the guest: what it samples and where its files go."""

    cpus: tuple[int, ...]
    period: int  # events per sample (``-c``)
    event: str = "cycles"
    name: str = "peer"  # files are /tmp/<name>.{data,ctl,ack,log,pid,stats,err}
    mmap_pages: int | None = None  # ``-m``: perf's ring buffer per CPU (None: perf's default)
    #: ``-g``: frame-pointer call chains, read back as `PerfSample` frames.
    stacks: bool = False

    def __post_init__(self) -> None:
        if not self.cpus or min(self.cpus) < 0:
            raise ConfigError(f"perf session: CPUs {self.cpus!r}: give one or more CPU numbers ≥ 0")
        if self.period < 1:
            raise ConfigError(f"perf session: period {self.period} must be ≥ 1 event")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", self.name + self.event):
            raise ConfigError(f"perf session: name {self.name!r} and event {self.event!r} must be "
                              "plain words (letters, digits, _ . -)")  # fmt: skip

    def path(self, suffix: str) -> str:
        """The session's file with ``suffix`` (data, ctl, ack, log, pid, stats, err)."""
        return f"{SESSION_DIR}/{self.name}.{suffix}"


@dataclass(frozen=True, slots=True)
class PerfCpu:
    """What perf recorded on one CPU (inside the window, if one was given)."""

    cpu: int
    samples: int  # PERF_RECORD_SAMPLE
    #: Records the kernel could not write: PERF_RECORD_LOST's ``lost``, of each record whose
    #: span (since the CPU's record before it) meets the window.
    lost: int
    lost_records: int  # PERF_RECORD_LOST records
    throttles: int  # PERF_RECORD_THROTTLE
    throttled_ns: int  # time between THROTTLE and UNTHROTTLE, clipped to the window
    first_ns: int | None  # first and last sample's CLOCK_MONOTONIC time
    last_ns: int | None


@dataclass(frozen=True, slots=True)
class PerfFrame:
    """One frame of a perf sample: its address (user ones relative to their mapping), names."""

    ip: int
    sym: str  # perf's symbol, ``[unknown]`` where it has none
    dso: str  # ``[kernel.kallsyms]``, a module, or the binary's path


@dataclass(frozen=True, slots=True)
class PerfSample:
    """One perf sample with its frames, leaf first (a session with ``stacks``)."""

    cpu: int
    time_ns: int
    frames: tuple[PerfFrame, ...]


@dataclass(frozen=True, slots=True)
class PerfCounts:
    """perf's per-CPU counts, the window they were cut to, and perf's version."""

    cpus: tuple[PerfCpu, ...]  # every watched CPU, in order
    period: int  # events per sample, as recorded
    window: tuple[int, int] | None  # [start_ns, stop_ns] CLOCK_MONOTONIC, or None: all
    version: str
    totals: tuple[tuple[str, int], ...]  # ``perf report --stats``: (record type, count)
    #: Every sample, uncut, with its frames (a session with ``stacks``; else empty);
    #: a sample outside the read's ``stacks_within`` has its time and CPU only.
    stacks: tuple[PerfSample, ...] = ()

    @property
    def watched(self) -> tuple[int, ...]:
        """The CPUs perf recorded on."""
        return tuple(c.cpu for c in self.cpus)

    def cpu(self, cpu: int) -> PerfCpu:
        """The counts of ``cpu`` (all zero when perf recorded nothing there)."""
        found = [c for c in self.cpus if c.cpu == cpu]
        return found[0] if found else PerfCpu(cpu, 0, 0, 0, 0, 0, None, None)

    def samples(self) -> dict[int, int]:
        """Samples per CPU."""
        return {c.cpu: c.samples for c in self.cpus}


# --- commands (pure) ----------------------------------------------------------------------


def record_argv(session: PerfSession) -> tuple[str, ...]:
    """``perf record`` for ``session``: disabled until told, times in CLOCK_MONOTONIC ns.

    ``-D -1`` with ``--control`` starts with the events off and enables them on
    ``enable`` through the control FIFO, acknowledging on the ack FIFO: the caller
    knows when perf counts. No build ids and no BPF synthesis: they only slow the
    start and stop under TCG, and the counts need neither.
    """
    pages = () if session.mmap_pages is None else ("-m", str(session.mmap_pages))
    return (
        PERF, "record", *(("-g",) if session.stacks else ()),
        "-C", ",".join(str(c) for c in sorted(set(session.cpus))),
        "-e", session.event, "-c", str(session.period), "-k", "CLOCK_MONOTONIC",
        *pages, "-D", "-1",
        "--control", f"fifo:{session.path('ctl')},{session.path('ack')}",
        "--no-buildid", "--no-buildid-cache", "--no-bpf-event",
        "-o", session.path("data"),
    )  # fmt: skip


def start_command(
    session: PerfSession, *, ack_timeout_s: int = START_TIMEOUT_S, enable: bool = True
) -> str:
    """Start ``perf record`` in the background and return once its events are on.

    Prints perf's PID. Exits 1 (with perf's log on stderr) when perf does not
    acknowledge ``enable`` within ``ack_timeout_s``. The control FIFO is opened
    read-write so writing never blocks on a perf that already died. Without
    ``enable`` it sends ``disable`` instead: perf acknowledges it once it reads its
    control FIFO, and its events stay off until `control_command` turns them on.
    """
    p = session.path
    files = " ".join(p(s) for s in ("data", "ctl", "ack", "log", "pid", "stats", "err"))
    record = shlex.join(record_argv(session))
    word = "enable" if enable else "disable"
    return (
        f"rm -f {files} && mkfifo {p('ctl')} {p('ack')} && "
        f"{{ {record} </dev/null >{p('log')} 2>&1 & echo $! > {p('pid')}; }} && "
        f"exec 3<>{p('ack')} 4<>{p('ctl')} && echo {word} >&4 && "
        f'if read -t {ack_timeout_s} ack <&3 && [ "$ack" = ack ]; then cat {p("pid")}; '
        f"else echo 'perf record did not acknowledge {word} within {ack_timeout_s}s' >&2; "
        f"cat {p('log')} >&2; kill -KILL $(cat {p('pid')}) 2>/dev/null; exit 1; fi"
    )


def control_command(
    session: PerfSession, word: str, *, ack_timeout_s: int = START_TIMEOUT_S
) -> str:
    """Send ``word`` (``enable``, ``disable``) to a running perf record; wait for its ack.

    Exits 1 (with perf's log on stderr) when perf does not acknowledge within
    ``ack_timeout_s``.
    """
    if word not in ("enable", "disable"):
        raise ConfigError(f"perf control: {word!r} is not enable or disable")
    p = session.path
    return (
        f"exec 3<>{p('ack')} 4<>{p('ctl')} && echo {word} >&4 && "
        f'if read -t {ack_timeout_s} ack <&3 && [ "$ack" = ack ]; then exit 0; '
        f"else echo 'perf record did not acknowledge {word} within {ack_timeout_s}s' >&2; "
        f"cat {p('log')} >&2; exit 1; fi"
    )


def stop_command(session: PerfSession, *, timeout_s: int = STOP_TIMEOUT_S) -> str:
    """SIGINT to perf record, then wait (bounded) until it wrote its file and exited.

    Exits 1 after killing it when it outlives ``timeout_s``; prints perf's log.
    """
    p = session.path
    tenths = timeout_s * 10
    return (
        f"pid=$(cat {p('pid')}) && kill -INT $pid && i=0 && "
        f"while kill -0 $pid 2>/dev/null; do i=$((i+1)); if [ $i -gt {tenths} ]; then "
        f"kill -KILL $pid; echo 'perf record did not stop within {timeout_s}s' >&2; exit 1; fi; "
        f"sleep 0.1; done; cat {p('log')}"
    )


# --- the thin shell ------------------------------------------------------------------------


@timing.timed(timing.PERF)
def start_perf(
    shell: CommandShell,
    session: PerfSession,
    *,
    timeout_s: int = START_TIMEOUT_S,
    enable: bool = True,
) -> int:
    """Start ``perf record`` for ``session``; return its PID once its events count.

    Without ``enable``, once perf reads its control FIFO, its events still off
    (`switch_perf` turns them on). Blocks up to ``timeout_s`` (plus the SSH round trip).

    :raise GuestError: perf did not start or did not acknowledge (its log attached).
    """
    result = shell.run(start_command(session, ack_timeout_s=timeout_s, enable=enable),
                       check=False, timeout_s=timeout_s + 30)  # fmt: skip
    words = result.stdout.split()
    if result.exit_status != 0 or not words or not words[-1].isdigit():
        raise GuestError(f"perf record for {session.name} did not start", result.stderr[-3000:])
    return int(words[-1])


@timing.timed(timing.PERF)
def switch_perf(
    shell: CommandShell, session: PerfSession, *, on: bool, timeout_s: int = START_TIMEOUT_S
) -> None:
    """Turn a running perf record's events on or off; return once perf acknowledged.

    Blocks up to ``timeout_s`` (plus the SSH round trip).

    :raise GuestError: perf did not acknowledge (its log attached).
    """
    word = "enable" if on else "disable"
    result = shell.run(control_command(session, word, ack_timeout_s=timeout_s), check=False,
                       timeout_s=timeout_s + 30)  # fmt: skip
    if result.exit_status != 0:
        raise GuestError(f"perf record for {session.name} did not {word}", result.stderr[-3000:])


@timing.timed(timing.PERF)
def stop_perf(
    shell: CommandShell, session: PerfSession, *, timeout_s: int = STOP_TIMEOUT_S
) -> None:
    """Stop ``perf record`` (SIGINT) and wait until it wrote its file and exited.

    Blocks up to ``timeout_s`` (plus the SSH round trip). The file is then the
    session's ``data`` path in the guest, for `read_perf_data` once copied out.

    :raise GuestError: perf did not stop in time (its log attached).
    """
    stopped = shell.run(stop_command(session, timeout_s=timeout_s), check=False,
                        timeout_s=timeout_s + 30)  # fmt: skip
    if stopped.exit_status != 0:
        raise GuestError(f"perf record for {session.name} did not stop cleanly",
                         (stopped.stdout + stopped.stderr)[-3000:])  # fmt: skip
