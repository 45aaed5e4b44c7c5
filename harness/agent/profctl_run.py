"""Run a profctl sequence in a guest: one process, its lines parsed into step results.

`run_profctl` sends the steps (through a steps file when the command would be too
long for the guest's SSH server); `run_with_host_actions` lets the host act at marked
points while the sequence runs in another thread (`harness.agent.steps.host_action_steps`);
`hang_evidence` keeps why a sequence outlived its budget::

    results = run_profctl(shell, "/tmp/profagent/profctl", steps, timeout_s=30)
    results = run_with_host_actions(lambda: agent.steps(steps), {"pause": stop_vm},
                                    shell, timeout_s=60)
"""

from __future__ import annotations

import functools
import logging
import shlex
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from harness.agent.profctl import StepResult, parse_output
from harness.agent.steps import marker_paths
from harness.errors import ConfigError, GuestCommandError, HarnessError, InfraError
from harness.timeouts import wait_until
from harness.vm.shell import CommandShell

LOG = logging.getLogger(__name__)

USAGE_EXIT = 2  # profctl rejected a step before running any


#: Longest SSH command sent at once: dropbear refuses exec requests over 9000
#: bytes ("String too long"), which one ioctl step per CPU and PMC reaches on 8 vCPUs.
MAX_COMMAND = 8000


def _steps_file(shell: CommandShell, binary: str, steps: Sequence[str], *, timeout_s: float) -> str:
    """Write ``steps`` one per line to ``<binary>.steps`` in short commands; profctl's -f line."""
    if any("\n" in step for step in steps):
        raise ConfigError("a profctl step holds a newline; it cannot go through a steps file")
    path = f"{binary}.steps"
    chunks: list[list[str]] = [[]]
    for step in steps:
        if len(shlex.join(chunks[-1] + [step])) > MAX_COMMAND - 100:
            chunks.append([])
        chunks[-1].append(step)
    shell.run(f": > {shlex.quote(path)}", timeout_s=timeout_s)
    for chunk in chunks:
        if chunk:
            line = shlex.join(["printf", "%s\n", *chunk])
            shell.run(f"{line} >> {shlex.quote(path)}", timeout_s=timeout_s)
    return shlex.join([binary, "-f", path])


def run_profctl(
    shell: CommandShell, binary: str, steps: Sequence[str], *, timeout_s: float
) -> tuple[StepResult, ...]:
    """Run ``steps`` in one profctl process at guest path ``binary``; blocks ≤ ``timeout_s``.

    A failed step is a result with ``ok`` false, not an exception.

    :raise ConfigError: no steps, or profctl rejected one (not built by a ``*_step``).
    :raise GuestCommandError: profctl exited non-zero otherwise (missing, crashed).
    :raise InfraError: its output does not match ``steps`` (see `parse_output`).
    """
    if not steps:
        raise ConfigError("profctl needs at least one step")
    command = shlex.join([binary, *steps])
    if len(command) > MAX_COMMAND:
        command = _steps_file(shell, binary, steps, timeout_s=timeout_s)
    result = shell.run(command, timeout_s=timeout_s, check=False)
    if result.exit_status == USAGE_EXIT:
        raise ConfigError(f"profctl rejected its steps: {result.stderr.strip()}")
    if result.exit_status != 0:
        raise GuestCommandError(command, result.exit_status, result.stdout, result.stderr)
    if result.stderr.strip():
        LOG.warning("profctl wrote to stderr: %s", result.stderr.strip())
    return parse_output(result.stdout, steps)


def run_with_host_actions(
    run: Callable[[], tuple[StepResult, ...]],
    actions: Mapping[str, Callable[[], None]],
    shell: CommandShell,
    *,
    timeout_s: float,
) -> tuple[StepResult, ...]:
    """``run`` (a sequence) in a second thread while the host acts at its marked points.

    ``actions`` maps a marker name to what the host does there (e.g. QMP ``stop``/
    ``cont``). The sequence must contain `host_action_steps(name)` for each: profctl
    creates the marker file and waits for a go file; the host sees the marker, acts,
    then creates the go file. Blocks up to ``timeout_s`` per marker and for the end.

    :raise InfraError: the sequence did not finish within ``timeout_s``.
    """
    outcome: list[tuple[StepResult, ...] | BaseException] = []

    def in_thread() -> None:
        try:
            outcome.append(run())
        except BaseException as exc:  # handed to the caller's thread
            outcome.append(exc)

    worker = threading.Thread(target=in_thread, name="profctl", daemon=True)
    worker.start()
    for name, action in actions.items():
        marker, go = marker_paths(name)
        wait_until(
            functools.partial(_reached, shell, marker),
            timeout_s=timeout_s,
            what=f"the guest sequence to reach {name!r}",
            interval_s=0.05,
            abort=functools.partial(_failure_of, outcome),
        )
        action()
        shell.run(f"touch {go}")
    worker.join(timeout_s)
    if not outcome:
        raise InfraError(f"profctl did not finish within {timeout_s:.0f}s")
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def _reached(shell: CommandShell, marker: str) -> bool | None:
    return True if shell.run(f"test -e {marker}", check=False).exit_status == 0 else None


def _failure_of(outcome: Sequence[object]) -> BaseException | None:
    return outcome[0] if outcome and isinstance(outcome[0], BaseException) else None


def hang_evidence(shell: CommandShell, path: Path, *, timeout_s: float) -> str:
    """Keep why a profctl outlived its budget in ``path``; return where that is kept.

    Where each profctl waits in the kernel, every blocked task and every CPU's
    backtrace (sysrq w and l); then the profctl processes are killed by PID so that
    the module can be unloaded. Blocks up to ``timeout_s``.
    """
    script = (
        'for p in $(pidof profctl); do echo "== profctl $p: $(cat /proc/$p/wchan)"; '
        "cat /proc/$p/stack; done; echo w > /proc/sysrq-trigger; "
        "echo l > /proc/sysrq-trigger; sleep 1; dmesg | tail -n 400; "
        "for p in $(pidof profctl); do kill -9 $p; done"
    )
    try:
        result = shell.run(script, timeout_s=timeout_s, check=False)
    except HarnessError as exc:
        path.write_text(f"no evidence: {exc}\n")
        return f"the guest did not answer for evidence either: {exc}"
    path.write_text(result.stdout + result.stderr)
    return f"kernel stacks, blocked tasks and CPU backtraces in {path}"
