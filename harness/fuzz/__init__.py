"""The control-interface fuzzer: sequences from each flavour's declared interface.

Pure core: `harness.fuzz.generate` (Hypothesis strategies from
`harness.agent.controlspec.ControlInterface`), `harness.fuzz.invariants` (what must
hold after every sequence), `harness.fuzz.render` (a sequence as a scenario file).
Thin shell: `harness.fuzz.session` and `harness.fuzz.search` (one guest, the
scenario executor, shrinking, the finding's scenario). May import: agent, scenarios,
vm, builder.
"""
