r"""The language of ``profctl``, the small static guest tool that runs a sequence of steps.

``profctl`` (``guest/agent/profctl.c``) executes its arguments as steps in one
process, so a file descriptor opened by one step serves the next, and prints one
``step=<i> op=<op> ok=<0|1> [errno=<NAME>] key=value...`` line per step. This
module builds the step tokens (pure and validated) and parses what it printed into
`StepResult` values; `harness.agent.profctl_build` compiles it and
`harness.agent.profctl_run` runs a sequence in a guest::

    opened, started, *_, drained = run_profctl(shell, "/tmp/profagent/profctl", (
        open_step("/dev/profagent"),             # fd 3: the lowest free descriptor
        ioctl_step(3, 0x40087401, 8, b"\x01"),
        spin_step(1, 200), wait_step(),
        timeout_step(5), read_step(3, "/tmp/samples.bin", 65536),
    ), timeout_s=30)
    started.out_bytes                            # the 8 bytes after the ioctl
    drained.int_value("bytes")

A run names the steps whose results it wants, and asks for them by that name
(`harness.agent.steps.Results`). Steps are checked before any runs, so later steps
name descriptors by number: an ``open`` gets the lowest free one, 3 for the first
when the command starts with only 0-2 open. Compare an open's ``int_value("fd")``
with what later steps assumed.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

from harness.errors import ConfigError, InfraError

LOG = logging.getLogger(__name__)

CONTINUATION = "| "  # prefix of the file lines a cat step prints after its step line

# Limits profctl.c enforces (its field_max()); checked here so a bad value is a
# ConfigError at the call site instead of a usage error in the guest.
MAX_FD = 1_048_575
MAX_REQUEST = 2**64 - 1
MAX_IOCTL_SIZE = 4096
MAX_CHUNK = 16 << 20
MAX_TIMEOUT_S = 86_400
MAX_CPU = 1023
MAX_MS = 86_400_000

_ERRNO_NAME = re.compile(r"E[A-Z0-9]+")


def _in_range(what: str, value: int, low: int, high: int) -> int:
    if not low <= value <= high:
        raise ConfigError(f"profctl {what} must be in {low}..{high}, not {value}")
    return value


def _guest_path(path: str) -> str:
    if not path or ":" in path or "\0" in path:
        raise ConfigError(f"profctl paths must be non-empty, without ':' or NUL: {path!r}")
    return path


def open_step(path: str) -> str:
    """``open:PATH``: open O_RDWR; the result has ``fd``.

    :raise ConfigError: the path is empty or holds ':' or NUL.
    """
    return f"open:{_guest_path(path)}"


def close_step(fd: int) -> str:
    """``close:FD``.

    :raise ConfigError: ``fd`` is out of range.
    """
    return f"close:{_in_range('fd', fd, 0, MAX_FD)}"


def ioctl_step(fd: int, request: int, size: int, data: bytes = b"") -> str:
    """``ioctl:FD:REQ:SIZE[:HEXIN]`` on a zeroed ``size``-byte buffer starting with ``data``.

    The result has ``rc`` and ``out`` (see `StepResult.out_bytes`). With ``size`` 0
    the argument is a null pointer.

    :raise ConfigError: a value is out of range, or ``data`` is longer than ``size``.
    """
    _in_range("fd", fd, 0, MAX_FD)
    _in_range("ioctl request", request, 0, MAX_REQUEST)
    _in_range("ioctl size", size, 0, MAX_IOCTL_SIZE)
    if len(data) > size:
        raise ConfigError(f"profctl ioctl data ({len(data)} bytes) exceeds its size {size}")
    step = f"ioctl:{fd}:{request:#x}:{size}"
    return f"{step}:{data.hex()}" if data else step


def read_step(fd: int, path: str, chunk: int) -> str:
    """``read:FD:PATH:CHUNK``: read ``fd`` to EOF into guest file ``path``; ``bytes``, ``reads``.

    :raise ConfigError: bad fd, path, or a chunk outside 1..16 MiB.
    """
    _in_range("fd", fd, 0, MAX_FD)
    return f"read:{fd}:{_guest_path(path)}:{_in_range('read chunk', chunk, 1, MAX_CHUNK)}"


def timeout_step(seconds: int) -> str:
    """``timeout:SECONDS``: later read and wait steps fail with EINTR after ``seconds`` (0: never).

    :raise ConfigError: ``seconds`` is out of range.
    """
    return f"timeout:{_in_range('timeout', seconds, 0, MAX_TIMEOUT_S)}"


def write_step(path: str, text: str) -> str:
    """``write:PATH:TEXT``: one write() of ``text`` (may hold ':' and spaces); ``bytes``.

    :raise ConfigError: a bad path, or NUL in ``text`` (argv cannot carry it).
    """
    if "\0" in text:
        raise ConfigError(f"profctl cannot write a NUL byte: {text!r}")
    return f"write:{_guest_path(path)}:{text}"


def writefd_step(fd: int, text: str) -> str:
    """``writefd:FD:TEXT``: one write() of ``text`` (may be empty) to open ``fd``; ``bytes``.

    :raise ConfigError: a bad descriptor, or NUL in ``text``.
    """
    if "\0" in text:
        raise ConfigError(f"profctl cannot write a NUL byte: {text!r}")
    return f"writefd:{_in_range('fd', fd, 0, MAX_FD)}:{text}"


def cat_step(path: str) -> str:
    """``cat:PATH``: the whole file, as `StepResult.lines`; ``bytes``, ``lines``.

    :raise ConfigError: the path is empty or holds ':' or NUL.
    """
    return f"cat:{_guest_path(path)}"


def spin_step(cpu: int, ms: int) -> str:
    """``spin:CPU:MS``: a child busy-looping in user space on ``cpu``; ``pid``, ``cpu``.

    :raise ConfigError: ``cpu`` or ``ms`` is out of range.
    """
    return f"spin:{_in_range('cpu', cpu, 0, MAX_CPU)}:{_in_range('spin ms', ms, 0, MAX_MS)}"


def repeat_step(times: int, count: int) -> str:
    """``repeat:TIMES:COUNT``: the ``count`` steps after it run ``times`` times.

    All runs but the last print nothing; their failures are counted in ``failed``
    (``first`` names the first as ``op:ERRNO``). Then this step's line, then the last
    run's step lines as usual. No repeat may sit inside another.

    :raise ConfigError: ``times`` or ``count`` is out of range.
    """
    times = _in_range("repeat times", times, 1, 10_000_000)
    return f"repeat:{times}:{_in_range('repeat count', count, 1, 4096)}"


def wait_step() -> str:
    """``wait``: reap every spin child; ``children``, ``failed`` (did not exit 0)."""
    return "wait"


def clock_step() -> str:
    """``clock``: the guest's CLOCK_MONOTONIC as ``ns``, to bracket the steps around it."""
    return "clock"


