"""kprof: a port of Akaros kprof (seeds-spec §2) as an agent flavour."""
