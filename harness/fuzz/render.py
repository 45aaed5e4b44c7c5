"""A fuzzed sequence as a scenario file's text (`scenarios/FORMAT.md`).

Pure: the text `harness.scenarios.load.load_scenario` reads back. Every sequence the
fuzzer runs goes through this text and the loader, so a finding's scenario is the
very file that ran. A finding's expectations are the defect's own numbers (``invoke
repro`` reproduces it when they recur); a finding without numbers expects the
oracles it broke to hold, so its replay shows them not held::

    text = scenario_text(ScenarioText(name="fuzz-dt-1", description="...", seed=1,
                         topology="1s1cl1c1t", agent={"flavour": "dt"}, steps=steps))
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from harness.fuzz.invariants import Finding
from harness.scenarios.types import Step

#: What a sequence with no finding expects: the shared interrupt count balances.
CLEAN_EXPECT: tuple[Mapping[str, str | int], ...] = ({"oracle": "CALLS"},)


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
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
    expect: tuple[Mapping[str, str | int], ...] = CLEAN_EXPECT
    variant: str = "default"
    extra: Mapping[str, object] = field(default_factory=dict)


def scenario_text(parts: ScenarioText) -> str:
    """The TOML text of ``parts``: top-level keys, [guest], [agent], steps, expect."""
    lines = [
        f"name = {_value(parts.name)}",
        f"description = {_value(parts.description)}",
        f"seed = {parts.seed}",
        "",
        "[guest]",
        f"topology = {_value(parts.topology)}",
        f"variant = {_value(parts.variant)}",
        "",
        "[agent]",
    ]
    lines += [f"{key} = {_value(value)}" for key, value in parts.agent.items()]
    for step in parts.steps:
        lines += ["", "[[steps]]", f"op = {_value(step.op)}"]
        lines += [f"{key} = {_value(value)}" for key, value in step.params().items()]
    for item in parts.expect:
        lines += ["", "[[expect]]", *(f"{k} = {_value(v)}" for k, v in item.items())]
    return "\n".join(lines) + "\n"


def finding_expect(findings: Sequence[Finding]) -> tuple[Mapping[str, str | int], ...]:
    """The expectations a finding's scenario carries: its numbers, else its oracles."""
    numbers = dict(pair for f in findings for pair in f.numbers)
    expect: list[Mapping[str, str | int]] = [
        {"value": name, "equals": value} for name, value in sorted(numbers.items())
    ]
    if expect:
        return tuple(expect)
    oracles = sorted({f.oracle for f in findings if f.oracle is not None})
    return tuple({"oracle": name} for name in oracles) or CLEAN_EXPECT


def describe(findings: Sequence[Finding], seed: int, flavour: str) -> str:
    """The scenario's description: what broke, how it was found, what its expects mean."""
    lines = [
        f"Found by `invoke fuzz --flavour {flavour} --seed {seed}` and shrunk. "
        "The expectations are the numbers the defect showed (a replay reproduces "
        "it when they recur); without numbers, the oracles the defect broke (a replay "
        "shows them not held)."
    ]
    if any(f.kind in ("call", "guest") for f in findings):
        lines.append(
            "A call failed or the guest broke: a replay reproduces it when the run "
            "ends in the same error (CALLS below is only the file's one expectation)."
        )
    lines += [f"- {f.kind}: {f.what}" for f in findings]
    return "\n".join(lines)