def sleep_step(ms: int) -> str:
    """``sleep:MS``.

    :raise ConfigError: ``ms`` is out of range.
    """
    return f"sleep:{_in_range('sleep ms', ms, 0, MAX_MS)}"


def readbg_step(fd: int, path: str, chunk: int, pause_ms: int = 0) -> str:
    """A background reader of ``fd`` (a child sharing it); its outcome in ``path``.status.

    With ``pause_ms``, it sleeps that long after each read shorter than ``chunk``: a
    reader that takes what gathered, not one woken for every record.

    :raise ConfigError: a bad descriptor, path, chunk size or pause.
    """
    step = "readbg:" + read_step(fd, path, chunk).removeprefix("read:")
    return f"{step}:{_in_range('reader pause ms', pause_ms, 1, MAX_MS)}" if pause_ms else step


def mark_step(path: str) -> str:
    """Create ``path`` in the guest: tells the host the sequence reached this point."""
    return f"mark:{_guest_path(path)}"


def await_step(path: str) -> str:
    """Wait until ``path`` exists (the host's go-ahead), at most the current timeout."""
    return f"await:{_guest_path(path)}"


def exec_step(cpu: int, output: str, argv: Sequence[str]) -> str:
    """``exec:CPU:OUT:ARGV``: a child forked on ``cpu`` runs ``argv``; ``pid``, ``cpu``.

    Its stdout and stderr go to guest file ``output``; ``wait`` reaps it.

    :raise ConfigError: a bad CPU or path, or a word empty or holding ':' or a space.
    """
    if not argv or any(not w or ":" in w or " " in w or "\n" in w for w in argv):
        raise ConfigError(f"exec argv words must be non-empty, without ':' or spaces: {argv!r}")
    return f"exec:{_in_range('cpu', cpu, 0, MAX_CPU)}:{_guest_path(output)}:{' '.join(argv)}"


