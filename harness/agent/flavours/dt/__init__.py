"""dt: the port of OpenBSD dt(4) (seeds-spec §3). See data.py, run.py, oracles.py."""
