r"""Host processes: long logged builds with progress, and children that die with us.

Every child the harness starts gets ``PR_SET_PDEATHSIG`` = SIGKILL, so even if
the harness is killed outright (``kill -9`` of an xdist worker) no QEMU or make
outlives it. Long builds write their output to a log file and report progress
(a fraction and the time left, when the total is known: see `harness.progress`)::

    run_logged(["make", "-j2", "Image"], log=build / "build.log", what="kernel build",
               progress=count_matches(r"^\\s+CC\\b", total=1630, basis="the previous build"))

Shell commands on the host, the way a guest's shell runs them, are `harness.hostshell`.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness.errors import BuildError, HarnessTimeout
from harness.progress import Progress, format_progress

LOG = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """``preexec_fn``: the kernel sends SIGKILL to this child when its parent dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


#: A progress probe: given the log and the seconds elapsed, a few words on how far it is.
ProgressProbe = Callable[[Path, float], str]


def count_in_log(log: Path, pattern: str) -> int:
    """How many lines of ``log`` match ``pattern`` (0 when there is no log)."""
    try:
        text = log.read_text(errors="replace")
    except FileNotFoundError:
        return 0
    return len(re.findall(pattern, text, re.MULTILINE))


def count_matches(pattern: str, *, total: int | None = None, basis: str = "") -> ProgressProbe:
    """A progress probe: log lines matching ``pattern`` so far, of ``total`` expected.

    ``basis`` says where ``total`` comes from (a previous build, an estimate).
    """

    def probe(log: Path, elapsed_s: float) -> str:
        done = count_in_log(log, pattern)
        return format_progress(Progress(done, total, elapsed_s, basis=basis))

    return probe


class Terminated(KeyboardInterrupt):
    """SIGTERM, delivered like Ctrl-C so every ``finally`` and ``__exit__`` runs."""


#: Set while the builds of a `build_pool` are to stop: each polls it this often.
_STOP_BUILDS = threading.Event()
_STOP_POLL_S = 0.5


@contextlib.contextmanager
def build_pool(workers: int) -> Iterator[ThreadPoolExecutor]:
    """A thread pool for `run_logged` builds that all stop when the block is left early.

    Builds run in sessions of their own, so Ctrl-C reaches only the main thread, and a
    plain pool's exit would wait for every build queued (a quick mutant set's 80).
    Leaving the block by an exception (Ctrl-C, SIGTERM, the first build error) makes
    each running build kill its make group within ``_STOP_POLL_S`` and keeps the
    queued ones from starting; the exception then goes on. One pool at a time::

        with build_pool(os.cpu_count() or 1) as pool:
            list(pool.map(build_one, specs))
    """
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        yield pool
    except BaseException:
        _STOP_BUILDS.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _STOP_BUILDS.clear()


class BuildStopped(Terminated):
    """A `build_pool`'s build stopped because its caller left the pool's block."""


def run_logged(
    argv: Sequence[str],
    *,
    log: Path,
    what: str,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 3600.0,
    progress: ProgressProbe | None = None,
    heartbeat_s: float = 20.0,
) -> None:
    """Run ``argv`` with its output appended to ``log``; blocks ≤ ``timeout_s``.

    Logs a progress line every ``heartbeat_s``. On Ctrl-C or timeout the whole
    process group is killed before the exception propagates.

    :raise BuildError: non-zero exit (with the log's error lines).
    :raise HarnessTimeout: the command ran longer than ``timeout_s``.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    if _STOP_BUILDS.is_set():
        raise BuildStopped(f"{what}: not started, its pool is stopping")
    with log.open("a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        # Ctrl-C is held until ``proc`` exists: one landing inside Popen would leave
        # make running in its own session, unknown to the ``except`` below.
        with _interrupts_held() as release:
            proc = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=None if env is None else {**os.environ, **env},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # so we can kill make and all its children at once
                preexec_fn=_child_setup,  # noqa: PLW1509 - no threads start children here
            )
            try:
                release()  # a Ctrl-C held meanwhile is raised here
                _wait_with_heartbeat(
                    proc,
                    log,
                    what,
                    started=started,
                    timeout_s=timeout_s,
                    progress=progress,
                    heartbeat_s=heartbeat_s,
                )
            except BaseException:
                _kill_group(proc)
                raise
    if proc.returncode != 0:
        raise BuildError(
            f"{what} failed with exit status {proc.returncode}", log=log, tail=error_lines(log)
        )


_INTERRUPTS = frozenset({signal.SIGINT, signal.SIGTERM})


@contextlib.contextmanager
def _interrupts_held() -> Iterator[Callable[[], None]]:
    """Hold SIGINT and SIGTERM until the block calls the function it is given, or ends."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None  # KeyboardInterrupt is raised in the main thread only
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _INTERRUPTS)

    def release() -> None:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)

    try:
        yield release
    finally:
        release()