def isolate_step(cpu: int, path: str) -> str:
    """``isolate:CPU:PATH``: every user task off ``cpu``; ``tasks``, ``moved``, ``failed``.

    Every thread of every process with a non-empty ``/proc/PID/cmdline`` (not a kernel
    thread), profctl itself included, passes until one moves none; each task's mask
    before goes to guest file ``path`` (for `restore_step`). ``first`` names the first
    task that could not be moved (``TID:NAME``). Later ``spin`` and ``exec`` steps on
    ``cpu`` fork where profctl is and the child pins itself.

    :raise ConfigError: a bad CPU or path.
    """
    return f"isolate:{_in_range('cpu', cpu, 0, MAX_CPU)}:{_guest_path(path)}"


def masks_step(cpu: int) -> str:
    """``masks:CPU``: the user tasks whose Cpus_allowed_list holds ``cpu``.

    The result has ``tasks`` (user tasks read), ``including`` and, when some do,
    ``tids`` (comma-separated, the first few dozen) and ``first`` (the first one's name).

    :raise ConfigError: ``cpu`` is out of range.
    """
    return f"masks:{_in_range('cpu', cpu, 0, MAX_CPU)}"


def restore_step(cpu: int, path: str) -> str:
    """``restore:CPU:PATH``: the masks `isolate_step` saved, back; ``restored``, ``gone``.

    A user task not in ``path`` (born after isolate, it inherited a mask without
    ``cpu``) gets ``cpu`` added (``born``).

    :raise ConfigError: a bad CPU or path.
    """
    return f"restore:{_in_range('cpu', cpu, 0, MAX_CPU)}:{_guest_path(path)}"


def pin_step(cpu: int) -> str:
    """``pin:CPU``: pin profctl itself to ``cpu`` for the steps that follow.

    :raise ConfigError: ``cpu`` is out of range.
    """
    return f"pin:{_in_range('cpu', cpu, 0, MAX_CPU)}"


def unload_step(module: str) -> str:
    """``unload:NAME``: delete_module(NAME, O_NONBLOCK), as rmmod asks.

    A module with a file open refuses (``EAGAIN``); ok means it is gone.

    :raise ConfigError: the name is empty or holds ':', '/' or NUL.
    """
    if "/" in module:
        raise ConfigError(f"profctl unload takes a module name, not a path: {module!r}")
    return f"unload:{_guest_path(module)}"


