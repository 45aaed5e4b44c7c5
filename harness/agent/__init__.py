"""The profiling agent ``profagent``: what it is, how it runs in a guest, and how it is judged.

Where to look first: `harness.agent.driver` (the agent in one booted guest: deploy,
load, run, collect), `harness.agent.flavour` (what a flavour is to the rest of the
harness, and `behaviour`, the registry of each flavour's runner, oracles and report),
`harness.agent.profctl` (the language of the guest tool every run speaks through;
`profctl_build` compiles it, `profctl_run` runs a sequence). The rest is grouped by
concern, in the order of the data flow::

    values/    flavour data types, record layouts, a run's results, samples, statistics
    flavours/  the registry and each flavour's data (its folder's rest: at the very top)
    mutants.py the sabotages compiled into the agent, and mutation runs' verdicts
    module/    the kernel module: spec, render, build
    steps.py   the profctl sequences a run sends and the counters it reads back
    truth/     the ground-truth workload: its build, symbols, launches, isolated CPU
    runner.py  the agent as a flavour's runner sees it, and one run as the rest reads it
    streamrun.py  a run whose records stream from read(2): its steps, collection, values
    judging.py the judging a flavour declares (`Laws`, `Judging`), composed once
    peer/      Linux perf beside the agent: the peer run, its counts, both profiles
    oracles/   the verdicts: laws, core and content oracles, evidence, reports

Each package's docstring says what it owns and which of the others it may import
(``May import:``); ``tests/unit/test_layout.py`` holds every module to it, and the
parts (each package, each module here, the registry, each flavour's folder) to no
cycle: the registry sits below everything that reads it. No module
outside ``flavours/`` names a flavour: the registry (`harness.agent.flavours`) and
`harness.agent.flavour.behaviour` find each one.
"""
