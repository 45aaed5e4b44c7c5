"""What a flavour of the agent is, as data: now `harness.agent.values.info`, named here too.

The flavours' registry reads these types, so they sit below it with the agent's other
values; this name stays for what still imports it (`harness.mutation`'s cases and groups,
flavour packages outside the tree written against it). New code imports
`harness.agent.values.info`::

    from harness.agent.values.info import FlavourInfo, Mutant
"""

from __future__ import annotations

from harness.agent.values.info import (
    CORE_PERCPU,
    SHARED_CASES,
    Capability,
    FlavourInfo,
    Mutant,
    Param,
    Quirk,
)

__all__ = ["CORE_PERCPU", "SHARED_CASES", "Capability", "FlavourInfo", "Mutant", "Param", "Quirk"]
