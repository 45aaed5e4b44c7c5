"""Drive the agent in a booted guest: deploy, load, run workloads, collect.

The thin shell between the pure parts (spec, steps in `harness.agent.steps`, parsers,
oracles) and a guest. One `Agent` serves one guest; each run loads the module anew::

    agent = Agent(guest.shell, build, profctl_binary, workdir, nmi_expected=True,
                  pmu_irq_label="arm-pmu"); agent.deploy()
    behaviour("tprof").standard_run(agent, AgentSpec(), (0, 1))   # harness.agent.flavour

It knows no flavour: a flavour's runner drives it through `harness.agent.runner.AgentLike`.
Everything a run produced (profctl's output, debugfs files, records) stays in ``workdir``.
"""

from __future__ import annotations

import json
import logging
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from harness.agent import profctl
from harness.agent.module.build import AgentBuild
from harness.agent.module.spec import AgentSpec, event_available
from harness.agent.overlap import UNLOAD_IF_LOADED
from harness.agent.profctl_run import hang_evidence, run_profctl, run_with_host_actions
from harness.agent.steps import (
    FD,
    GUEST_DIR,
    PMU_EVENT_DIRS,
    Results,
    counters_of,
    counters_steps,
    texts,
    throttling_command,
)
from harness.agent.truth import program
from harness.agent.truth.build import TRUTH_BINARY
from harness.agent.truth.elfsyms import FunctionTable
from harness.agent.truth.nmigraph import NmiGraph, nmi_graph
from harness.agent.truth.placement import (
    kernel_lines_command,
    kernel_table,
    module_table,
    place_kernel,
    place_module,
    spin_loop_of,
    truth_image_of,
)
from harness.agent.values.results import AgentCounters
from harness.errors import ConfigError, GuestCommandError, InfraError, ModuleLoadError
from harness.timeouts import Timeouts
from harness.timing import RUNS, timed
from harness.vm.shell import CommandShell
from harness.vm.ssh import GuestCommandTimeout
from harness.vm.witness.session import Witness

LOG = logging.getLogger(__name__)
#: The overflow handler the kernel calls (guest/agent/core.c.j2): the witness's breakpoint.
WITNESSED_HANDLER = "pa_overflow"

#: `Agent.insmod`'s exit status when a command before the insmod failed (+ its index).
_BEFORE_INSMOD = 90


class AgentShell(CommandShell, Protocol):
    """A guest shell that can also copy files in and out (`harness.vm.ssh.GuestShell`)."""

    def put(self, local: Path, remote: str, *, mode: int | None = None) -> None:
        """Copy ``local`` to guest path ``remote``."""

    def get(self, remote: str, local: Path) -> None:
        """Copy guest path ``remote`` to ``local``."""


# ---- the shell: one agent in one guest ---------------------------------------------


