"""The verdicts: what every flavour's run is held to, and how verdicts are shown.

Owns the laws every oracle states (`laws`), the evidence the agent does not produce
(`evidence`), the core's oracles (`core`, `budgets`), the content oracles (`content`
over a `content_view`: MODE there, then `who`, `where`, `chain` with the call-chain
laws `frames` and `walks`), WITNESS against the emulator's witness (`witness`, its walks
`witness_walks`), and the shared report helpers (`report`). Pure: values
in, verdicts out. The values they are written in (the counters, `Violation`,
`Judged`, the sample, the statistics) are `harness.agent.values`, which the steps
and the peer read too; `results` names the run's values here as well.

May import: values, module, truth, peer, steps.
"""
