"""The profiling agent ``profagent``: spec, rendering, build, guest driver and oracles."""
