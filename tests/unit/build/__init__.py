"""Unit tests of the builds: cache, kernel config, rootfs, packages, modules."""
