"""profbench: a QEMU test bench for ported kernel sampling profilers."""
