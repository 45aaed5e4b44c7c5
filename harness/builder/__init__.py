"""Builds into the content-addressed cache: kernels, rootfs, modules, host tools, keys."""
