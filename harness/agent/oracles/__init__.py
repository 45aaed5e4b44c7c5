"""The verdicts: what every flavour's run is held to, and how verdicts are shown.

Owns the run's shared values (`results`: snapshot, `Violation`, `Judged`), the laws
every oracle states (`laws`), the evidence the agent does not produce (`evidence`),
the one sample type the content oracles read (`samples`), the statistics the laws are
bounded with (`stats`), the core's oracles (`core`, `budgets`), the content oracles
(`content` over a `content_view`: MODE there, then `who`, `where`, `chain` with the
call-chain laws `frames` and `walks`), and the shared report helpers (`report`). Pure:
values in, verdicts out.

May import: module, truth, peer, steps.
"""
