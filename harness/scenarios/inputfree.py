"""Input-free scenario runs: the guest runs the scenario itself; results come back after.

A deterministic run (``invoke repro --deterministic``, ``--record``, ``--replay``) may not
type on the console or talk SSH over slirp: both bring host timing into the guest.
So the harness plans the run first, on the host, with the same `Agent` and flavour
runner as an SSH run: a `PlanningShell` answers the agent's few questions (no module
loaded, every CPU online, the PMU's events) and records each command, up to the
profctl sequence that does the work. Those commands, in order, become the guest's
``run.sh`` (`render_run_script`), shipped with the module and profctl in a small
cpio appended to the initramfs (`extra_cpio`), whose ``/etc/inittab`` replaces the
rootfs's: init runs the script once, the script writes every command's status and
output and the agent's files to the console as one gzip-compressed tar in base64 lines
(``PBR ztar SIZE``, then ``PBR b ...``), and powers off. Bundles recorded before carry a
gzip-compressed item per result as hex lines; `parse_results` still reads them.

Afterwards the same runner runs again over a `CollectedShell` that answers every
command with what the guest printed (refusing any command the guest did not run),
so the numbers, the decoded records and the ``[[expect]]`` checks are exactly those
of an SSH run::

    plan = plan_run(lambda shell: run_flavour(shell), cpus=1, events=("cpu_cycles",))
    blob = extra_cpio(plan, ko=..., profctl=..., truth=...)  # appended to the initramfs
    collected = parse_results(console_log.read_text())
    run = run_flavour(CollectedShell(plan.commands, collected))

Why the console and not a virtio-serial port (the kernel has ``CONFIG_VIRTIO_CONSOLE``):
measured on QEMU 7.2, a guest with a ``virtio-serial-pci`` device is not
deterministic under plain ``-icount`` (1 of 4 identical runs on 4 vCPUs diverged
at the device's probe; 5 of 5 without it matched byte for byte), while the PL011's
output is written synchronously by the vCPU. The results follow the run, when the
kernel is quiet; each line carries a prefix (kernel lines are skipped), the archive
carries its size and gzip its checksum, so a kernel line that breaks into one is
detected, never misread.
"""

from __future__ import annotations

import binascii
import gzip
import io
import re
import shlex
import string
import tarfile
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.agent import profctl
from harness.agent.steps import GUEST_DIR, PMU_EVENT_DIRS
from harness.builder import cpio
from harness.errors import GuestCommandError, InfraError
from harness.templates import render

#: Where the extra cpio puts the run's files (init mounts a tmpfs over /tmp).
STAGE = "/profbench"
OUT_DIR = "/tmp/profbench-out"
#: The guest's archive of its results before they go to the console (on /tmp's tmpfs).
ARCHIVE = "/tmp/profbench-results.tar.gz"
HEADER = "profbench-results 1"
#: Console line prefix of an input-free run (its start, its host actions, its end).
MARKER = "profbench-run:"
#: Prefix of the console lines that carry an input-free run's results.
PREFIX = "PBR"
BASE64_DIGITS = frozenset(string.ascii_letters + string.digits + "+/=")
ONLINE = "cat /sys/devices/system/cpu/online"


@dataclass(frozen=True, slots=True)
class CommandOutcome:
    """One command the guest ran: its status and output (`harness.vm.ssh.CommandResult`)."""

    exit_status: int
    stdout: str
    stderr: str
    duration_s: float = 0.0  # by the guest's clock (/proc/uptime, 10 ms steps)


@dataclass(frozen=True, slots=True)
class GuestPlan:
    """The commands an input-free guest runs, in order."""

    commands: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Collected:
    """What an input-free guest wrote to its results port."""

    outcomes: tuple[CommandOutcome, ...]
    files: Mapping[str, bytes] = field(default_factory=dict)  # guest path → bytes
    dmesg: str = ""
    module_text: str = ""  # the agent's .text address once the run ended ("" if unloaded)


class PlanComplete(Exception):
    """Raised by `PlanningShell` at the profctl sequence: the plan is complete."""


