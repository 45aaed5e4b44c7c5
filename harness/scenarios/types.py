"""Scenario vocabulary: the ops, limits and value types a scenario file is read into.

Shared by `harness.scenarios.checks` (which builds these values while checking a
file) and `harness.scenarios.load` (which loads files and re-exports every public
name here), so the dependency runs one way: scenarios → scenario_checks → here::

    step = Step(op="inject", cpu="all", count=100)
    step.describe()                                   # 'inject cpu=all count=100'
    OPS["probe"].ms_max                               # MAX_PROBE_MS (a flavour adds its own)
    Expectation(value="stats.sample", equals=16).holds(16)   # True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from harness.agent.flavour import OpRule
from harness.builder.kernel import Variant
from harness.vm.accel import AccelChoice
from harness.vm.topology import CpuTopology

#: An op's name: one of `OPS` or of the scenario's flavour's own (`Flavour.ops`).
Op = str
Relation = Literal["equals", "at_least", "at_most"]
RELATIONS: dict[Relation, str] = {"equals": "==", "at_least": ">=", "at_most": "<="}
ACCEL_CHOICES: tuple[AccelChoice, ...] = ("tcg", "kvm", "auto")
MAX_MS = 600_000
MAX_PROBE_MS = 5_000
MAX_COUNT = 1_000_000
#: The highest throttling-on limit a scenario may ask for (perf_event_max_sample_rate, per
#: second). Throttling off is harness.agent.steps.MAX_SAMPLE_RATE, far above this: a
#: scenario that wants no throttling says throttling = "off" instead of a huge limit.
MAX_SAMPLE_RATE = 1_000_000


@dataclass(frozen=True, slots=True)
class GuestSetup:
    """The guest a scenario boots."""

    arch: str
    accel: AccelChoice
    topology: CpuTopology
    variant: Variant
    nmi: bool
    kernel_args: tuple[str, ...]
    kernel: str = "6.1"  # Debian kernel version (harness.builder.kernels.VERSIONS)


@dataclass(frozen=True, slots=True)
class Step:
    """One action between START and STOP; fields an op does not take are None."""

    op: Op
    cpu: int | Literal["all"] | None = None
    count: int | None = None
    ms: int | None = None
    on: bool | None = None

    def params(self) -> dict[str, int | str | bool]:
        """The op's parameters, as in the file (defaults filled in)."""
        values = {"cpu": self.cpu, "count": self.count, "ms": self.ms, "on": self.on}
        return {key: value for key, value in values.items() if value is not None}

    def describe(self) -> str:
        """One line for logs: ``inject cpu=all count=100``."""
        return " ".join((self.op, *(f"{k}={v}" for k, v in self.params().items())))


@dataclass(frozen=True, slots=True)
class Expectation:
    """What a scenario expects of a run: one of four kinds.

    An oracle that holds (``fails``: the defect's scenario, the oracle fails); a number
    of the run with one relation; ``console``: a console or dmesg line of the attempt
    contains this text; ``error``: the run ends in a guest error whose message contains
    this text (a call the agent refused, a crash).
    """

    oracle: str | None = None
    value: str | None = None
    equals: int | None = None
    at_least: int | None = None
    at_most: int | None = None
    fails: bool = False
    console: str | None = None
    error: str | None = None

    def relation(self) -> tuple[Relation, int] | None:
        """The relation and its bound; None for an oracle, console or error expectation."""
        for name in RELATIONS:
            bound: int | None = getattr(self, name)
            if bound is not None:
                return name, bound
        return None

    def holds(self, observed: int) -> bool:
        """Whether the value's number ``observed`` meets the relation (False for the others)."""
        match self.relation():
            case ("equals", bound):
                return observed == bound
            case ("at_least", bound):
                return observed >= bound
            case ("at_most", bound):
                return observed <= bound
        return False

    def describe(self) -> str:
        """``oracle TP-O1 holds``, ``stats.sample == 16``, ``console shows 'x'``..."""
        if self.console is not None:
            return f"console shows {self.console!r}"
        if self.error is not None:
            return f"the run fails with {self.error!r}"
        relation = self.relation()
        if relation is None:
            return f"oracle {self.oracle} {'fails' if self.fails else 'holds'}"
        return f"{self.value} {RELATIONS[relation[0]]} {relation[1]}"


#: The ops every flavour shares; a flavour adds its own (`Flavour.ops`).
OPS: dict[str, OpRule] = {
    "inject": OpRule(cpu="one-or-all", count_max=MAX_COUNT),
    "kick": OpRule(cpu="one-or-all", cpu_default="all"),
    "spin": OpRule(cpu="one", ms_max=MAX_MS),
    "wait": OpRule(),
    "idle": OpRule(ms_max=MAX_MS),
    "probe": OpRule(cpu="one", ms_max=MAX_PROBE_MS),
    "offline": OpRule(cpu="hotplug"),
    "online": OpRule(cpu="hotplug"),
    "pause": OpRule(ms_max=MAX_MS),
    "inject-nmi": OpRule(),
}