@dataclass(frozen=True, slots=True)
class StepResult:
    """What one step reported: its ``key=value`` pairs and, for ``cat``, the file's lines."""

    index: int
    op: str
    ok: bool
    errno: str | None  # symbolic, e.g. "EBUSY"; None when ok
    values: Mapping[str, str]  # every pair but step, op, ok and errno
    lines: tuple[str, ...] = ()

    def int_value(self, key: str) -> int:
        """The integer value of ``key``.

        :raise InfraError: the step reported no such integer (e.g. it failed).
        """
        try:
            return int(self.values[key])
        except (KeyError, ValueError) as exc:
            raise InfraError(f"profctl {self.describe()} has no integer {key}=") from exc

    @property
    def out_bytes(self) -> bytes:
        """The ioctl buffer after the call (``out=``).

        :raise InfraError: the step reported no hex ``out`` (e.g. it failed).
        """
        try:
            return bytes.fromhex(self.values["out"])
        except (KeyError, ValueError) as exc:
            raise InfraError(f"profctl {self.describe()} has no hex out=") from exc

    def describe(self) -> str:
        """One line for error messages: index, op, status and values."""
        status = "ok" if self.ok else f"failed with {self.errno}"
        pairs = " ".join(f"{key}={value}" for key, value in self.values.items())
        return f"step {self.index} ({self.op}, {status}; {pairs or 'no values'})"


def parse_output(text: str, steps: Sequence[str]) -> tuple[StepResult, ...]:
    """Parse profctl's stdout for ``steps``: one result per step, in order.

    :raise InfraError: a line is malformed, belongs to no step, or the output does
        not have exactly one step line per step (the offending line is quoted).
    """
    if text and not text.endswith("\n"):
        raise InfraError(f"profctl output ends mid-line: {text.rsplit(chr(10), 1)[-1]!r}")
    parsed: list[tuple[StepResult, list[str]]] = []
    for line in text.split("\n")[:-1]:
        if not line.startswith(CONTINUATION):
            parsed.append((_parse_step_line(line, len(parsed), steps), []))
        elif parsed and parsed[-1][0].op == "cat" and parsed[-1][0].ok:
            parsed[-1][1].append(line.removeprefix(CONTINUATION))
        else:
            raise InfraError(f"profctl printed a file line outside a cat step: {line!r}")
    if len(parsed) != len(steps):
        last = text.rstrip("\n").rsplit("\n", 1)[-1] if text else "<no output>"
        raise InfraError(
            f"profctl printed {len(parsed)} step line(s) for {len(steps)} step(s); "
            f"last line: {last!r}"
        )
    return tuple(_with_lines(result, lines) for result, lines in parsed)


def _parse_step_line(line: str, index: int, steps: Sequence[str]) -> StepResult:
    if index >= len(steps):
        raise InfraError(f"profctl printed more step lines than its {len(steps)} step(s): {line!r}")
    pairs = [token.partition("=") for token in line.split(" ")]
    if not all(key and sep for key, sep, _ in pairs):
        raise _malformed(line, "a token is not key=value")
    keys = [key for key, _, _ in pairs]
    values = {key: value for key, _, value in pairs}
    if len(values) != len(keys):
        raise _malformed(line, "a key appears twice")
    ok = values.get("ok")
    header = ["step", "op", "ok", "errno"] if ok == "0" else ["step", "op", "ok"]
    if keys[: len(header)] != header or ok not in {"0", "1"} or "errno" in keys[len(header) :]:
        raise _malformed(line, f"it must start with {'= '.join(header)}= and ok=0 or 1")
    op = steps[index].partition(":")[0]
    if values["step"] != str(index) or values["op"] != op:
        raise _malformed(line, f"expected step={index} op={op}")
    if ok == "0" and not _ERRNO_NAME.fullmatch(values["errno"]):
        raise _malformed(line, "errno= is not a symbolic name")
    return StepResult(
        index=index,
        op=op,
        ok=ok == "1",
        errno=values.get("errno"),
        values=MappingProxyType({k: v for k, v in values.items() if k not in header}),
    )


def _with_lines(result: StepResult, lines: list[str]) -> StepResult:
    if result.op == "cat" and result.ok and result.int_value("lines") != len(lines):
        raise InfraError(
            f"profctl {result.describe()} announced {result.values['lines']} line(s) "
            f"but printed {len(lines)}"
        )
    return replace(result, lines=tuple(lines))


def _malformed(line: str, why: str) -> InfraError:
    return InfraError(f"malformed profctl output ({why}): {line!r}")