class PlanningShell:
    """A guest shell that records commands and answers as a fresh guest would.

    Its answers only steer which commands the agent sends next; the guest's own
    answers are checked against that order later (`CollectedShell`).
    """

    #: An input-free guest: `harness.agent.truth.isolation` moves no task (there is none).
    input_free = True

    def __init__(self, *, cpus: int, events: Sequence[str], profctl: str) -> None:
        self.commands: list[str] = []
        self._answers = {ONLINE: f"0-{cpus - 1}\n" if cpus > 1 else "0\n",
                         f"ls {PMU_EVENT_DIRS} 2>/dev/null": "\n".join(events) + "\n"}  # fmt: skip
        self._profctl = profctl

    def run(
        self, command: str, *, timeout_s: float | None = None, check: bool = True
    ) -> CommandOutcome:
        """Record ``command``; raise `PlanComplete` once it is the profctl sequence."""
        self.commands.append(command)
        if command.startswith(f"{self._profctl} "):
            raise PlanComplete(command)
        return CommandOutcome(0, self._answers.get(command, ""), "")

    def put(self, local: Path, remote: str, *, mode: int | None = None) -> None:
        """Nothing: the extra cpio carries the files."""

    def get(self, remote: str, local: Path) -> None:
        """Never reached: planning stops at the profctl sequence."""
        raise InfraError(f"planning an input-free run fetched {remote} before profctl ran")


def plan_run(drive: Callable[[PlanningShell], object], shell: PlanningShell) -> GuestPlan:
    """The commands ``drive`` sends through ``shell`` up to its profctl sequence.

    :raise InfraError: ``drive`` finished without running profctl.
    """
    try:
        drive(shell)
    except PlanComplete:
        return GuestPlan(tuple(shell.commands))
    raise InfraError("the scenario's run sent no profctl sequence: nothing to run input-free")


class CollectedShell:
    """A guest shell that answers from what an input-free guest ran and wrote."""

    #: An input-free guest: `harness.agent.truth.isolation` moves no task (there is none).
    input_free = True

    def __init__(self, commands: Sequence[str], collected: Collected) -> None:
        if len(commands) != len(collected.outcomes):
            raise InfraError(f"the guest reported {len(collected.outcomes)} command(s) of "
                             f"{len(commands)} planned: its run did not finish")  # fmt: skip
        self._queue = list(zip(commands, collected.outcomes, strict=True))
        self._files = collected.files

    def run(
        self, command: str, *, timeout_s: float | None = None, check: bool = True
    ) -> CommandOutcome:
        """The guest's outcome of ``command``, which must be the next it ran.

        Returns after as long as the command took in the guest, so a runner that
        times its steps (tprof's auto-drain bound) sees the guest's duration.

        :raise InfraError: the agent asks for another command than the guest ran next.
        :raise GuestCommandError: it exited non-zero and ``check``.
        """
        if not self._queue or self._queue[0][0] != command:
            ran = self._queue[0][0] if self._queue else "nothing more"
            raise InfraError(f"an input-free run diverged from its plan: the agent sent "
                             f"{command!r}, the guest ran {ran!r}")  # fmt: skip
        outcome = self._queue.pop(0)[1]
        time.sleep(outcome.duration_s)
        if check and outcome.exit_status != 0:
            raise GuestCommandError(command, outcome.exit_status, outcome.stdout, outcome.stderr)
        return outcome

    def put(self, local: Path, remote: str, *, mode: int | None = None) -> None:
        """Nothing: the extra cpio carried the files."""

    def get(self, remote: str, local: Path) -> None:
        """Write the guest's file ``remote``, as it was when the run ended, to ``local``.

        :raise InfraError: the guest did not report that file.
        """
        if remote not in self._files:
            known = ", ".join(sorted(self._files)) or "none"
            raise InfraError(f"the input-free guest reported no file {remote} (only {known})")
        local.write_bytes(self._files[remote])


def input_free_body(body: Sequence[str], actions: Sequence[str]) -> tuple[str, ...]:
    """``body`` with each host action's wait replaced by a console line the host acts on.

    An input-free guest cannot wait for the host; on virtual clocks (icount with
    ``sleep=off``, ``-rtc clock=vm``) a QMP ``stop``/``cont`` is invisible to it
    anyway, so the host performs the action when it sees the line, and the guest
    goes on.
    """
    awaits = {profctl.await_step(f"{GUEST_DIR}/go-{name}"): name for name in actions}
    console = "/dev/console"
    return tuple(profctl.write_step(console, action_line(awaits[step]) + "\n") if step in awaits
                 else step for step in body)  # fmt: skip


