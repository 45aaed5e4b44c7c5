"""A booted, checked guest: QEMU + QMP + SSH + preflight + artifacts, in one `with`.

::

    with Guest(spec, images, workdir, timeouts=Timeouts.from_env()) as guest:
        guest.shell.run("nproc")
        guest.facts.pmu_counters
    # QEMU stopped; workdir holds argv.txt, console.log, qmp.jsonl, ssh-probe.log, run.json

Entering boots the VM (or, given a `Snapshot`, restores a saved one into a fresh
QEMU: `restore`), finds the SSH port QEMU chose, logs in, reads the
guest's facts and checks them and the topology (guest sysfs and QMP) against
the spec. Leaving stops QEMU whatever happened, scans the console for crash
lines (a WARNING during a run fails it), and writes the verdict. Errors raised
inside the block pass through unchanged; cleanup never masks them.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from types import TracebackType

from harness.builder.images import GuestImages
from harness.builder.rootfs import GUEST_INIT
from harness.errors import (
    BootHang,
    EnvironmentMismatch,
    GuestError,
    HarnessError,
    HarnessTimeout,
    InfraError,
    SnapshotError,
    VmLaunchError,
)
from harness.timeouts import Timeouts
from harness.vm.argv import MachineSpec
from harness.vm.console import ConsoleFinding, scan_console
from harness.vm.machine import GuestVM
from harness.vm.migration import load_state
from harness.vm.preflight import (
    FACTS_COMMAND,
    GuestFacts,
    check_facts,
    check_variant_facts,
    parse_facts,
    split_sections,
)
from harness.vm.record import RunRecord, spec_record
from harness.vm.snapshot import Snapshot, clock_command
from harness.vm.ssh import GuestShell
from harness.vm.topology import check_qmp_topology
from harness.vm.vcpus import Symbols, where

LOG = logging.getLogger(__name__)


class Guest:
    """One guest run; use as a context manager."""

    def __init__(
        self,
        spec: MachineSpec,
        images: GuestImages,
        workdir: Path,
        *,
        timeouts: Timeouts,
        name: str | None = None,
        check_environment: bool = True,
        snapshot: Snapshot | None = None,
    ) -> None:
        # More vCPUs than the host can run at once are slower at everything (TCG).
        timeouts = timeouts.for_overcommit(spec.topology.cpus)
        self.spec = spec
        #: Restore this saved guest instead of booting (see `restore`).
        self.snapshot = snapshot
        self.images = images
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.name = name or spec.name
        self.vm = GuestVM(spec, images.files, workdir, name=self.name, timeouts=timeouts,
                          incoming=snapshot is not None)  # fmt: skip
        self.shell = GuestShell(images.ssh_key, timeouts=timeouts, name=self.name,
                                probe_log=workdir / "ssh-probe.log")  # fmt: skip
        self.shell.on_timeout = self.vcpu_report
        self._reports = 0
        self.record = RunRecord(workdir / "run.json")
        self.boot_s = 0.0
        self.shutdown_s = 0.0
        self._facts: GuestFacts | None = None
        #: `FACTS_COMMAND` output as read at boot (a snapshot keeps it).
        self.facts_text = ""
        self._check_environment = check_environment
        self._timeouts = timeouts
        self._console_judged = 0  # lines a caller judged itself (`judge_console`)

    @property
    def timeouts(self) -> Timeouts:
        """The budgets this guest was started with (a sanitizer kernel's scaled up).

        Every command sent to it, an agent's included, is given these.
        """
        return self._timeouts

    def vcpu_report(self) -> str:
        """Where every vCPU is now and a second later, named from System.map.

        The full registers go to ``vcpus-N.txt`` in the workdir. For a guest that
        stopped answering: its console rarely says why.
        """
        if self.vm.exitcode() is not None:
            return "QEMU has exited"
        self._reports += 1
        path = self.workdir / f"vcpus-{self._reports}.txt"
        symbols = Symbols.from_system_map(self.images.kernel_build / "System.map")
        seen: list[str] = []
        try:
            for sample in range(2):
                if sample:
                    time.sleep(1.0)
                text = self.vm.qmp.hmp("info registers -a")
                with path.open("a") as out:
                    out.write(f"--- sample {sample}\n{text}\n")
                seen.append(", ".join(f"{n}: {pc}" for n, pc in enumerate(where(text, symbols))))
        except HarnessError as exc:
            return f"vCPU registers unavailable: {exc}"
        return f"vCPU PCs {seen[0]}; a second later {seen[-1]} (registers in {path})"

    @property
    def facts(self) -> GuestFacts:
        """Preflight facts of the running guest."""
        if self._facts is None:
            raise RuntimeError("Guest.facts read before the guest booted")
        return self._facts

    def __enter__(self) -> Guest:
        self.record.update(spec=spec_record(self.spec), images=self.images.record())
        try:
            if self.snapshot is not None:
                self.restore(self.snapshot)
            else:
                self.boot()
        except BaseException as exc:
            self._stop(exc)
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop(exc)

    def boot(self) -> None:
        """Launch, log in, read facts, check them; raises on any mismatch."""
        started = time.monotonic()
        self.vm.launch()
        self.record.update(argv=list(self.vm.argv), qemu_pid=self.vm.pid)
        port = self.vm.ssh_port()
        self._wait_for_ssh(port, started)
        self.boot_s = time.monotonic() - started
        self.record.add_timing("launch_to_ssh", self.boot_s)
        LOG.info("%s: SSH up after %.2fs (port %d)", self.name, self.boot_s, port)
        facts_text = self.facts_text = self.shell.run(FACTS_COMMAND).stdout
        self._facts = parse_facts(facts_text)
        (self.workdir / "dmesg.boot.txt").write_text(split_sections(facts_text).get("dmesg", ""))
        self.record.update(facts=self._facts.as_record(), ssh_port=port)
        if self._check_environment:
            self.check_environment()

    def restore(self, snapshot: Snapshot) -> None:
        """Load ``snapshot`` into the fresh QEMU, log in again, set the clock, check.

        The facts are the ones read when the snapshot was saved; the topology is
        checked again over QMP. Blocks ≤ the QMP budget for the load and the boot
        budget for SSH.

        :raise SnapshotError: the state did not load, or the loaded guest never
            answered and printed nothing (the snapshot is unusable).
        :raise GuestCrash: the console shows a crash after the load.
        :raise VmLaunchError: QEMU exited after the load.
        """
        started = time.monotonic()
        self.vm.launch()
        self.record.update(argv=list(self.vm.argv), qemu_pid=self.vm.pid,
                           snapshot=snapshot.record())  # fmt: skip
        try:
            load_state(self.vm.qmp, snapshot.state_path, timeout_s=self._timeouts.qmp_s,
                       abort=self.vm.exit_error)  # fmt: skip
        except (VmLaunchError, SnapshotError) as exc:
            raise self._load_failure(snapshot, exc) from exc
        self.record.add_timing("restore_load", time.monotonic() - started)
        port = self.vm.ssh_port()
        try:
            self.vm.wait_for_boot(probe=lambda: self.shell.try_connect(port))
        except HarnessTimeout as exc:  # loaded, yet silent and deaf: the state is no good
            raise SnapshotError(f"the guest restored from {snapshot.state_path} never "
                                f"answered SSH on port {port}",
                                f"{exc}\n{self.shell.probe.report() or ''}") from exc  # fmt: skip
        self.record.add_timing("restore_login", time.monotonic() - started)
        self.shell.run(clock_command(time.time()))
        self.boot_s = time.monotonic() - started
        self.record.add_timing("launch_to_ssh", self.boot_s)
        LOG.info("%s: restored, SSH up after %.2fs (port %d)", self.name, self.boot_s, port)
        self.facts_text = snapshot.facts_text
        self._facts = parse_facts(snapshot.facts_text)
        (self.workdir / "dmesg.boot.txt").write_text(
            split_sections(snapshot.facts_text).get("dmesg", "")
        )
        self.record.update(facts=self._facts.as_record(), ssh_port=port)
        if self._check_environment:
            self.check_environment()

    def _load_failure(
        self, snapshot: Snapshot, exc: VmLaunchError | SnapshotError
    ) -> SnapshotError:
        """The load's failure with its evidence: migration status, and QEMU's output if it died.

        QEMU that rejects a stream exits; QMP may notice first (a broken connection).
        """
        status = self.vm.exit_status_within(2.0)
        migration = exc.evidence if isinstance(exc, SnapshotError) else ""
        if status is None and isinstance(exc, SnapshotError):
            return exc
        return SnapshotError(
            f"QEMU exited (status {status}) while loading {snapshot.state_path}",
            f"{migration}\n--- QEMU output ---\n{self.vm.qemu_output() or '<none>'}".strip(),
        )

    def _wait_for_ssh(self, port: int, started: float) -> None:
        """Log in as soon as sshd answers; a boot that never lets us in says why.

        :raise BootHang: with the failed logins (and their log) once init had
            started sshd; the console's account otherwise (see `GuestVM.wait_for_boot`).
        """
        # Log in only once init says sshd is starting: an earlier attempt reaches a
        # guest whose network is not up, and paramiko then waits out its banner timeout.
        ready = f"{GUEST_INIT.marker} {GUEST_INIT.ready}"

        def login() -> GuestShell | None:
            return self.shell.try_connect(port) if ready in self.vm.console_text() else None

        try:
            self.vm.wait_for_boot(probe=login)
        except BootHang as exc:
            if (logins := self.shell.probe.report()) is None:
                raise  # sshd never started: the console's account stands
            waited_s = time.monotonic() - started
            reason = (f"{exc.reason}\n  SSH: init had started sshd, yet no login on port {port} "
                      f"succeeded in {waited_s:.0f}s since launch; {logins}")  # fmt: skip
            raise BootHang(reason, exc.evidence, exc.console_log) from exc

    def _save_final_dmesg(self) -> None:
        """Best effort: the guest's dmesg as the run ends (gone if the guest is)."""
        if self.shell.port is None or self.vm.exitcode() is not None:
            return
        try:
            dmesg = self.shell.run("dmesg", timeout_s=10.0).stdout
        except HarnessError as exc:
            LOG.debug("%s: no final dmesg: %s", self.name, exc)
            return
        (self.workdir / "dmesg.txt").write_text(dmesg)

    def check_environment(self) -> None:
        """Compare the guest (sysfs, dmesg) and QEMU (QMP) with the spec.

        :raise EnvironmentMismatch: naming every difference.
        """
        problems = check_facts(self.spec, self.facts)
        problems += check_variant_facts(self.images.variant, self.facts)
        problems += check_qmp_topology(self.spec.topology, self.vm.qmp.execute("query-cpus-fast"))
        if problems:
            raise EnvironmentMismatch(f"{self.name} is not the guest that was asked for", problems)

    def console_lines(self) -> int:
        """How many lines the guest's console holds so far (a mark for `judge_console`)."""
        return len(self.vm.console_text().splitlines())

    def judge_console(self, since_line: int) -> list[ConsoleFinding]:
        """The console's findings after ``since_line``, now the caller's to judge.

        A mutant's WARN is its catch, not a crash of the guest: the check on leaving
        starts after the lines judged here (a later crash is still raised).
        """
        text = self.vm.console_text()
        self._console_judged = max(self._console_judged, len(text.splitlines()))
        return scan_console(text, start_line=since_line)

    def _stop(self, error: BaseException | None) -> None:
        self._save_final_dmesg()
        self.shell.close()
        self.shutdown_s = self.vm.shutdown()
        self.record.add_timing("shutdown", self.shutdown_s)
        crash: GuestError | None = None
        if error is None or isinstance(error, InfraError):
            # A broken connection with a panic on the console is the panic's doing.
            try:
                self.vm.check_console(since_line=self._console_judged,
                                      what=f"{self.name} during the run")  # fmt: skip
            except GuestError as found:
                crash = found
        self.record.finish(crash or error)
        if crash is not None:
            raise crash from error
