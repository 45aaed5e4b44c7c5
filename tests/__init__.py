"""profbench's tests: the unit tier, the guest tier, the scenarios and the matrix."""
