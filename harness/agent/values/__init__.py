"""The values every part of the agent is written in: a flavour's data types, a run's results.

Owns what a flavour is, as data (`info`: counters, quirks, parameters, mutants, fault
points; `layouts`: the binary layouts of its records and ioctls), what a run is made of
and how it is judged (`results`: `AgentCounters`, `Violation`, `Judged`, ``UNJUDGED``), the one
sample type the content oracles and the peer read (`samples`), the statistics laws are
bounded with (`stats`), and text tables (`table`). Pure values and arithmetic: the
registry's data, the spec, the steps, the peer and the oracles all sit above it.

May import: nothing.
"""
