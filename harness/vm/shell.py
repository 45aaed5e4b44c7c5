"""What the harness asks of a guest shell: one typed home for its `Protocol`.

`harness.vm.ssh.GuestShell` is the shell of a booted guest; the input-free runs
answer the same calls from a plan and from the collected console
(`harness.scenarios.inputfree`), and unit tests pass fakes. Code that only runs
commands takes a `CommandShell`, so it works with each of them::

    def uptime(shell: CommandShell) -> str:
        return shell.run("cat /proc/uptime", timeout_s=10).stdout
"""

from __future__ import annotations

from typing import Protocol


class CommandOutput(Protocol):
    """What a guest command left behind (`harness.vm.ssh.CommandResult`)."""

    @property
    def exit_status(self) -> int:
        """The command's exit status."""

    @property
    def stdout(self) -> str:
        """Everything it printed on stdout."""

    @property
    def stderr(self) -> str:
        """Everything it printed on stderr."""


class CommandShell(Protocol):
    """Runs a shell command in the guest (`harness.vm.ssh.GuestShell`)."""

    def run(
        self, command: str, *, timeout_s: float | None = None, check: bool = True
    ) -> CommandOutput:
        """Run ``command``; with ``check``, a non-zero exit raises `harness.errors.GuestError`."""
