"""``invoke fuzz``'s shell: sequences run in one booted guest, a finding shrunk to a scenario.

Hypothesis draws sequences from the flavour's interface (`harness.fuzz.generate`);
each becomes a scenario file, is loaded by `harness.scenarios.load.load_scenario` and
run by the scenario executor (`harness.scenarios.repro.program`, `run_agent`) in one
guest restored from its snapshot once, the module reloaded for every sequence. The
invariants (`harness.fuzz.invariants`) are checked after each; a failing sequence is
shrunk within the budget and the shortest is written as a scenario::

    result = fuzz(FuzzRequest(flavour="dt", quirks=("DT-D2",), budget_s=300, seed=1),
                  Cache.default(), announce=print)
    result.scenario        # scenarios/fuzz-dt-dt-d2-s1.toml, replayed by `invoke repro`
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness import arches
from harness.agent.driver import Agent
from harness.agent.flavour import behaviour
from harness.agent.module.build import export_agent
from harness.agent.oracles.evidence import kmemleak_command, module_leaks
from harness.agent.profctl import StepResult
from harness.agent.profctl_build import build_profctl
from harness.builder.cache import Cache
from harness.builder.images import prepare_images
from harness.errors import GuestError, HarnessError, InfraError
from harness.fuzz import calls, faults, generate, invariants, render
from harness.fuzz.invariants import Finding
from harness.scenarios.load import SCENARIOS_DIR, Scenario, load_scenario
from harness.scenarios.repro import program, run_agent
from harness.scenarios.types import Step
from harness.timeouts import Timeouts
from harness.vm.argv import MachineSpec
from harness.vm.guest import Guest
from harness.vm.record import new_run_dir
from harness.vm.sanitizer import AGENT_MODULE
from harness.vm.snapstore import SnapshotStore, running_guest
from harness.vm.ssh import GuestCommandTimeout

#: The load parameters of every sequence: exact counts (only injected bursts record).
BASE_AGENT: dict[str, object] = {"period": 200000, "pmu_produce": False}


#: A kmemleak scan after each sequence on the debug kernel: its minimum age (5 s) and two
#: scans (8-9 s each in a 512 MiB guest, `harness.cli.ci`).
KMEMLEAK_TIMEOUT_S = 90.0

#: Every CPU back online between sequences (a failed one never ran its closing steps).
ONLINE_ALL = (
    'for f in /sys/devices/system/cpu/cpu*/online; do grep -q 1 "$f" || echo 1 > "$f"; done'
)


@dataclass(frozen=True, slots=True)
class FuzzRequest:
    """One fuzz run: the flavour and build, the guest, the budget and seed."""

    flavour: str
    quirks: tuple[str, ...] = ()
    variant: str = "default"
    cpus: int = 2
    budget_s: float = 300.0
    shrink_s: float = 120.0  # spent shrinking a finding, beyond the budget
    seed: int = 0
    max_steps: int = 24
    scenario_dir: Path = SCENARIOS_DIR


@dataclass(frozen=True, slots=True)
class FuzzResult:
    """What the run did and found; ``scenario`` is None without a finding."""

    run_dir: Path
    sequences: int
    calls: int
    findings: tuple[Finding, ...]
    scenario: Path | None
    first_found_s: float | None
    first_found_sequence: int | None
    shrunk_steps: int | None
    elapsed_s: float
    #: Per fault-injection capability: failures forced, steps refused in first rounds;
    #: None on a kernel without fault injection.
    injected: dict[str, tuple[int, int]] | None = None


@dataclass(slots=True)
class _Tally:
    """The run's counters (mutable: the one place the search's progress lives)."""

    started: float
    sequences: int = 0
    calls: int = 0
    found: int = 0
    first_s: float | None = None
    first_sequence: int | None = None
    best: tuple[tuple[Step, ...], tuple[Finding, ...]] | None = None
    notes: list[str] = field(default_factory=list)
    injected: dict[str, tuple[int, int]] = field(default_factory=dict)

    def add_injected(self, counts: dict[str, tuple[int, int]]) -> None:
        """Add one sequence's `harness.fuzz.faults.fired` counts."""
        for name, (forced, failed) in counts.items():
            before = self.injected.get(name, (0, 0))
            self.injected[name] = (before[0] + forced, before[1] + failed)


