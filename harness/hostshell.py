"""Shell commands on the host, as a guest's shell runs them: for host tools over guest output.

`HostShell` meets `harness.vm.shell.CommandShell`, so code written against a guest's
shell (Linux perf reading a guest's ``perf.data``: `harness.vm.perfread.read_perf_data`)
runs the same on the host. Each command is a child that dies with the harness
(`harness.process.die_with_parent`), in a process group of its own::

    HostShell().run("perf --version", timeout_s=10).stdout
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass

from harness.errors import HarnessTimeout, InfraError
from harness.process import die_with_parent


@dataclass(frozen=True, slots=True)
class HostResult:
    """What a host command left behind (a `harness.vm.shell.CommandOutput`)."""

    command: str
    exit_status: int
    stdout: str
    stderr: str


class HostShell:
    """Runs shell commands on the host in bash, as a `harness.vm.shell.CommandShell` does.

    For host tools that read what a guest left (Linux perf reading a guest's
    ``perf.data``: `harness.vm.perfread.read_perf_data`). Each command runs in its own
    process group, which is killed whole when it outlives its timeout::

        HostShell().run("perf --version", timeout_s=10).stdout
    """

    def run(
        self, command: str, *, timeout_s: float | None = None, check: bool = True
    ) -> HostResult:
        """Run ``command`` in bash; blocks up to ``timeout_s`` (default 600 s).

        :raise HarnessTimeout: it outlived ``timeout_s`` (its process group was killed).
        :raise InfraError: with ``check``, it exited non-zero (its stderr attached).
        """
        budget = 600.0 if timeout_s is None else timeout_s
        started = time.monotonic()
        with subprocess.Popen(
            ["bash", "-c", command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            preexec_fn=die_with_parent,  # noqa: PLW1509 - a test's one thread runs these
        ) as proc:
            try:
                stdout, stderr = proc.communicate(timeout=budget)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate(timeout=30)
                raise HarnessTimeout(
                    f"host command {command!r}", time.monotonic() - started
                ) from None
        result = HostResult(command, proc.returncode, stdout, stderr)
        if check and result.exit_status != 0:
            raise InfraError(f"host command {command!r} exited {result.exit_status}: "
                             f"{stderr.strip()[-2000:]}")  # fmt: skip
        return result
