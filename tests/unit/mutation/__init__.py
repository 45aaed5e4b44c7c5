"""Unit tests of the mutation campaign: its plan, cases, peer retries and sanitizer groups."""
