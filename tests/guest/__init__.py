"""The guest tier: tests that boot QEMU guests (pooled or their own)."""
