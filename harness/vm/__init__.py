"""QEMU: command lines (pure), the QMP session and the VM lifecycle."""