def _child_setup() -> None:
    """``preexec_fn`` of logged builds: no signal held over from us; die with us."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _INTERRUPTS)
    die_with_parent()


def _wait_with_heartbeat(
    proc: subprocess.Popen[bytes],
    log: Path,
    what: str,
    *,
    started: float,
    timeout_s: float,
    progress: ProgressProbe | None,
    heartbeat_s: float,
) -> None:
    beat = started
    while True:
        try:
            proc.wait(timeout=_STOP_POLL_S)
        except subprocess.TimeoutExpired:
            if _STOP_BUILDS.is_set():
                raise BuildStopped(f"{what}: stopped, its pool is stopping") from None
            now = time.monotonic()
            if now - started > timeout_s:
                raise HarnessTimeout(what, now - started) from None
            if now - beat >= heartbeat_s:
                beat = now
                detail = f", {progress(log, now - started)}" if progress else ""
                LOG.info("%s: %.0fs elapsed%s; log: %s", what, now - started, detail, log)
        else:
            return


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def _idle_child_setup() -> None:
    """``preexec_fn`` of `beside`: `_child_setup`, at ``SCHED_IDLE`` (inherited by make, gcc)."""
    _child_setup()
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


#: How long a `beside` child has to stop on SIGTERM before its group is killed.
_STOP_GRACE_S = 60.0


@contextlib.contextmanager
def beside(
    argv: Sequence[str],
    *,
    log: Path,
    what: str,
    cwd: Path | None = None,
    heartbeat_s: float = 60.0,
    timeout_s: float = 7200.0,
) -> Iterator[Callable[[], int]]:
    """Run ``argv`` beside the block at ``SCHED_IDLE``, on the CPU time the block leaves.

    It cannot slow the block's own processes but by sharing caches.

    The block is given ``finish``: it waits for the child (a line every ``heartbeat_s``
    with the log's last line) and returns its exit status. A block left by an
    exception, or without calling ``finish``, stops the child: SIGTERM (it unwinds, its
    own builds stop), SIGKILL to its group after `_STOP_GRACE_S`. Output goes to ``log``::

        with beside([sys.executable, "-m", "harness.cli.prebuild"], log=log,
                    what="the later kernels") as finish:
            run_the_tier()
            status = finish()

    :raise HarnessTimeout: ``finish`` waited past ``timeout_s`` from the start.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with log.open("ab") as out:
        proc = subprocess.Popen(list(argv), cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=_idle_child_setup)  # noqa: PLW1509  # fmt: skip
    LOG.info("%s: started beside at idle priority (pid %d); log: %s", what, proc.pid, log)

    def finish() -> int:
        beat = time.monotonic()
        while proc.poll() is None:
            now = time.monotonic()
            if now - started > timeout_s:
                raise HarnessTimeout(what, now - started)
            if now - beat >= heartbeat_s:
                beat = now
                LOG.info("%s: %.0fs since it started; it says: %s", what, now - started,
                         _last_line(log))  # fmt: skip
            time.sleep(_STOP_POLL_S)
        took = time.monotonic() - started
        LOG.info("%s: exit status %d after %.0fs", what, proc.returncode, took)
        return proc.returncode

    try:
        yield finish
    finally:
        _stop(proc, what)


def _stop(proc: subprocess.Popen[bytes], what: str) -> None:
    """SIGTERM ``proc``, then SIGKILL its group if it is not gone in `_STOP_GRACE_S`."""
    if proc.poll() is not None:
        return
    LOG.warning("%s: stopping it (pid %d)", what, proc.pid)
    proc.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=_STOP_GRACE_S)
    _kill_group(proc)


def _last_line(log: Path) -> str:
    try:
        lines = log.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return "(nothing yet)"
    return lines[-1].strip() if lines else "(nothing yet)"


def error_lines(log: Path, limit: int = 40) -> str:
    """Compiler and make error lines of a build log, else its last lines."""
    lines = log.read_text(errors="replace").splitlines()
    errors = [ln for ln in lines if re.search(r"error:|Error \d+|\*\*\*|undefined reference", ln)]
    return "\n".join((errors or lines)[-limit:])


def capture(argv: Sequence[str], *, timeout_s: float = 30.0) -> str:
    """Run a short command and return its stdout; '' when it is missing or fails."""
    try:
        proc = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout if proc.returncode == 0 else ""


_VERSIONS: dict[str, str] = {}


def tool_version(binary: str) -> str:
    """First line of ``<binary> --version``; '' while it is missing (not remembered)."""
    if binary not in _VERSIONS:
        lines = capture([binary, "--version"]).splitlines()
        if not lines:
            return ""
        _VERSIONS[binary] = lines[0]
    return _VERSIONS[binary]


def package_version(package: str) -> str:
    """The installed version of a Debian package, '' when not installed."""
    return capture(["dpkg-query", "-W", "-f=${Version}", package]).strip()


def handle_sigterm() -> None:
    """Turn SIGTERM into `Terminated` in the main thread (QEMU cleanup then runs)."""

    def _raise(signum: int, frame: object) -> None:
        raise Terminated(f"signal {signum}")

    signal.signal(signal.SIGTERM, _raise)
