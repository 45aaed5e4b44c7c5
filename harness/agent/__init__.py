"""The profiling agent ``profagent``: what it is, how it runs in a guest, and how it is judged.

Where to look first: `harness.agent.driver` (the agent in one booted guest: deploy,
load, run, collect), `harness.agent.flavour` (what a flavour is to the rest of the
harness, and `behaviour`, the registry of each flavour's runner, oracles and report),
`harness.agent.profctl` (the language of the guest tool every run speaks through;
`profctl_build` compiles it, `profctl_run` runs a sequence). The rest is grouped by
concern, in the order of the data flow::

    module/    the kernel module: spec, layouts, flavour data types, render, build
    truth/     the ground-truth workload: its build, symbols, launches, isolated CPU
    steps.py   the profctl sequences a run sends and the snapshot it reads back
    oracles/   the verdicts: laws, core and content oracles, evidence, statistics, reports
    peer/      Linux perf beside the agent: the peer run, its counts, both profiles
    mutants.py the sabotages compiled into the agent, and mutation runs' verdicts
    flavours/  one folder per flavour (data, runner, oracles, report) and its registry

Each package's docstring says what it owns and which of the others it may import
(``May import:``); ``tests/unit/test_layout.py`` holds every module to it. No module
outside ``flavours/`` names a flavour: the registry (`harness.agent.flavours`) and
`harness.agent.flavour.behaviour` find each one.
"""
