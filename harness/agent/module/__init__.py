"""The kernel module ``profagent.ko``: what it is asked to be, and how it is made.

Owns the typed spec (`spec`), the rendering of C, Kbuild and the Python decoder from
it and every flavour's data (`render`) and the cached build (`build`). Pure but for
the build. The data types a flavour is described with and the binary layouts of its
records and ioctls are `harness.agent.values` (`info`, `layouts`), below the
flavours' registry; `info` and `layouts` name them here as well.

May import: values, flavours, mutants. (The data types; the flavours' registry and
data, which render and the spec validate against; the mutants' names, which become
the C's enum.)
"""
