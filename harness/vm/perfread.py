"""Linux perf on the host reading a guest's perf.data: per-CPU counts and frames.

`read_perf_data` runs the host's perf over a perf.data copied out of the guest
(`harness.vm.perf` records it): ``perf script``, and ``perf report -D`` for THROTTLE
records. `parse_perf_output` counts SAMPLE, LOST and THROTTLE records per CPU,
optionally inside a time window, into a `harness.vm.perf.PerfCounts`::

    guest.shell.get(session.path("data"), local)
    counts = read_perf_data(HostShell(), session, PerfRead(local, window=(start, stop)))
    parse_perf_output(recorded_text, period=1_000_000, cpus=(0, 1))   # the same, pure

Why on the host. Measured on one perf.data of an 8-vCPU guest (35 198 samples with
call chains, 7.5 MB; 2 host cores shared with a CI run, load average 9-15): the guest's
own read (``--stats``, ``perf script`` naming symbols, 32 MB of text) took 332 s; even
``perf script -F cpu,time,event,ip`` without names took 58 s in the guest. Copying the
file out over SFTP took 7.1 s, and the host's perf (x86_64, Debian's 6.1.192 as in the
guest) printed it with names in 0.86 s. perf.data's header says the recording
machine's architecture, and the host's perf reads its records and frame-pointer chains
as written (checked against the guest's own reading in `tests/unit/vm/test_perf.py`):
the same samples, times and frames, except the caller of a user-mode leaf that arm64's
perf adds from the sampled LR (it needs DWARF unwinding for arm64, which the host's
perf lacks: "unwind: target platform=arm64 is not supported"). No maintained reader of
perf.data is on PyPI (the ``perfetto`` package fetches its trace processor from the
network at run time), so perf itself reads it, on the host.

The command and the parsing are pure; `read_perf_data` is the thin shell over a
`harness.hostshell.HostShell` (anything with ``run(command, timeout_s=..., check=...)``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness import timing
from harness.errors import GuestError
from harness.vm.perf import PerfCounts, PerfCpu, PerfFrame, PerfSample, PerfSession
from harness.vm.shell import CommandShell

#: Linux perf on the host (Debian's ``linux-perf``; `harness.builder.hostdeps` installs it):
#: it reads the guest's perf.data after the run, off the emulated guest.
HOST_PERF = "perf"
#: Host perf reading a peer run's perf.data (``perf script`` with call chains,
#: ``--stats``): 0.9 s for 35 198 samples on a loaded host (the module docstring).
REPORT_TIMEOUT_S = 300
_SECTION = re.compile(r"^### (\w+)$", re.MULTILINE)
_SCRIPT_LINE = re.compile(r"^\s*\[(\d+)\]\s+(\d+)\.(\d{9}):\s+(.*?)\s*$")
_DUMP_LINE = re.compile(r"^(\d+) (\d+) 0x[0-9a-f]+ \[0x[0-9a-f]+\]: PERF_RECORD_(\w+)")
_LOST = re.compile(r"PERF_RECORD_LOST lost (\d+)")
_STAT_LINE = re.compile(r"^\s*(\w+) events:\s+(\d+)", re.MULTILINE)
#: One frame as ``perf script -F ip,sym,dso`` prints it: ``ffffffc0081eb888 sym (dso)``.
_FRAME = re.compile(r"^\s*([0-9a-f]+)\s+(.*?)\s+\((.*)\)\s*$")


# --- the command (pure) -------------------------------------------------------------------


def report_command(data: str, *, stacks: bool, perf: str = HOST_PERF,
                   kallsyms: str | None = None) -> str:  # fmt: skip
    """Print what `parse_perf_output` reads of the perf file ``data``, in sections.

    Run on the host by host perf (`read_perf_data`): perf.data is the same file
    on every architecture, and its header says the guest's. ``perf script`` gives
    CPU and time of every sample and LOST record (and with ``stacks`` every frame's
    address and, for a user frame, its mapping, with kernel names from the guest's
    ``kallsyms`` file); it cannot show THROTTLE records in perf 6.1, so the raw dump
    (``perf report -D``) runs only when ``--stats`` counted any. perf's warnings go
    to their own section: written to the same stream they land inside sample lines
    ("Processed 957 samples and lost 37.30%!" did, in a recorded run). The version
    section names the perf that recorded (from the file's header) and the one that read.
    """
    file, stats, err = (shlex.quote(f"{data}{suffix}") for suffix in ("", ".stats", ".err"))
    names = f" --kallsyms {shlex.quote(kallsyms)}" if kallsyms is not None else ""
    fields = "cpu,time,event,ip,sym,dso" if stacks else "cpu,time,event"
    return "; ".join(
        (
            "echo '### version'",
            f"{perf} report -i {file} --header-only 2>/dev/null"
            " | sed -n 's/^# perf version : /recorded by perf version /p'",
            f"{perf} --version | sed 's/^/read by /'",
            f"{perf} report -i {file} --stats >{stats} 2>{err}",
            "echo '### stats'", f"cat {stats}",
            "echo '### script'",
            f"{perf} script -i {file}{names} -F {fields} --ns --show-lost-events 2>>{err}",
            "echo '### throttle'",
            f"if grep -q ' THROTTLE events' {stats}; then {perf} report -i {file} -D 2>>{err}"
            " | grep -E 'PERF_RECORD_(UN)?THROTTLE'; fi",
            "echo '### warnings'", f"cat {err}",
        )
    )  # fmt: skip


# --- the thin shell ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PerfRead:
    """How to read one copied perf.data on the host (`read_perf_data`)."""

    data: Path  # the guest's perf.data, copied to the host
    kallsyms: Path | None = None  # the guest's /proc/kallsyms, for perf's kernel names
    window: tuple[int, int] | None = None  # counts cut to [start_ns, stop_ns]
    keep: Path | None = None  # receives what perf printed (`report_command`'s output)
    #: Frames are read for the samples in [start_ns, stop_ns] only (None: every sample's).
    #: A peer run's analysis folds the agent's window, while perf records from before
    #: the agent loads to after it disarmed: on 8 vCPUs 6237 of 28 349 samples lay in
    #: the window, and reading every frame was most of the host's analysis (3.7 s).
    stacks_within: tuple[int, int] | None = None


@timing.timed(timing.ANALYSIS)
def read_perf_data(shell: CommandShell, session: PerfSession, read: PerfRead) -> PerfCounts:
    """Count ``session``'s records in ``read.data`` with host perf, cut to ``read.window``.

    ``shell`` runs on the host (`harness.hostshell.HostShell`). Nothing of the agent's
    goes in: perf reads its own file, with the kernel's symbols. Blocks up to
    `REPORT_TIMEOUT_S`.

    :raise GuestError: perf's output cannot be read (`parse_perf_output`).
    """
    kallsyms = str(read.kallsyms) if read.kallsyms is not None else None
    command = report_command(str(read.data), stacks=session.stacks, kallsyms=kallsyms)
    report = shell.run(command, check=False, timeout_s=REPORT_TIMEOUT_S)
    if read.keep is not None:
        read.keep.write_text(report.stdout)
    return parse_perf_output(report.stdout, period=session.period, cpus=session.cpus,
                             window=read.window, stacks_within=read.stacks_within)  # fmt: skip


# --- parsing (pure) -----------------------------------------------------------------------


def parse_perf_output(
    text: str,
    *,
    period: int,
    cpus: Iterable[int] = (),
    window: tuple[int, int] | None = None,
    stacks_within: tuple[int, int] | None = None,
) -> PerfCounts:
    """Per-CPU counts from `report_command`'s output, cut to ``window`` if given.

    ``cpus`` are the CPUs perf recorded on (the session's): each gets an entry even
    without a record; others get one when perf printed a record for them. A record
    counts when its time is inside ``[start_ns, stop_ns]``. Frames are read only for
    the samples inside ``stacks_within`` (None: all); every sample is in ``stacks``.

    :raise GuestError: a section is missing, or ``perf script`` showed a
        different number of samples than ``perf report --stats`` counted (a
        truncated or misread output, never silently a smaller count).
    """
    sections = _sections(text)
    totals = tuple((name, int(n)) for name, n in _STAT_LINE.findall(_aggregated(sections["stats"])))
    samples: dict[int, list[int]] = {}
    lost: dict[int, list[tuple[int | None, int, int]]] = {}
    last: dict[int, int] = {}  # each CPU's record before, in perf's order
    stacks: list[PerfSample] = []
    for cpu, time_ns, rest, frames in _script_records(sections["script"], stacks_within):
        before, last[cpu] = last.get(cpu), time_ns
        if match := _LOST.search(rest):
            lost.setdefault(cpu, []).append((before, time_ns, int(match[1])))
        elif "PERF_RECORD_" not in rest:
            samples.setdefault(cpu, []).append(time_ns)
            if frames or not _inside(time_ns, stacks_within):
                stacks.append(PerfSample(cpu, time_ns, frames))
    seen = sum(len(v) for v in samples.values())
    counted = dict(totals).get("SAMPLE", 0)
    if seen != counted:
        raise _bad(
            f"perf script showed {seen} samples, perf report --stats counted {counted}",
            sections.get("warnings", ""),
        )
    throttles = _throttle_records(sections["throttle"])
    watched = sorted(set(cpus) | set(samples) | set(lost) | set(throttles))
    return PerfCounts(
        cpus=tuple(
            _cpu_counts(
                cpu, samples.get(cpu, []), lost.get(cpu, []), throttles.get(cpu, []), window
            )
            for cpu in watched
        ),
        period=period,
        window=window,
        version=sections["version"].strip(),
        totals=totals,
        stacks=tuple(stacks),
    )


def _bad(reason: str, evidence: str = "") -> GuestError:
    return GuestError(f"perf output: {reason}", evidence.strip())


def _sections(text: str) -> dict[str, str]:
    parts = _SECTION.split(text)
    found = {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}
    missing = [s for s in ("version", "stats", "script", "throttle") if s not in found]
    if missing:
        raise _bad(f"no {', '.join(missing)} section(s) in the output")
    return found


def _aggregated(stats: str) -> str:
    """The ``Aggregated stats`` block of ``--stats`` (before the per-event blocks)."""
    return re.split(r"^\S.* stats:$", stats.split("Aggregated stats:", 1)[-1], flags=re.M)[0]


def _script_records(
    text: str, stacks_within: tuple[int, int] | None = None
) -> Iterable[tuple[int, int, str, tuple[PerfFrame, ...]]]:
    """(cpu, time, rest of the line, frames) per record of ``perf script``.

    A sample's frames follow its line, one per line, leaf first (with ``-g``), or
    sit at the end of it (without); a blank line or the next record ends them.
    Outside ``stacks_within`` a record has no frames (perf indents them with a tab).
    """
    record: tuple[int, int, str] | None = None
    frames: list[PerfFrame] = []
    skipping = False
    for line in text.splitlines():
        if skipping and line.startswith("\t"):
            continue
        if match := _SCRIPT_LINE.match(line):
            if record is not None:
                yield (*record, tuple(frames))
            record = int(match[1]), int(match[2]) * 1_000_000_000 + int(match[3]), match[4]
            frames = []
            skipping = not _inside(record[1], stacks_within)
            if skipping or "PERF_RECORD_" in match[4]:
                continue
            own = _frame(match[4].partition(": ")[2])
            frames += [own] if own else []
        elif record is not None and (frame := _frame(line)):
            frames.append(frame)
    if record is not None:
        yield (*record, tuple(frames))


def _frame(text: str) -> PerfFrame | None:
    match = _FRAME.match(text)
    return PerfFrame(int(match[1], 16), match[2], match[3]) if match else None


def _throttle_records(text: str) -> dict[int, list[tuple[int, bool]]]:
    """Per CPU, (time, throttled?) of each THROTTLE (True) and UNTHROTTLE (False), in order."""
    found: dict[int, list[tuple[int, bool]]] = {}
    for line in text.splitlines():
        if (match := _DUMP_LINE.match(line)) and match[3] in ("THROTTLE", "UNTHROTTLE"):
            found.setdefault(int(match[1]), []).append((int(match[2]), match[3] == "THROTTLE"))
    return {cpu: sorted(records) for cpu, records in found.items()}


def _inside(time_ns: int, window: tuple[int, int] | None) -> bool:
    return window is None or window[0] <= time_ns <= window[1]


def _cpu_counts(
    cpu: int,
    samples: Sequence[int],
    lost: Sequence[tuple[int | None, int, int]],
    throttles: Sequence[tuple[int, bool]],
    window: tuple[int, int] | None,
) -> PerfCpu:
    kept = sorted(t for t in samples if _inside(t, window))
    lost_kept = [n for since, t, n in lost if _meets(since, t, window)]
    return PerfCpu(
        cpu=cpu,
        samples=len(kept),
        lost=sum(lost_kept),
        lost_records=len(lost_kept),
        throttles=sum(1 for t, on in throttles if on and _inside(t, window)),
        throttled_ns=_throttled_ns(throttles, window),
        first_ns=kept[0] if kept else None,
        last_ns=kept[-1] if kept else None,
    )


def _meets(since: int | None, at: int, window: tuple[int, int] | None) -> bool:
    """Whether a LOST record's span, (since, at], meets ``window``.

    The kernel writes a LOST record once its ring has room again, after the losses:
    they happened since the CPU's record before it (``since``; None: none before).
    Seen: dt on 8 vCPUs, perf's reader behind on CPU 1, no sample from 142.275 s to
    a LOST of 2829 at 151.652 s, after the agent's window had ended: cut by its own
    time, the window kept none of them, and PEER failed the agent's count by 2830.
    """
    return window is None or (at > window[0] and (since is None or since < window[1]))


def _throttled_ns(records: Sequence[tuple[int, bool]], window: tuple[int, int] | None) -> int:
    """Time spent throttled inside ``window``; a THROTTLE never lifted lasts to its end."""
    lo, hi = window if window is not None else (0, max((t for t, _ in records), default=0))
    total, since = 0, None
    for time_ns, on in records:
        if on and since is None:
            since = time_ns
        elif not on and since is not None:
            total += max(0, min(time_ns, hi) - max(since, lo))
            since = None
    if since is not None:
        total += max(0, hi - max(since, lo))
    return total
