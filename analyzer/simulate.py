"""Seeded Monte Carlo over triangular distributions: P50 and P80 of a sum of uncertain efforts.

Each variable is a (low, likely, high) range in person-days with a stable key. Its draws come from
a generator seeded by the key alone, by inverse transform of the same uniforms, so:
- the result is the same on every run and machine (numpy's PCG64 stream, a fixed trial count);
- adding a variable, or widening one (any of low/likely/high up), never lowers any trial's total,
  because the triangular quantile function rises with each of its three parameters; hence P50
  and P80 never fall when findings are added (the property tests check this).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

TRIALS = 20_000
SEED_SALT = b"neuron-ready/effort/v1:"


def seed_of(key: str) -> int:
    return int.from_bytes(hashlib.sha256(SEED_SALT + key.encode("utf-8")).digest()[:8], "big")


def triangular_ppf(u: np.ndarray, low: float, likely: float, high: float) -> np.ndarray:
    """The u-quantiles of Triangular(low, likely, high)."""
    import numpy as np

    if high <= low:
        return np.full_like(u, low)
    span = high - low
    cut = (likely - low) / span
    left = low + np.sqrt(u * span * (likely - low))
    right = high - np.sqrt((1.0 - u) * span * (high - likely))
    return np.where(u < cut, left, right)


def quantiles(variables: list[tuple[str, float, float, float]], qs: tuple[float, ...] = (0.5, 0.8),
              trials: int = TRIALS) -> list[float]:
    """Quantiles of a sum of triangular variables (key, low, likely, high). Variables with different
    keys are independent; variables that share a key share their uniforms (fully correlated: the
    same technique repeated, which goes well or badly everywhere at once)."""
    import numpy as np  # here, not at the top: the main process imports it while workers parse

    total = np.zeros(trials)
    by_key: dict[str, list[tuple[float, float, float]]] = {}
    for key, low, likely, high in variables:
        by_key.setdefault(key, []).append((low, likely, high))
    for key in sorted(by_key):
        u = np.random.default_rng(seed_of(key)).random(trials)
        for low, likely, high in sorted(by_key[key]):
            if high > 0:
                total += triangular_ppf(u, low, likely, high)
    # "inverted_cdf" returns an actual trial total: monotone in every trial, no interpolation.
    return [float(np.quantile(total, q, method="inverted_cdf")) for q in qs]