class _FoundError(Exception):
    """Raised inside the Hypothesis test to mark a failing sequence (never escapes)."""


class _BudgetOverError(Exception):
    """The budget ran out with nothing found: ends the search (never escapes)."""


def _topology(cpus: int) -> str:
    return f"1s1cl{cpus}c1t"


class _RecordingAgent(Agent):
    """The agent, each profctl run's steps and results kept: the fuzzer reads its clocks."""

    recorded: list[tuple[tuple[str, ...], tuple[StepResult, ...]]]

    def steps(
        self, steps: Sequence[str], *, timeout_s: float | None = None
    ) -> tuple[StepResult, ...]:
        """`Agent.steps`, the steps and their results kept in ``recorded``."""
        results = super().steps(steps, timeout_s=timeout_s)
        self.recorded.append((tuple(steps), results))
        return results


class FuzzSession:
    """One guest, one agent build, and the sequences run in it."""

    def __init__(self, request: FuzzRequest, cache: Cache, announce: Callable[[str], None]):
        self.request = request
        self.cache = cache
        self.announce = announce
        self.interface = generate.interface_of(request.flavour)
        self.run_dir = new_run_dir("fuzz", f"{request.flavour}-s{request.seed}")
        self.target = generate.Target(self.interface, request.cpus)
        self.tally = _Tally(time.monotonic())
        self._stack = contextlib.ExitStack()
        self._agent: _RecordingAgent | None = None
        self._guest_n = 0
        self._guest: Guest | None = None

    def agent_table(self) -> dict[str, object]:
        """The [agent] table of every sequence's scenario."""
        return {
            "flavour": self.request.flavour,
            **BASE_AGENT,
            **self.interface.agent,
            "quirks": list(self.request.quirks),
        }

    def scenario_of(
        self,
        steps: tuple[Step, ...],
        name: str,
        findings: tuple[Finding, ...] = (),
        where: Path | None = None,
    ) -> Scenario:
        """``steps`` as a scenario file under ``where`` (the run dir), loaded back.

        The file holds the scenario steps; the process ops, which no scenario op runs,
        are named in its description.
        """
        description = (
            render.describe(findings, self.request.seed, self.request.flavour)
            if findings
            else f"fuzzed sequence {name}"
        )
        if any(calls.fuzz_only(self.interface, step.op) for step in steps):
            described = ", ".join(f"{i}: {s.describe()}" for i, s in enumerate(steps))
            description += (
                "\nThe whole sequence, with its process ops and fault ops (run by invoke "
                f"fuzz only, not by invoke repro): {described}"
            )
        parts = render.ScenarioText(
            name=name,
            seed=self.request.seed,
            topology=_topology(self.request.cpus),
            agent=self.agent_table(),
            steps=calls.scenario_steps(self.interface, steps),
            variant=self.request.variant,
            description=description,
            expect=render.finding_expect(findings),
        )
        folder = where or self.run_dir / "sequences"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.toml"
        path.write_text(render.scenario_text(parts))
        return load_scenario(path)

    def _guest_agent(self, scenario: Scenario) -> tuple[_RecordingAgent, Guest]:
        if self._agent is not None and self._guest is not None:
            return self._agent, self._guest
        self._guest_n += 1
        arch = arches.get(scenario.guest.arch)
        spec = MachineSpec(arch=arch, topology=scenario.guest.topology, nmi=True, accel="tcg")
        images = prepare_images(arch, scenario.guest.variant, self.cache)
        build = export_agent(scenario.agent, images, self.cache, self.run_dir / "agent")
        timeouts = Timeouts.from_env().for_variant(scenario.guest.variant)
        workdir = self.run_dir / f"guest-{self._guest_n}"
        guest = self._stack.enter_context(
            running_guest(
                spec,
                images,
                workdir,
                timeouts=timeouts,
                snapshots=SnapshotStore(self.cache, Timeouts.from_env()),
            )
        )
        self._guest = guest
        agent = _RecordingAgent(
            guest.shell,
            build,
            build_profctl(arch, self.cache),
            workdir,
            nmi_expected=spec.nmi,
            pmu_irq_label=arch.pmu_interrupt_label,
            cycles_per_ns=arch.cycles_per_ns("tcg"),
            vmlinux=images.vmlinux,
            timeouts=guest.timeouts,
        )
        agent.recorded = []
        agent.deploy()
        self._agent = agent
        return agent, guest

    def prepare(self) -> None:
        """Build what the guest needs and start it; the budget counts from here.

        A cold kernel build (10 minutes beside other guests) took a whole budget
        before the first sequence ran (kprof, KP-D5's build: 1 sequence in 691 s).
        """
        began = time.monotonic()
        ready = self.scenario_of((Step(op="wait"),), "guest", where=self.run_dir / "prepare")
        agent, _ = self._guest_agent(ready)
        present = agent.shell.run(faults.PRESENT_COMMAND, timeout_s=30.0, check=False)
        if present.exit_status == 0:  # the guest's kernel has failslab: fault ops are drawn
            call = faults.call_of(self.interface)
            self.target = dataclasses.replace(self.target, fault_call=call)
        self.tally.started = time.monotonic()
        injection = "on" if self.target.fault_call else "absent"
        self.announce(f"fuzz {self.request.flavour}: guest and agent ready after "
                      f"{self.tally.started - began:.0f} s, fault injection {injection}; "
                      "the budget starts now")  # fmt: skip

    def _drop_guest(self) -> None:
        """Stop the guest (a new one is started for the next sequence)."""
        self._agent = self._guest = None
        with contextlib.suppress(HarnessError):
            self._stack.close()
        self._stack = contextlib.ExitStack()

    def close(self) -> None:
        """Stop the guest; idempotent."""
        self._drop_guest()

    def execute(self, steps: tuple[Step, ...]) -> tuple[Finding, ...]:
        """Run ``steps`` as one scenario in the guest; the invariants it broke."""
        self.tally.sequences += 1
        self.tally.calls += len(steps)
        scenario = self.scenario_of(steps, f"seq-{self.tally.sequences:05d}")
        agent, guest = self._guest_agent(scenario)
        made = calls.plan(self.interface, steps, lambda prefix: _body(scenario, prefix),
                          self.target.fault_call)  # fmt: skip
        script = program(scenario, _no_pause, _no_nmi)
        script = dataclasses.replace(script, body=(*made.body, *script.body[-1:]))
        agent.shell.run(calls.setup_command(made), timeout_s=60.0)
        console = guest.vm.console_text()
        findings: list[Finding] = []
        agent.recorded = []
        try:
            run = run_agent(scenario, agent, script)
        except GuestError as exc:
            findings.append(Finding("guest", str(exc).splitlines()[0]))
            if isinstance(exc, GuestCommandTimeout):
                findings += self._unfinished(agent, made)
            with contextlib.suppress(HarnessError):  # which process, which call, if it can
                findings += self._call_findings(agent, made, scenario.name)
        except InfraError as exc:
            findings.append(Finding("call", str(exc).splitlines()[0]))
        else:
            findings += self._call_findings(agent, made, scenario.name)
            flavour = behaviour(scenario.agent.flavour)
            facts = generate.walk(self.target, steps)
            expected = self.interface.model.expected(facts)
            findings += invariants.number_findings(self.interface, run.numbers(), expected)
            applies = flavour.applicable(run)
            failed = [(v.oracle, str(v)) for v in flavour.check(run) if v.oracle in applies]
            unjudged = self.interface.model.unjudged(facts)
            findings += invariants.oracle_findings(self.interface, failed, unjudged)
        for ran, results in agent.recorded:
            self.tally.add_injected(faults.fired(ran, results))
        new_console = guest.vm.console_text()[len(console) :]
        findings += invariants.console_findings(new_console)
        dmesg = self._dmesg_and_unload(findings)
        findings += invariants.console_findings(dmesg)
        if findings:
            self._keep(scenario, new_console, dmesg, findings)
        return tuple(dict.fromkeys(findings))

    def _call_findings(self, agent: _RecordingAgent, made: calls.Plan, name: str) -> list[Finding]:
        """Each call against its deadline; each process op's processes against what it allows.

        The processes' outputs stay in the run dir (``processes/<sequence>.txt``).
        """
        first = calls.call_mark(0)[0]
        times: dict[str, int] = {}
        for steps, results in agent.recorded:
            if first in steps:
                times = calls.call_times_ns(steps, results)
        found = list(calls.deadline_findings(self.interface, made, times))
        if made.children:
            text = agent.shell.run(calls.outputs_command(made), timeout_s=60.0).stdout
            (self.run_dir / "processes").mkdir(exist_ok=True)
            (self.run_dir / "processes" / f"{name}.txt").write_text(text)
            found += calls.child_findings(self.interface, made, calls.split_outputs(text))
        return found

    def _unfinished(self, agent: _RecordingAgent, made: calls.Plan) -> list[Finding]:
        """The call a sequence that outlived its budget was in (its last mark), if any."""
        try:
            listing = agent.shell.run(calls.marks_command(), timeout_s=30.0).stdout
        except HarnessError:
            return []
        what = f"the sequence outlived its budget {calls.running_call(made, listing)}"
        return [Finding("deadline", what)]

    def _dmesg_and_unload(self, findings: list[Finding]) -> str:
        """The guest's new dmesg (cleared after), the module unloaded; a dead guest noted."""
        agent = self._agent
        if agent is None:
            return ""
        try:  # a sequence that failed half-way may have left a CPU offline
            agent.shell.run(ONLINE_ALL, timeout_s=60.0)
            if self.target.fault_call is not None:  # a sequence cut short may have left times
                agent.shell.run(faults.RESET_COMMAND, timeout_s=30.0)
            if self.request.variant == "debug":  # closed, still loaded: leaks name it
                scan = agent.shell.run(kmemleak_command(), timeout_s=KMEMLEAK_TIMEOUT_S)
                findings += invariants.leak_findings(module_leaks(scan.stdout, AGENT_MODULE))
            agent.unload()
            return agent.shell.run("dmesg -c", timeout_s=30.0).stdout
        except HarnessError as exc:
            findings.append(Finding("guest", f"no answer after the sequence: {exc}"))
            self._drop_guest()
            return ""

    def _keep(self, scenario: Scenario, console: str, dmesg: str, findings: list[Finding]) -> None:
        folder = self.run_dir / "findings" / scenario.name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "console.log").write_text(console)
        (folder / "dmesg.txt").write_text(dmesg)
        (folder / f"{scenario.name}.toml").write_text(scenario.path.read_text())
        (folder / "findings.txt").write_text("".join(f"{f.kind}: {f.what}\n" for f in findings))


def _body(scenario: Scenario, prefix: tuple[Step, ...]) -> tuple[str, ...]:
    """The executor's body for the scenario's first steps, without its final wait."""
    return program(dataclasses.replace(scenario, steps=prefix), _no_pause, _no_nmi).body[:-1]


def _no_pause(ms: int) -> None:
    raise InfraError("the fuzzer draws no pause")


def _no_nmi() -> None:
    raise InfraError("the fuzzer draws no inject-nmi")
