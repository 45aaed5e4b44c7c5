"""A flavour's rare-writer run as a scenario: what the overlap watch repeats until a pair is met.

A flavour declares, with each race pair, the run that makes its writer write often
(`harness.agent.values.stress.RareWriters`: small blocks, small rings, a drain or sweep
that runs often, a reader that drains or none); this writes it as a scenario for the
guest's topology, judged as any run by the flavour's oracles and the shared interrupt
count (`CALLS`). The file is kept, and ``invoke repro FILE`` replays it::

    case = rare_case("kprof", pair.drive, "1s1cl2c1t", cpus=2)
    result = run_case(agent, case, out_dir)      # harness.scenarios.stress: run, judge

The overlap watch runs it beside its spinners (`harness.agent.rarerounds.drive_rare_writers`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from harness.agent.values.stress import RareWriters, StepData
from harness.scenarios.stress import CALLS, StressCase
from harness.scenarios.text import ScenarioText, scenario_text
from harness.scenarios.types import Step

#: Keys a step's table may carry besides ``op`` (`scenarios/FORMAT.md`).
STEP_KEYS = ("cpu", "count", "ms", "on")


def rare_case(flavour: str, drive: RareWriters, topology: str, cpus: int) -> StressCase:
    """``drive`` as a scenario of ``flavour`` on ``topology`` (``cpus`` CPUs); pure."""
    slug = re.sub(r"[^a-z0-9]+", "-", drive.name.lower()).strip("-")
    file = f"rare-{flavour}-{slug}"[:80].strip("-")
    parts = ScenarioText(
        name=file,
        description=f"The overlap watch's rare writers, {flavour}: {drive.name}.",
        seed=1,
        topology=topology,
        agent={"flavour": flavour, **drive.agent},
        steps=each_cpu(drive.steps, cpus),
        expect=(CALLS,),
    )
    return StressCase(f"rare writers: {drive.name}", file, scenario_text(parts))


def each_cpu(data: Sequence[StepData], cpus: int) -> tuple[Step, ...]:
    """``data`` as steps, a ``"cpu": "each"`` step once per CPU, in order."""
    out: list[Step] = []
    for item in data:
        each = item.get("cpu") == "each"
        for cpu in range(cpus) if each else (None,):
            fields = {key: item[key] for key in STEP_KEYS if key in item}
            if cpu is not None:
                fields["cpu"] = cpu
            out.append(Step(op=str(item["op"]), **fields))  # type: ignore[arg-type]
    return tuple(out)