def action_line(name: str) -> str:
    """The console line at which the host performs action ``name``."""
    return f"{MARKER} host-action {name}"


def render_run_script(plan: GuestPlan) -> str:
    """The guest's ``run.sh`` for ``plan`` (from ``guest/inputfree/run.sh.j2``)."""
    return render("inputfree/run.sh.j2", {
        "commands": [shlex.quote(command) for command in plan.commands],
        "prefix": PREFIX, "out_dir": OUT_DIR, "guest_dir": GUEST_DIR, "stage": STAGE,
        "marker": MARKER, "header": HEADER, "archive": ARCHIVE,
    })  # fmt: skip


def extra_cpio(plan: GuestPlan, *, ko: bytes, profctl: bytes, truth: bytes) -> bytes:
    """The cpio appended to the initramfs: run.sh, the module, profctl, a new inittab.

    ``truth`` is the ground-truth workload (`harness.agent.truth.program`), which the agent
    puts beside profctl in an ordinary run and standard runs launch.
    """
    stage = STAGE.strip("/")
    members = [
        cpio.directory("etc"),
        cpio.file("etc/inittab", render("inputfree/inittab.j2", {"stage": STAGE}).encode()),
        cpio.directory(stage),
        cpio.file(f"{stage}/profagent.ko", ko),
        cpio.file(f"{stage}/profctl", profctl, 0o755),
        cpio.file(f"{stage}/truth", truth, 0o755),
        cpio.file(f"{stage}/run.sh", render_run_script(plan).encode(), 0o755),
    ]
    return cpio.write_newc(members)


def parse_results(console: str) -> Collected:
    """The result lines of an input-free guest's console → `Collected`.

    Lines that start with `PREFIX` carry the results: ``<prefix> profbench-results 1``,
    then ``<prefix> ztar SIZE`` and ``<prefix> b BASE64`` lines: a gzip-compressed tar of
    SIZE bytes holding `OUT_DIR` (``<i>.rc|out|err|time`` per command, ``dmesg``,
    ``module.text``) and the agent's files; then ``<prefix> end``. Older recordings carry
    one item per result instead, so they replay: ``<prefix> zitem NAME SIZE`` and its gzip
    stream as ``<prefix> x HEX`` lines (``item NAME SIZE``: the bytes themselves), for
    ``cmd/<i>/rc|out|err|time``, ``file<guest path>``, ``dmesg`` and ``module-text``,
    SIZE the item's own size. Every other line (the kernel's own) is skipped.

    :raise InfraError: the results are missing, cut short or garbled (a kernel line
        broke into one), naming the item.
    """
    lines = [line.rstrip("\r")[len(PREFIX) + 1 :] for line in console.split("\n")
             if line.startswith(f"{PREFIX} ")]  # fmt: skip
    if HEADER not in lines:
        raise InfraError(f"the guest's console has no {PREFIX} {HEADER!r} line "
                         "(did its run.sh start, and finish?)")  # fmt: skip
    if "end" not in lines:
        raise InfraError(f"the guest's results end before {PREFIX} end (the run was cut short)")
    items: dict[str, bytearray] = {}
    sizes: dict[str, int] = {}
    zipped: set[str] = set()
    current = None
    for line in lines[lines.index(HEADER) + 1 : lines.index("end")]:
        kind, _, rest = line.partition(" ")
        if kind in ("item", "zitem", "ztar") and _is_size(rest, named=kind != "ztar"):
            current = rest.split()[0] if kind != "ztar" else ARCHIVE
            items[current], sizes[current] = bytearray(), int(rest.split()[-1])
            if kind != "item":
                zipped.add(current)
        elif kind == "x" and current is not None and current != ARCHIVE and _is_hex(rest):
            items[current] += bytes.fromhex(rest)
        elif kind == "b" and current == ARCHIVE and _is_base64(rest):
            items[current] += binascii.a2b_base64(rest)
        else:
            raise InfraError(f"a garbled result line on the guest's console: {line!r}")
    data = {name: _unzipped(name, raw, sizes[name]) if name in zipped else bytes(raw)
            for name, raw in items.items()}  # fmt: skip
    short = [f"{name} ({len(data[name])} of {size} bytes)" for name, size in sizes.items()
             if name not in zipped and len(data[name]) != size]  # fmt: skip
    if short:
        raise InfraError(f"the guest's results are incomplete: {', '.join(short)}")
    if ARCHIVE in data:
        data.update(_unpacked(data.pop(ARCHIVE)))
    return _collected(data)


