"""The mutation campaign: build each mutant, run it where it shows, and judge the catch.

The mutants themselves and the verdict on each row are `harness.agent.mutants` (the
catalogue); this stage runs them, for ``invoke mutants`` and CI's mutant stage
(`harness.cli.mutantruns`).

Quick (``invoke ci``): on one default-kernel guest, for every flavour, the
unmutated control and each quick mutant (the core's and the flavour's own), each
through the flavour's standard run and its exact-count run (quick skips the exact
run of a mutant the standard run already caught; full runs both). Full adds the mutants
that end their guest (an event left armed: one guest each), the debug-kernel
ones (a lock in NMI, a leak), whose catch is the console scan and kmemleak, and the
sanitizer ones (``kasan`` on the debug kernel, ``kcsan`` on the kcsan kernel), whose
catch is the report they name::

    result = run_mutants(MutationRequest(full=False), Cache.default())
    print(format_table(result.rows))           # harness.agent.mutants
    survivors(result.rows)                     # [] when every mutant was caught

Every run's evidence (profctl transcripts, agent runs, the console) stays in
``artifacts/mutants/<time>-<quick|full>/``, with ``mutants.json``.

By concern, in the order a campaign goes::

    plan.py        the request; which builds run which cases, on how many guests (pure)
    cases.py       one case: a build's agent on a guest through one run, judged; its row
    peer.py        the peer case, run again while a run could not tell
    groups.py      the default, armed, deterministic and debug groups, and the prebuild
    sanitizers.py  the KASAN and KCSAN cases, each on its kernel
    campaign.py    `run_mutants`: the groups in order and ``mutants.json``
"""
