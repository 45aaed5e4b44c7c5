"""Unit tests of the VM layer: argv, QMP, SSH, snapshots, topology, perf, baselines."""