def _unzipped(name: str, stream: bytearray, size: int) -> bytes:
    """An item's gzip stream, decompressed and checked against its size.

    SIZE is the item's own size for a ``zitem``, the stream's for the archive.

    :raise InfraError: the stream is cut short or damaged.
    """
    said = "the results archive" if name == ARCHIVE else name
    try:
        data = gzip.decompress(bytes(stream))
    except (OSError, EOFError, zlib.error) as exc:
        raise InfraError(f"the guest's results are incomplete: {said} ({exc})") from exc
    got = len(stream) if name == ARCHIVE else len(data)
    if got != size:
        raise InfraError(f"the guest's results are incomplete: {said} ({got} of {size} bytes)")
    return data


def _is_size(text: str, *, named: bool) -> bool:
    """``NAME SIZE`` (``named``) or ``SIZE``: an item's header."""
    words = text.split()
    return len(words) == (2 if named else 1) and words[-1].isdigit()


def _unpacked(archive: bytes) -> dict[str, bytes]:
    """The results archive as items: ``file<guest path>``, and from `OUT_DIR`.

    From `OUT_DIR`: ``cmd/<i>/<kind>`` for ``<i>.<kind>``, ``dmesg``, ``module-text``.

    :raise InfraError: tar's own structure is damaged (gzip's checksum held).
    """
    out = OUT_DIR.strip("/") + "/"
    items: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            for member in tar:
                stream = tar.extractfile(member) if member.isfile() else None
                if stream is not None:
                    items[_item_name(member.name.removeprefix("./"), out)] = stream.read()
    except tarfile.TarError as exc:
        raise InfraError(f"the guest's results archive is damaged ({exc})") from exc
    return items


def _item_name(path: str, out: str) -> str:
    """The item a file of the results archive is (`parse_results`' names)."""
    if not path.startswith(out):
        return f"file/{path}"
    if command := re.fullmatch(r"(\d+)\.(rc|out|err|time)", path[len(out) :]):
        return f"cmd/{command[1]}/{command[2]}"
    return {"dmesg": "dmesg", "module.text": "module-text"}.get(path[len(out) :], f"file/{path}")


def _is_base64(text: str) -> bool:
    return len(text) % 4 == 0 and all(c in BASE64_DIGITS for c in text)


def _is_hex(text: str) -> bool:
    return len(text) % 2 == 0 and all(c in "0123456789abcdef" for c in text)


def _collected(items: Mapping[str, bytes]) -> Collected:
    outcomes = []
    index = 0
    while f"cmd/{index}/rc" in items:
        text = {k: items.get(f"cmd/{index}/{k}", b"").decode(errors="replace")
                for k in ("rc", "out", "err", "time")}  # fmt: skip
        outcomes.append(CommandOutcome(int(text["rc"].strip() or -1), text["out"], text["err"],
                                       _duration_s(text["time"])))  # fmt: skip
        index += 1
    files = {name.removeprefix("file"): data for name, data in items.items()
             if name.startswith("file/")}  # fmt: skip
    text = {k: items.get(k, b"").decode(errors="replace") for k in ("dmesg", "module-text")}
    return Collected(tuple(outcomes), files, text["dmesg"], text["module-text"].strip())


def _duration_s(uptimes: str) -> float:
    """Seconds between the two ``/proc/uptime`` lines of a command (0 if absent)."""
    starts = [float(line.split()[0]) for line in uptimes.splitlines() if line.strip()]
    return max(0.0, starts[1] - starts[0]) if len(starts) == 2 else 0.0
