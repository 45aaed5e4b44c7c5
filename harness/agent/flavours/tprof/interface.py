"""tprof's control interface for the fuzzer (`harness.agent.controlspec`).

A scenario opens ``/dev/tprof`` and STARTs before the steps, STOPs and reads the
stream to its end after them; between, a sequence injects bursts, drains by hand
(``kick``, with ``drain = "manual"``), busy-loops, probes with interrupts off and
takes CPUs offline and back. tprof's own oracles (TP-O1's sample conservation
among them) judge every sequence::

    [op.op for op in INTERFACE.ops]    # ['inject', 'spin', 'wait', 'idle', 'probe', 'kick', ...]
"""

from __future__ import annotations

from harness.agent.controlspec import ControlInterface, shared_ops

INTERFACE = ControlInterface(
    flavour="tprof",
    files=("/dev/tprof", "/sys/kernel/debug/profagent/stats"),
    ops=shared_ops(kick=True, hotplug=True),
    agent={"drain": "manual"},  # kicks are the only drains, so TP-O1 counts them
)
