"""A scenario's parts as the text of its file (`scenarios/FORMAT.md`).

Pure: the text `harness.scenarios.load.load_scenario` reads back. The fuzzer writes
every sequence it runs through it (`harness.fuzz.render`), and the shared stress plan
every case (`harness.scenarios.stress`), so the file kept is the very one that ran::

    text = scenario_text(ScenarioText(name="fuzz-dt-1", description="...", seed=1,
                         topology="1s1cl1c1t", agent={"flavour": "dt"}, steps=steps))
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from harness.scenarios.types import Step

#: What a sequence with no finding expects: the shared interrupt count balances.
CLEAN_EXPECT: tuple[Mapping[str, str | int | bool], ...] = ({"oracle": "CALLS"},)


def toml_value(value: object) -> str:
    """``value`` as a TOML value: a bool, an integer, a list of them or a basic string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(str(value))  # a TOML basic string: JSON's escapes are TOML's


@dataclass(frozen=True, slots=True)
class ScenarioText:
    """The parts of one scenario file."""

    name: str
    description: str
    seed: int
    topology: str
    agent: Mapping[str, object]
    steps: tuple[Step, ...]
    expect: tuple[Mapping[str, str | int | bool], ...] = CLEAN_EXPECT
    variant: str = "default"
    #: Further top-level keys (``run = "exact"``), written before the first table.
    extra: Mapping[str, object] = field(default_factory=dict)


def scenario_text(parts: ScenarioText) -> str:
    """The TOML text of ``parts``: top-level keys, [guest], [agent], steps, expect."""
    lines = [
        f"name = {toml_value(parts.name)}",
        f"description = {toml_value(parts.description)}",
        f"seed = {parts.seed}",
        *(f"{key} = {toml_value(value)}" for key, value in parts.extra.items()),
        "",
        "[guest]",
        f"topology = {toml_value(parts.topology)}",
        f"variant = {toml_value(parts.variant)}",
        "",
        "[agent]",
    ]
    lines += [f"{key} = {toml_value(value)}" for key, value in parts.agent.items()]
    for step in parts.steps:
        lines += ["", "[[steps]]", f"op = {toml_value(step.op)}"]
        lines += [f"{key} = {toml_value(value)}" for key, value in step.params().items()]
    for item in parts.expect:
        lines += ["", "[[expect]]", *(f"{k} = {toml_value(v)}" for k, v in item.items())]
    return "\n".join(lines) + "\n"
