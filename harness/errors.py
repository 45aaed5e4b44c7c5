"""Every exception the harness raises on purpose, in one tree.

The split that matters is *who is to blame*: the user's input, the host, or the
guest kernel (which may be the very bug a developer is reproducing)::

    HarnessError
     +-- ConfigError            bad input: topology, arch, spec, option; says how to fix it
     |    +-- FlavourPackageError  an out-of-tree flavour cannot join: a name clash, a
     |                           missing part, a template that does not render; one line
     +-- InfraError             the host side failed; the guest kernel is not to blame
     |    +-- HostSetupError    a tool or package is missing; carries the install command
     |    +-- BuildError        a kernel, rootfs or module build failed; carries the log
     |    |    +-- KconfigError requested CONFIG_* options did not survive olddefconfig
     |    +-- VmLaunchError     QEMU exited or never answered QMP; argv, exit code, output
     |    +-- HarnessTimeout    a bounded wait ran out with no guest evidence to blame
     |    +-- TransportError    QMP or SSH broke while QEMU was alive
     |    +-- SnapshotError     a saved guest state could not be written or loaded;
     |                           carries the migration status (the snapshot is rebuilt)
     |    +-- EnvironmentMismatch  the booted guest is not what was asked for
     |                           (topology, PMU, pseudo-NMI): a config or host problem
     +-- GuestError             the guest misbehaved; carries console evidence
          +-- GuestCrash        panic, Oops, BUG, WARNING, lockdep, RCU stall, hung task
          +-- BootHang          the kernel printed, then went silent and never answered
          +-- GuestCommandError a command in the guest exited non-zero
          +-- ModuleLoadError   insmod refused the agent; carries the guest's dmesg lines
          +-- OracleViolation   the agent's numbers broke an oracle; carries each violation

Usage::

    try:
        run_suite(request)
    except GuestError as exc:      # a finding: attach exc.evidence to the bug report
        ...
    except InfraError as exc:      # the bench itself: retry or fix the host
        ...

Every exception renders its evidence in ``str()``, so a CLI can print it as is.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path


class HarnessError(Exception):
    """Base class of every error raised on purpose by the harness."""

    #: Process exit status a CLI should use for this kind of failure.
    exit_status = 1


class ConfigError(HarnessError):
    """The user's input is wrong; the message says what and how to fix it."""

    exit_status = 2


class FlavourPackageError(ConfigError):
    """A flavour found outside the tree cannot join the registry; one line says why.

    Raised before any guest boots (`harness.agent.flavours`, `harness.agent.external`)
    and phrased ``flavour package <package> (<where it was found>): <what is wrong>``.
    """

    def __init__(self, package: str, origin: str, problem: str) -> None:
        super().__init__(package, origin, problem)
        self.package = package
        self.origin = origin
        self.problem = problem

    def __str__(self) -> str:
        return f"flavour package {self.package} ({self.origin}): {self.problem}"


class InfraError(HarnessError):
    """The host, QEMU, the toolchain or a transport failed."""

    exit_status = 3


