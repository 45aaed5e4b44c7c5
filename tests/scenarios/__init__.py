"""The shipped scenarios, each run in a guest as `invoke repro` runs it."""
