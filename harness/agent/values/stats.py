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


def chi2_sf(x: float, df: int) -> float:
    """P(X > x) for X chi-square with ``df`` degrees of freedom (regularised gamma Q)."""
    if x <= 0:
        return 1.0
    return _gamma_q(df / 2, x / 2)


def chi2_quantile(p: float, df: int) -> float:
    """The x with P(X ≤ x) = ``p`` (bisection on `chi2_sf`, to 1e-9 relative)."""
    lo, hi = 0.0, max(1.0, 2.0 * df)
    while chi2_sf(hi, df) > 1 - p:
        hi *= 2
    while hi - lo > 1e-9 * hi:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if chi2_sf(mid, df) > 1 - p else (lo, mid)
    return hi


def _gamma_q(a: float, x: float) -> float:
    """Regularised upper incomplete gamma Q(a, x): a series below a + 1, else a fraction."""
    log_front = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        for n in range(1, 1000):
            term *= x / (a + n)
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return max(0.0, 1.0 - total * math.exp(log_front))
    # Lentz's method for the continued fraction of Q
    tiny = 1e-300
    b, c, d = x + 1 - a, 1 / tiny, 1 / (x + 1 - a)
    h = d
    for i in range(1, 1000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return math.exp(log_front) * h
