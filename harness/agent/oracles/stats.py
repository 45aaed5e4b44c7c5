"""The statistics the oracles bound their laws with: binomial tails and chi-square.

Pure, stdlib only (`math`)::

    binomial_upper(1000, 0.01, 1e-6)    # at most this many of 1000 at p = 0.01, but for 1e-6
    chi2_quantile(1 - 1e-3, 5)          # the chi-square bound at df 5, alpha 1e-3
"""

from __future__ import annotations

import math


def binomial_upper(n: int, p: float, alpha: float) -> int:
    """The smallest k with P[Binomial(n, p) > k] ≤ ``alpha``."""
    if p <= 0 or n == 0:
        return 0
    if p >= 1:
        return n
    log_p, log_q = math.log(p), math.log1p(-p)
    tail, k = 1.0, 0
    for k in range(n + 1):
        tail -= math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                         + k * log_p + (n - k) * log_q)  # fmt: skip
        if tail <= alpha:
            return k
    return n
