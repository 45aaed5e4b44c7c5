"""``invoke mutants``: the mutation campaign, as the tasks and CI call it.

The campaign itself (its plan, the cases on their guests, the judged rows) is
`harness.mutation`; this is the command line's side of it (``tasks.py``'s ``mutants``,
CI's mutant stage in `harness.cli.ci`)::

    result = run_mutants(MutationRequest(full=False), Cache.default())
    write_table(result, format_table(result.rows))   # beside mutants.json
"""

from __future__ import annotations

from harness.mutation.campaign import MutationResult, run_mutants, write_table
from harness.mutation.plan import MutationRequest

__all__ = ["MutationRequest", "MutationResult", "run_mutants", "write_table"]
