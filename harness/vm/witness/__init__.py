"""The emulator as witness: every PMU overflow seen from outside the guest.

While a run samples, QEMU's gdbstub is opened at run time (QMP's HMP ``gdbserver``) and
``gdb-multiarch`` is attached through it with a breakpoint on the agent's overflow
handler's first instruction, where the kernel hands it the overflow. At each hit the
witness reads only what the kernel passed in: the interrupted registers (``pt_regs``),
``current`` (``SP_EL0`` at EL1) and its pid, tgid and preempt count, and the frame
records from the interrupted frame pointer through guest memory. No agent instruction
has run; the layouts come from an object the harness compiles against the guest's
kernel (`offsets`), never from the agent.

    offsets.py  the kernel's layouts, compiled and read as the kernel's asm-offsets are
    gdbside.py  the breakpoint, run inside gdb (its Python API); stdlib and gdb only
    records.py  what one overflow was (`Overflow`), parsed from gdbside's lines
    session.py  the shell: gdbserver on, gdb attached and detached by its own PID
"""
