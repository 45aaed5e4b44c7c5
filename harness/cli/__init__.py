"""What the invoke tasks call: test tiers and CI, sessions, bench, mutants, checks, cache."""
