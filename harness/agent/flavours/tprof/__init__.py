"""tprof: the port of NetBSD tprof (seeds-spec §1). See data.py, run.py, oracles.py."""
