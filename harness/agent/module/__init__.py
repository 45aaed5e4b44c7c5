"""The kernel module ``profagent.ko``: what it is asked to be, and how it is made.

Owns the typed spec (`spec`), the binary layouts of its records and ioctls
(`layouts`), the data types a flavour is described with (`info`: counters, quirks,
parameters, mutants, fault points), the rendering of C, Kbuild and the Python
decoder from them (`render`) and the cached build (`build`). Pure but for the build.

May import: flavours, mutants. (The flavours' registry and data, which
render and the spec validate against; the mutants' names, which become the C's enum.)
"""
