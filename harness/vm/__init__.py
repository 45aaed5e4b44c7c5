"""QEMU guests: the command line, the VM and its channels, snapshots, reuse, perf inside.

- the machine: `topology` (sockets × clusters × cores × threads), `accel` (KVM only
  where a real boot proves it works), `argv` (the QEMU command line, pure), `machine`
  (QEMU as a process), `qmp`, `console`, `ssh` (with `sshlogin`: each login's waits,
  paramiko's records of failed ones) and `shell` (the Protocol every guest shell
  meets), `vcpus` (where each vCPU is, when a guest hangs);
- a booted guest: `guest` (boot to an SSH login), `preflight` (is it the machine
  asked for), `record` (each run's ``run.json``);
- reuse: `snapshot`, `migration` and `snapstore` (save, load, cache guest state),
  `pool` (guests kept per process), `baseline` (a reused guest put back as it was);
- `perf`: Linux perf sampling inside a guest, beside the agent; `perfread`: the host's
  perf reading what it recorded;
- the sanitizer kernels: `sanitizer` (KASAN, KCSAN and UBSAN reports on a console, read
  as verdicts) and `kcsan` (KCSAN's counters and knobs, and whether a case could have
  seen a race).
"""
