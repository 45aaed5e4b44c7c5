"""Ground truth the harness arranges and reads itself, never from the agent.

Owns the ground-truth workload (``guest/workloads/truth.c``): how it is compiled
(`build`), its model numbers, launches and what a run of it printed (`program`),
the functions of it, of the module and of the kernel read from their symbol tables
with pyelftools and capstone (`elfsyms`, `insns`), where a running guest put the module's and
the kernel's (`placement`: ``/proc/kallsyms``), and the CPU kept for the harness's own
tasks (`isolation`).

May import: profctl, steps.
"""