class Agent:
    """The agent deployed into one guest."""

    def __init__(
        self,
        shell: AgentShell,
        build: AgentBuild,
        profctl_binary: Path,
        workdir: Path,
        *,
        nmi_expected: bool,
        pmu_irq_label: str,
        cycles_per_ns: float | None = None,
        timeouts: Timeouts | None = None,
        vmlinux: Path | None = None,
        pmu: tuple[frozenset[str], bool] | None = None,
    ) -> None:
        self.shell = shell
        self.pmu_irq_label = pmu_irq_label  # the arch's /proc/interrupts name of the PMU IRQ
        self.build = build
        self.profctl_binary = profctl_binary
        self.workdir = workdir
        self.nmi_expected = nmi_expected
        self.cycles_per_ns = cycles_per_ns  # the arch's fixed cycle rate, if it has one
        self.loaded: AgentSpec | None = None
        self._runs = 0
        self._pmu = pmu  # `pmu_events`, where the guest's caller already read them
        self._kallsyms: tuple[str, ...] = ()  # the loaded module's kallsyms lines
        self._graphs: dict[str, NmiGraph] = {}  # flavour -> its NMI call graph (`nmi_graph`)
        self._kernel_lines: tuple[str, ...] = ()  # program.KERNEL_NAMES' kallsyms lines
        #: A profctl sequence's default budget: the command budget (scaled).
        self.timeouts = timeouts or Timeouts.from_env()
        self.vmlinux = vmlinux  # the guest kernel's, unstripped (None: frames not judged)
        self.witness: Witness | None = None  # armed on WITNESSED_HANDLER at every load
        self.nmi_trace: str | None = None  # a guest command run after every load (nmitrace)

    def deploy(self) -> None:
        """Copy the module and profctl into the guest."""
        self.shell.run(f"mkdir -p {GUEST_DIR}")
        self.shell.put(self.build.ko, f"{GUEST_DIR}/profagent.ko")
        self.shell.put(self.profctl_binary, f"{GUEST_DIR}/profctl", mode=0o755)
        # The ground-truth workload, built beside profctl (harness.agent.truth.program).
        self.shell.put(self.profctl_binary.parent / TRUTH_BINARY, program.GUEST_PATH,
                       mode=0o755)  # fmt: skip

    def truth_image(self) -> program.TruthImage:
        """The ground-truth workload's functions (host copy, unstripped) and profctl's text.

        :raise InfraError: the workload is missing or stripped.
        """
        return truth_image_of(self.profctl_binary)

    def spin_loop(self) -> tuple[int, int]:
        """Where profctl's busy loop runs once its child is pinned (``spin_loop``).

        :raise InfraError: profctl has no such function (a stale or stripped build).
        """
        return spin_loop_of(self.profctl_binary)

    def module_functions(self) -> FunctionTable:
        """The loaded module's functions where the kernel put them (``/proc/kallsyms``).

        :raise InfraError: kallsyms lists none of them, or hides their addresses.
        """
        self._kallsyms = self._kallsyms or self._read_kallsyms()
        return place_module(module_table(self.build.ko), self._kallsyms)

    def kallsyms_functions(self, names: Sequence[str]) -> FunctionTable:
        """Core kernel functions by name where ``/proc/kallsyms`` puts them (`place_kernel`).

        Names among `program.KERNEL_NAMES` come from the lines read at load, before any
        profctl sequence, in an input-free guest (it answers only the commands before
        it); a guest over SSH is asked here, once per load (a pass over /proc/kallsyms
        under TCG is not free, and most loads launch no zero workload).

        :raise InfraError: kallsyms lists one of them not, or hides its address.
        """
        if set(names) <= set(program.KERNEL_NAMES):
            self._kernel_lines = self._kernel_lines or self._read_kernel_lines()
            return place_kernel(self._kernel_lines, names)
        found = self.shell.run(kernel_lines_command(names), check=False)
        return place_kernel(found.stdout.splitlines(), names)

    def kernel_functions(self) -> FunctionTable | None:
        """The guest kernel's functions from its vmlinux (None: none was given).

        Its link addresses are its run addresses: the kernel is built without
        CONFIG_RANDOMIZE_BASE (no KASLR). Read once per process (about 15 s).

        :raise InfraError: the file is not an unstripped ELF64 vmlinux.
        """
        return kernel_table(self.vmlinux) if self.vmlinux is not None else None

    def nmi_graph(self, flavour: str) -> NmiGraph:
        """What the built module's NMI entry reaches for ``flavour`` (C-2).

        Its ``.ko`` read on the host once per flavour (`truth.nmigraph`, 0.1-0.5 s).
        """
        if flavour not in self._graphs:
            self._graphs[flavour] = nmi_graph(self.build.ko.read_bytes(), flavour=flavour)
        return self._graphs[flavour]

    def kernel_sanitizers(self) -> tuple[str, ...]:
        """`program.KERNEL_SANITIZERS` the guest kernel was built with (`sanitizers_of`)."""
        return program.sanitizers_of(self.vmlinux)

    def _read_kernel_lines(self) -> tuple[str, ...]:
        """`program.KERNEL_NAMES`' ``/proc/kallsyms`` lines (`kernel_lines_command`)."""
        found = self.shell.run(kernel_lines_command(program.KERNEL_NAMES), check=False)
        return tuple(found.stdout.splitlines())

    def _read_kallsyms(self) -> tuple[str, ...]:
        """The loaded module's ``/proc/kallsyms`` lines, read in the guest now."""
        found = self.shell.run("grep '\\[profagent\\]$' /proc/kallsyms", check=False)
        return tuple(found.stdout.splitlines())

    @timed(RUNS)
    def load(
        self,
        spec: AgentSpec,
        *,
        throttling_disabled: bool = True,
        max_sample_rate: int | None = None,
        burst_wait_ms: int | None = None,
    ) -> None:
        """Load the module with ``spec``'s parameters (unloading a loaded one first).

        Every load states the perf core's throttling (`set_throttling`): off by
        default, for exact counts. A guest's sysctls are reset between tests, and a
        throttled event on an idle CPU (its tick stopped) may never be unthrottled.
        The spec, and whether the guest's PMU has its event, are checked first.
        ``burst_wait_ms``: how long ``inject`` waits for its bursts (None: the
        budget's, `burst_wait_ms`); a run that wants injections to time out sets it.

        :raise ConfigError: the spec is impossible or names an event the PMU lacks.
        :raise ModuleLoadError: insmod failed; carries the dmesg lines it caused.
        """
        spec.validate()
        why = event_available(spec.event, *self.pmu_events())
        if why:
            raise ConfigError(f"agent spec: {why}")
        wait_ms = self.burst_wait_ms if burst_wait_ms is None else burst_wait_ms
        throttle = throttling_command(disabled=throttling_disabled, max_sample_rate=max_sample_rate)
        self.insmod((*spec.module_params(), f"burst_wait_ms={wait_ms}"), before=throttle)
        self.loaded = spec
        if self.witness is not None:
            self.witness.arm(self.module_functions().named(WITNESSED_HANDLER).start)
        if self.nmi_trace is not None:
            self.shell.run(self.nmi_trace)
        # An input-free guest (harness.scenarios.inputfree) answers only the commands before
        # its profctl sequence: where the module landed is read now, not when a run asks
        # (`module_functions`; a pass over /proc/kallsyms under TCG took 0.3 to 2.4 s).
        if getattr(self.shell, "input_free", False):
            self._kallsyms = self._read_kallsyms()
            self._kernel_lines = self._read_kernel_lines()
        LOG.info("agent loaded: %s", " ".join(spec.module_params()))

    @property
    def burst_wait_ms(self) -> int:
        """How long the module's ``inject`` waits for its bursts, in ms.

        A quarter of the (scaled) command budget, so a starved vCPU is not a failure.
        """
        return int(self.timeouts.command_s * 250)

    def pmu_events(self) -> tuple[frozenset[str], bool]:
        """The guest PMU's event names (sysfs), and whether it has a PMU at all.

        Read once per agent: a guest's PMU does not change while it runs.
        """
        if self._pmu is None:
            listing = self.shell.run(f"ls {PMU_EVENT_DIRS} 2>/dev/null", check=False).stdout
            names = frozenset(listing.split())
            self._pmu = (names, bool(names))
        return self._pmu

    def insmod(self, params: Sequence[str], *, before: str = "") -> None:
        """``insmod`` the agent with raw ``params`` (unloading a loaded one first).

        One guest command: the unload, ``before`` (a command that must succeed first,
        such as `throttling_command`), the insmod, and dmesg read back only when insmod
        fails, and then only the lines it added.

        :raise GuestCommandError: the unload or ``before`` failed.
        :raise ModuleLoadError: insmod failed; carries the dmesg lines it caused.
        """
        self._forget()
        insmod = shlex.join(["insmod", f"{GUEST_DIR}/profagent.ko", *params])
        first = [UNLOAD_IF_LOADED, *([before] if before else [])]
        command = "; ".join(f"( {c} ) || exit {_BEFORE_INSMOD + i}" for i, c in enumerate(first))
        result = self.shell.run(
            f"{command}; n=$(dmesg | wc -l); {insmod} || {{ s=$?; "
            "dmesg | tail -n +$((n + 1)) >&2; exit $s; }",
            check=False,
        )
        if _BEFORE_INSMOD <= result.exit_status < _BEFORE_INSMOD + len(first):
            failed = first[result.exit_status - _BEFORE_INSMOD]
            raise GuestCommandError(failed, result.exit_status, result.stdout, result.stderr)
        if result.exit_status != 0:
            lines = result.stderr.splitlines()
            why = lines[0].strip() if lines else result.stdout.strip()
            raise ModuleLoadError(f"the agent did not load: {why}", "\n".join(lines[1:]))

    @timed(RUNS)
    def unload(self, *, then: str = "") -> None:
        """Unload the module if it is loaded, then run ``then`` (one guest command).

        :raise GuestCommandError: the unload (or ``then``) failed.
        """
        self.shell.run(f"{UNLOAD_IF_LOADED}{f' && {then}' if then else ''}")
        self._forget()

    def _forget(self) -> None:
        """No module loaded, nor where one landed: the next load reads it anew."""
        self.loaded = None
        self._kallsyms = self._kernel_lines = ()

    def set_throttling(self, *, disabled: bool, max_sample_rate: int | None = None) -> None:
        """Switch the perf core's interrupt throttling off or back on (`throttling_command`)."""
        self.shell.run(throttling_command(disabled=disabled, max_sample_rate=max_sample_rate))

    @timed(RUNS)
    def steps(
        self, steps: Sequence[str], *, timeout_s: float | None = None
    ) -> tuple[profctl.StepResult, ...]:
        """Run ``steps`` in one profctl process; keep its output in the workdir.

        Blocks up to ``timeout_s`` (default: the scaled command budget).
        """
        self._runs += 1
        budget = timeout_s if timeout_s is not None else self.timeouts.command_s
        try:
            results = run_profctl(self.shell, f"{GUEST_DIR}/profctl", steps, timeout_s=budget)
        except GuestCommandTimeout as exc:
            hang = self.workdir / f"profctl-{self._runs:02d}.hang.txt"
            why = hang_evidence(self.shell, hang, timeout_s=self.timeouts.qmp_s * 4)
            raise GuestCommandTimeout(f"{exc}; {why}") from exc
        log = self.workdir / f"profctl-{self._runs:02d}.txt"
        pairs = zip(steps, results, strict=True)
        log.write_text("".join(f"{s}\n  -> {r.describe()}\n" for s, r in pairs))
        opened = [r.int_value("fd") for r in results if r.op == "open" and r.ok][:1]
        if opened and opened[0] != FD:
            raise InfraError(f"profctl's first open got fd {opened[0]}, not {FD}")
        return results

    @timed(RUNS)
    def steps_with_host_actions(
        self,
        steps: Sequence[str],
        actions: Mapping[str, Callable[[], None]],
        *,
        timeout_s: float | None = None,
    ) -> tuple[profctl.StepResult, ...]:
        """Run ``steps`` while the host acts at marked points (`run_with_host_actions`)."""
        budget = timeout_s if timeout_s is not None else self.timeouts.command_s
        return run_with_host_actions(lambda: self.steps(steps, timeout_s=budget), actions,
                                     self.shell, timeout_s=budget)  # fmt: skip

    def counters(self) -> AgentCounters:
        """Read the debugfs files now."""
        plan = counters_steps()
        return counters_of(Results.of(plan, self.steps(texts(plan))))

    def online_cpus(self) -> tuple[int, ...]:
        """CPUs online in the guest now."""
        text = self.shell.run("cat /sys/devices/system/cpu/online").stdout.strip()
        cpus: list[int] = []
        for part in text.split(","):
            low, _, high = part.partition("-")
            cpus.extend(range(int(low), int(high or low) + 1))
        return tuple(cpus)

    def run_steps(
        self,
        steps: Sequence[str],
        *,
        actions: Mapping[str, Callable[[], None]] | None = None,
        timeout_s: float | None = None,
    ) -> tuple[profctl.StepResult, ...]:
        """`steps`, or `steps_with_host_actions` when the host acts at marked points."""
        if actions:
            return self.steps_with_host_actions(steps, actions, timeout_s=timeout_s)
        return self.steps(steps, timeout_s=timeout_s)

    def fetch(self, remote: str, name: str) -> bytes:
        """Copy guest file ``remote`` into the workdir as ``name``; its bytes."""
        local = self.workdir / name
        self.shell.get(remote, local)
        return local.read_bytes()

    def decode(self, layout: str, data: bytes) -> list[dict[str, int]]:
        """Records of ``layout`` (a C struct name) in ``data``, by the rendered decoder.

        :raise ValueError: the stream ends inside a record.
        """
        records: list[dict[str, int]] = self.build.decoder.decode_all(layout, data)
        return records

    def decode_framed(self, data: bytes) -> tuple[list[dict[str, object]], int]:
        """Whole varint-framed records in ``data`` (kprof's stream) and the bytes they took."""
        found: tuple[list[dict[str, object]], int] = self.build.decoder.decode_framed(data)
        return found

    def save_run(self, record: Mapping[str, object]) -> Path:
        """Write one run's record (plus the build's identity) as JSON; its path."""
        path = self.workdir / f"agent-run-{self._runs:02d}.json"
        path.write_text(json.dumps({"build": self.build.record(), **record}, indent=1) + "\n")
        return path

    @property
    def run_count(self) -> int:
        """Profctl sequences run so far (names the files a run keeps)."""
        return self._runs

    def nmi_expected_for(self, spec: AgentSpec) -> bool:
        """Whether overflows arrive as NMIs: the PMU in NMI mode; a software clock never."""
        return self.nmi_expected and spec.event != "cpu-clock"

    def events_per_ns(self, spec: AgentSpec) -> float | None:
        """Events per enabled nanosecond where that rate is fixed (cycles under TCG)."""
        return self.cycles_per_ns if spec.event == "cycles" else None