class GuestError(HarnessError):
    """The guest kernel or guest userspace failed."""

    exit_status = 4

    def __init__(self, reason: str, evidence: str = "", console_log: Path | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.evidence = evidence
        self.console_log = console_log

    def __str__(self) -> str:
        where = f"\n  console log: {self.console_log}" if self.console_log else ""
        body = f"\n--- evidence ---\n{self.evidence}" if self.evidence else ""
        return f"{self.reason}{where}{body}"


class HostSetupError(InfraError):
    """Something the bench needs is not installed on the host."""

    def __init__(self, missing: Sequence[str], fix: str) -> None:
        super().__init__(missing, fix)
        self.missing = tuple(missing)
        self.fix = fix

    def __str__(self) -> str:
        return f"missing on this host: {', '.join(self.missing)}\n  fix: {self.fix}"


class BuildError(InfraError):
    """A build step failed; ``log`` holds its full output."""

    def __init__(self, what: str, log: Path | None = None, tail: str = "") -> None:
        super().__init__(what, log, tail)
        self.what = what
        self.log = log
        self.tail = tail

    def __str__(self) -> str:
        where = f"\n  full log: {self.log}" if self.log else ""
        tail = f"\n--- last lines ---\n{self.tail}" if self.tail else ""
        return f"{self.what}{where}{tail}"


class KconfigError(BuildError):
    """Requested kernel options were dropped or changed by ``olddefconfig``."""

    def __init__(self, problems: Sequence[str], config: Path) -> None:
        listing = "\n".join(f"  {line}" for line in problems)
        super().__init__(
            f"{len(problems)} requested kernel option(s) did not survive olddefconfig "
            f"(a missing dependency, or an option this arch or kernel lacks):\n{listing}",
            log=config,
        )
        self.problems = tuple(problems)


class HarnessTimeout(InfraError):
    """A bounded wait expired."""

    def __init__(self, what: str, waited_s: float, last_error: BaseException | None = None) -> None:
        super().__init__(what, waited_s, last_error)
        self.what = what
        self.waited_s = waited_s
        self.last_error = last_error

    def __str__(self) -> str:
        tail = f" (last error: {self.last_error!r})" if self.last_error else ""
        return f"timed out after {self.waited_s:.1f}s waiting for {self.what}{tail}"


class VmLaunchError(InfraError):
    """QEMU could not be started, exited early, or never answered QMP."""

    def __init__(self, reason: str, argv: Sequence[str], exitcode: int | None, output: str) -> None:
        super().__init__(reason, argv, exitcode, output)
        self.reason = reason
        self.argv = tuple(argv)
        self.exitcode = exitcode
        self.output = output

    def __str__(self) -> str:
        return (
            f"{self.reason}\n"
            f"  exit code: {self.exitcode}\n"
            f"  command: {shlex.join(self.argv)}\n"
            f"--- QEMU output ---\n{self.output or '<none>'}"
        )


class TransportError(InfraError):
    """QMP or SSH failed while the guest was expected to answer."""


class SnapshotError(InfraError):
    """A guest state could not be saved to, or loaded from, its snapshot file."""

    def __init__(self, reason: str, evidence: str = "") -> None:
        super().__init__(reason, evidence)
        self.reason = reason
        self.evidence = evidence

    def __str__(self) -> str:
        return f"{self.reason}\n--- evidence ---\n{self.evidence}" if self.evidence else self.reason


class EnvironmentMismatch(InfraError):
    """The booted guest differs from the request (topology, PMU, pseudo-NMI)."""

    def __init__(self, what: str, differences: Sequence[str]) -> None:
        super().__init__(what, differences)
        self.what = what
        self.differences = tuple(differences)

    def __str__(self) -> str:
        listing = "\n".join(f"  {line}" for line in self.differences)
        return f"{self.what}:\n{listing}"


class GuestCrash(GuestError):
    """The console shows a panic, Oops, BUG, WARNING, lockdep splat, stall or hung task."""


class SanitizerFailure(GuestCrash):
    """The console shows KASAN, KCSAN or UBSAN reports (`harness.vm.sanitizer`).

    ``reports``: (tool, one-line description, whether an agent frame is in it) each.
    """

    def __init__(self, reason: str, evidence: str = "", console_log: Path | None = None, *,
                 reports: Sequence[tuple[str, str, bool]] = ()) -> None:  # fmt: skip
        super().__init__(reason, evidence, console_log)
        self.reports = tuple(reports)


class BootHang(GuestError):
    """The kernel printed on the console, then went silent without becoming reachable."""


class GuestCommandError(GuestError):
    """A command run in the guest exited non-zero."""

    def __init__(self, command: str, exit_status: int, stdout: str, stderr: str) -> None:
        super().__init__(
            f"guest command {command!r} exited with status {exit_status}",
            evidence=f"stdout:\n{stdout.rstrip()}\nstderr:\n{stderr.rstrip()}",
        )
        self.command = command
        self.status = exit_status
        self.stdout = stdout
        self.stderr = stderr


class AgentStepError(GuestError):
    """A step of the agent's run failed in the guest: the module refused a call (an errno)."""


class ModuleLoadError(GuestError):
    """``insmod`` failed in the guest; ``evidence`` holds the new dmesg lines."""


class OracleViolation(GuestError):
    """One or more oracles did not hold; each violation names oracle, CPU and numbers."""

    def __init__(self, what: str, violations: Sequence[object]) -> None:
        lines = [str(v) for v in violations]
        super().__init__(f"{what}: {len(lines)} oracle violation(s)", "\n".join(lines))
        self.violations = tuple(violations)
