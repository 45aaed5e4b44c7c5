"""The test matrix: its axes and cells, and the report and plots of a matrix run."""
