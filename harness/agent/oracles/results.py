"""What every flavour's run is made of: now `harness.agent.values.results`, named here too.

The steps and the peer read these values below the oracles, so they sit with the
agent's other values; this name stays for what still imports it (the guest tier's
``tests/guest/verdicts.py``, flavour packages outside the tree written against it).
New code imports `harness.agent.values.results`::

    from harness.agent.values.results import AgentCounters, Judged, Violation
"""

from __future__ import annotations

from harness.agent.values.results import (
    CORE_NAMES,
    AgentCounters,
    Judged,
    Violation,
    flat_numbers,
)

__all__ = ["CORE_NAMES", "AgentCounters", "Judged", "Violation", "flat_numbers"]
