"""The matrix tier: one pytest cell per combination of axes (`invoke test --matrix`)."""
