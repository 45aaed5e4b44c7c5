"""Linux perf beside the agent: the independent peer of its counts and its profile.

Owns the peer run (`run`: any flavour's run with perf recording beside it, in rounds
as long as `sizing` says PEER and PROFILE need), the
PEER law over perf's samples per CPU in the agent's window (`counts`), and PROFILE:
both profilers' samples named by one symboliser and folded (`symbols`), the samples it
compares (`pairing`), and the chi-square test and table (`profile`); both profiles as
speedscope's JSON and pprof's proto (`export`).

May import: values, runner, module, steps, truth.
"""
