r"""Seeded resampling shared by the statistics (flat: fairness and sensitivity both use it):
percentile bootstrap intervals and a paired sign-flip permutation test.

Every function takes ``random_state`` (an int >= 0 or a :class:`numpy.random.Generator`), so
a fixed seed gives the same interval on every machine, and draws its resamples in chunks of at
most ``max_cells`` array cells (default :data:`MAX_CELLS`, 4 M cells = 32 MiB of float64), so
memory stays bounded whatever ``n_boot`` and the sample size.

Percentile bootstrap of a mean
    Resample the ``m`` values with replacement ``n_boot`` times; the interval is the
    ``(1 - c) / 2`` and ``(1 + c) / 2`` quantiles of the resampled means (confidence ``c``).
    **0/1 shortcut**: for indicators with observed mean :math:`\hat p`, the number of ones in a
    resample of size ``m`` is exactly :math:`\mathrm{Binomial}(m, \hat p)`, so the bootstrap
    distribution of the mean is :math:`\mathrm{Binomial}(m, \hat p) / m`; it is drawn directly,
    in O(n_boot) time and memory, without a resampling matrix. A rate of exactly 0 or 1 then has
    the degenerate interval [0, 0] or [1, 1] (the percentile bootstrap cannot see beyond the
    sample; read it as "no node of the sample changed"). The audit's rates (flip rates,
    accuracies) therefore use the exact intervals of :mod:`gnnaudit.audit.intervals`; the
    bootstrap stays for statistics without a closed form (gaps, ratios, means).

Difference of two group rates (by-group flip rates; the audit's parity and equal-opportunity
gaps use Newcombe's score interval instead, :func:`gnnaudit.audit.intervals.largest_gap_interval`)
    Stratified bootstrap: each group is resampled within itself (its size fixed), the
    statistic is recomputed on every resample, the interval is percentile. With 0/1 values each
    group's resampled rate is drawn by the binomial shortcut.

Paired sign-flip permutation test
    For paired differences :math:`d_v = a_v - b_v`, the null hypothesis "``a_v`` and ``b_v``
    are exchangeable within each pair" makes every sign pattern :math:`s \in \{\pm 1\}^m`
    equally likely. With :math:`T = \bar d` and :math:`T^*_j = \frac1m \sum_v s_{jv} d_v` for
    ``n_perm`` random sign patterns, the one-sided (H1: mean > 0) p-value is

    .. math:: p = \frac{1 + \#\{j : T^*_j \ge T\}}{1 + n_{perm}},

    which is valid (never below its nominal level) for any ``n_perm`` when the pairs are
    independent.

Dependence through shared units: shared-multiplier bootstrap
    When the value of unit ``v`` is computed from a set :math:`R_v` of shared units (an audited
    node, its counterfactual evidences and its look-alikes), two values that share units are
    correlated and the plain sign flips underestimate the spread of the mean. The multiplier
    bootstrap then draws one Rademacher sign :math:`\xi_u` per *shared unit* and gives value
    ``v`` the weight :math:`\omega_v = |R_v|^{-1/2} \sum_{u \in R_v} \xi_u`:

    .. math:: T^* = \frac1m \sum_v \omega_v (d_v - \bar d), \qquad
              \operatorname{Cov}(\omega_v, \omega_w) =
              \frac{|R_v \cap R_w|}{\sqrt{|R_v| |R_w|}},

    so the bootstrap variance is the network-HAC estimate
    :math:`\frac{1}{m^2}\sum_{v,w} K_{vw} (d_v - \bar d)(d_w - \bar d)` with the overlap
    kernel :math:`K` (positive semi-definite by construction, the network analogue of the
    Bartlett kernel of overlapping time windows; cf. the dependent wild bootstrap, Shao 2010).
    With disjoint singleton sets it is the ordinary (centred) sign-flip multiplier bootstrap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gnnaudit._validation import MAX_RESAMPLES, check_array, check_float, check_int
from gnnaudit.errors import InvalidInputError

__all__ = [
    "MAX_CELLS",
    "Interval",
    "as_generator",
    "check_confidence",
    "percentile_interval",
    "bootstrap_mean_draws",
    "bootstrap_mean",
    "group_rate_draws",
    "bootstrap_rate_difference",
    "bootstrap_group_rates",
    "sign_flip_pvalue",
    "upper_tail_pvalue",
    "shared_multiplier_draws",
    "binomial_rates",
    "rate_interval",
    "finite_interval",
]

#: largest number of array cells one resampling chunk may hold (32 MiB of float64)
MAX_CELLS = 4_000_000


@dataclass(frozen=True)
class Interval:
    """A point estimate with its percentile bootstrap interval."""

    estimate: float
    ci_low: float
    ci_high: float
    confidence: float
    n_boot: int

    def as_tuple(self) -> tuple[float, float, float]:
        """``(estimate, ci_low, ci_high)``."""
        return self.estimate, self.ci_low, self.ci_high


def as_generator(random_state: Any) -> np.random.Generator:
    """``random_state`` as a Generator: an int >= 0 seeds a new one, a Generator is used as is."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    seed = check_int("random_state", random_state, minimum=0)
    return np.random.default_rng(seed)


def check_confidence(confidence: Any) -> float:
    """``confidence`` as a float in [0.5, 1)."""
    return check_float("confidence", confidence, minimum=0.5, maximum=1.0, inclusive=(True, False))


def percentile_interval(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    """The ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of ``draws``."""
    confidence = check_confidence(confidence)
    draws = np.asarray(draws, dtype=np.float64)
    if draws.size == 0:
        raise InvalidInputError("draws must hold at least one bootstrap value")
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(draws, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def _values(name: str, values: Any) -> np.ndarray:
    arr = check_array(name, values, ndim=1, dtype=np.float64, min_rows=1)
    return arr


def _is_binary(values: np.ndarray) -> bool:
    return bool(np.all((values == 0.0) | (values == 1.0)))


def _chunk_rows(width: int, max_cells: int) -> int:
    return max(1, int(max_cells) // max(1, int(width)))


def bootstrap_mean_draws(
    values: Any, n_boot: int, random_state: Any = 0, *, max_cells: int = MAX_CELLS
) -> np.ndarray:
    """``n_boot`` bootstrap replicates of the mean of ``values`` (0/1 values: binomial
    shortcut, see the module docstring). Memory: at most ``max_cells`` cells per chunk."""
    arr = _values("values", values)
    n_boot = check_int("n_boot", n_boot, minimum=1, maximum=MAX_RESAMPLES)
    rng = as_generator(random_state)
    m = arr.size
    if _is_binary(arr):
        return rng.binomial(m, float(arr.mean()), size=n_boot) / m
    out = np.empty(n_boot, dtype=np.float64)
    rows = _chunk_rows(m, max_cells)
    for start in range(0, n_boot, rows):
        stop = min(start + rows, n_boot)
        idx = rng.integers(0, m, size=(stop - start, m))
        out[start:stop] = arr[idx].mean(axis=1)
    return out


def bootstrap_mean(
    values: Any,
    n_boot: int = 1000,
    random_state: Any = 0,
    confidence: float = 0.95,
    *,
    max_cells: int = MAX_CELLS,
) -> Interval:
    """Mean of ``values`` with its percentile bootstrap interval (see the module docstring)."""
    arr = _values("values", values)
    confidence = check_confidence(confidence)
    draws = bootstrap_mean_draws(arr, n_boot, random_state, max_cells=max_cells)
    lo, hi = percentile_interval(draws, confidence)
    return Interval(float(arr.mean()), lo, hi, confidence, int(n_boot))


def _groups(values: Any, groups: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    arr = _values("values", values)
    g = np.asarray(groups.detach().cpu().numpy() if hasattr(groups, "detach") else groups)
    if g.ndim != 1 or g.shape[0] != arr.size:
        raise InvalidInputError(
            f"groups must be 1-D with one entry per value ({arr.size}), got shape {g.shape}"
        )
    if g.dtype.kind == "f" and not np.isfinite(g).all():
        raise InvalidInputError("groups must not hold NaN or inf")
    labels, codes = np.unique(g, return_inverse=True)
    return arr, labels, codes.reshape(-1)


def group_rate_draws(
    values: Any,
    groups: Any,
    n_boot: int,
    random_state: Any = 0,
    *,
    max_cells: int = MAX_CELLS,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Stratified bootstrap of the mean of ``values`` in every group of ``groups``.

    Returns ``(labels, sizes, estimates, draws)``: the sorted group labels, their sizes, the
    observed group means and an ``(n_boot, G)`` array of resampled group means (each group
    resampled within itself; 0/1 values by the binomial shortcut). The groups are drawn one
    after the other from one generator, in label order.
    """
    arr, labels, codes = _groups(values, groups)
    n_boot = check_int("n_boot", n_boot, minimum=1, maximum=MAX_RESAMPLES)
    rng = as_generator(random_state)
    sizes = np.bincount(codes, minlength=labels.size)
    estimates = np.bincount(codes, weights=arr, minlength=labels.size) / sizes
    draws = np.empty((n_boot, labels.size), dtype=np.float64)
    for j in range(labels.size):  # loop over groups (few), never over nodes
        draws[:, j] = bootstrap_mean_draws(arr[codes == j], n_boot, rng, max_cells=max_cells)
    return labels, sizes, estimates, draws


def bootstrap_group_rates(
    values: Any,
    groups: Any,
    n_boot: int = 1000,
    random_state: Any = 0,
    confidence: float = 0.95,
    *,
    max_cells: int = MAX_CELLS,
) -> pd.DataFrame:
    """Per-group mean of ``values`` with percentile bootstrap intervals.

    Returns a DataFrame with columns ``group, size, rate, ci_low, ci_high`` (groups sorted).
    """
    confidence = check_confidence(confidence)
    labels, sizes, est, draws = group_rate_draws(
        values, groups, n_boot, random_state, max_cells=max_cells
    )
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(draws, [alpha, 1.0 - alpha], axis=0)
    return pd.DataFrame(
        {
            "group": labels,
            "size": sizes.astype(np.int64),
            "rate": est,
            "ci_low": lo,
            "ci_high": hi,
        }
    )


def bootstrap_rate_difference(
    values: Any,
    groups: Any,
    *,
    group_a: Any = None,
    group_b: Any = None,
    n_boot: int = 1000,
    random_state: Any = 0,
    confidence: float = 0.95,
    max_cells: int = MAX_CELLS,
) -> Interval:
    """``rate(group_a) - rate(group_b)`` with a stratified percentile bootstrap interval.

    ``values``: per-node numbers (0/1 for rates, e.g. "predicted positive" for statistical
    parity, or "predicted positive" restricted to label-1 nodes for equal opportunity);
    ``groups``: the group of each value. Default ``group_a`` / ``group_b``: the larger and the
    smaller label when there are exactly two groups. Only the two named groups are resampled.
    """
    arr, labels, codes = _groups(values, groups)
    if group_a is None and group_b is None:
        if labels.size != 2:
            raise InvalidInputError(
                f"groups holds {labels.size} distinct groups; name group_a and group_b"
            )
        group_a, group_b = labels[1], labels[0]
    picked = []
    for name, label in (("group_a", group_a), ("group_b", group_b)):
        hit = np.flatnonzero(labels == label)
        if hit.size != 1:
            raise InvalidInputError(
                f"{name}={label!r} is not a group of groups; groups are {labels.tolist()[:20]}"
            )
        picked.append(int(hit[0]))
    if picked[0] == picked[1]:
        raise InvalidInputError("group_a and group_b must be different groups")
    keep = np.isin(codes, picked)
    sub_labels, _, est, draws = group_rate_draws(
        arr[keep], codes[keep], n_boot, random_state, max_cells=max_cells
    )
    ia, ib = (
        int(np.searchsorted(sub_labels, picked[0])),
        int(np.searchsorted(sub_labels, picked[1])),
    )
    diff = draws[:, ia] - draws[:, ib]
    lo, hi = percentile_interval(diff, confidence)
    return Interval(float(est[ia] - est[ib]), lo, hi, check_confidence(confidence), int(n_boot))


def sign_flip_pvalue(
    differences: Any,
    n_perm: int = 1000,
    random_state: Any = 0,
    *,
    max_cells: int = MAX_CELLS,
) -> float:
    """One-sided paired sign-flip permutation p-value of H1: mean(differences) > 0.

    ``p = (1 + #{perm >= observed}) / (1 + n_perm)`` (see the module docstring and
    :func:`upper_tail_pvalue` for ties). Memory: at most ``max_cells`` signs per chunk plus the
    ``n_perm`` permuted means.
    """
    d = _values("differences", differences)
    n_perm = check_int("n_perm", n_perm, minimum=1, maximum=MAX_RESAMPLES)
    rng = as_generator(random_state)
    m = d.size
    draws = np.empty(n_perm, dtype=np.float64)
    rows = _chunk_rows(m, max_cells)
    for start in range(0, n_perm, rows):
        stop = min(start + rows, n_perm)
        signs = rng.integers(0, 2, size=(stop - start, m), dtype=np.int8) * 2 - 1
        draws[start:stop] = (signs @ d) / m
    return upper_tail_pvalue(draws, d)


def upper_tail_pvalue(draws: Any, differences: Any) -> float:
    """``(1 + #{draw >= mean(differences)}) / (1 + len(draws))``: the one-sided p-value of an
    observed mean against null draws. A draw counts as ``>=`` when it is within
    ``1e-12 * mean|d|`` below the observed mean, so exact ties are not lost to rounding."""
    d = _values("differences", differences)
    null = np.asarray(draws, dtype=np.float64).reshape(-1)
    observed = float(d.mean())
    tol = 1e-12 * float(np.abs(d).mean())
    return (1.0 + float(np.count_nonzero(null >= observed - tol))) / (1.0 + null.size)


def shared_multiplier_draws(
    differences: Any,
    incidence: Any,
    n_draws: int,
    random_state: Any = 0,
    *,
    max_cells: int = MAX_CELLS,
) -> np.ndarray:
    """``n_draws`` shared-multiplier bootstrap draws of the centred mean of ``differences``
    (module docstring).

    ``incidence``: ``(m, N)`` sparse (or dense) 0/1 matrix, row ``v`` marking the shared units
    :math:`R_v` value ``v`` is computed from (every row non-empty). The draws approximate the
    distribution of ``mean(d) - E mean(d)``: a one-sided p-value of H1: E > 0 is
    ``(1 + #{draw >= mean(d)}) / (1 + n_draws)`` and a percentile interval is
    ``mean(d) - quantiles(draws)``. Only the units used by some row are drawn; memory: one
    ``(chunk, units)`` block of signs with at most ``max_cells`` cells.
    """
    import scipy.sparse as sp

    d = _values("differences", differences)
    n_draws = check_int("n_draws", n_draws, minimum=1)
    rng = as_generator(random_state)
    inc = sp.csr_matrix(incidence, dtype=np.float64)
    if inc.shape[0] != d.size:
        raise InvalidInputError(
            f"incidence must have one row per difference ({d.size}), got shape {inc.shape}"
        )
    inc.data[:] = 1.0
    inc.sum_duplicates()
    inc.data[:] = 1.0
    used = np.unique(inc.indices)
    inc = inc[:, used]
    sizes = np.diff(inc.indptr)
    if np.any(sizes == 0):
        raise InvalidInputError("incidence has an empty row: every value needs its shared units")
    m = d.size
    # weights folded with the centred values: T* = xi @ (W^T (d - mean)) / m
    w = sp.diags(1.0 / np.sqrt(sizes)) @ inc
    loading = np.asarray(w.T @ (d - d.mean())).ravel() / m
    out = np.empty(n_draws, dtype=np.float64)
    rows = _chunk_rows(used.size, max_cells)
    for start in range(0, n_draws, rows):
        stop = min(start + rows, n_draws)
        xi = rng.integers(0, 2, size=(stop - start, used.size), dtype=np.int8) * 2 - 1
        out[start:stop] = xi @ loading
    return out


# ----------------------------------------------------------------------------------------------
# rates from counts (the binomial shortcut on aggregated counts)
# ----------------------------------------------------------------------------------------------
def binomial_rates(successes: Any, trials: Any, n_boot: int, random_state: Any = 0) -> np.ndarray:
    """``(n_boot, g)`` stratified bootstrap replicates of ``g`` rates ``successes / trials``:
    one independent ``Binomial(trials, p_hat) / trials`` per entry (the 0/1 shortcut of the
    module docstring applied to counts); ``trials == 0`` gives NaN."""
    n_boot = check_int("n_boot", n_boot, minimum=1, maximum=MAX_RESAMPLES)
    rng = as_generator(random_state)
    s = np.atleast_1d(np.asarray(successes, dtype=np.int64))
    t = np.atleast_1d(np.asarray(trials, dtype=np.int64))
    if s.shape != t.shape or np.any(s < 0) or np.any(s > t):
        raise InvalidInputError(
            f"successes must lie in [0, trials] elementwise, got {s.tolist()} of {t.tolist()}"
        )
    p = np.divide(s, t, out=np.zeros(s.shape), where=t > 0)
    draws = rng.binomial(np.maximum(t, 0), p, size=(n_boot, s.size)).astype(np.float64)
    return np.where(t > 0, draws / np.maximum(t, 1), np.nan)


def finite_interval(draws: Any, confidence: float) -> tuple[float, float]:
    """:func:`percentile_interval` of the finite draws; ``(nan, nan)`` when there is none
    (e.g. a ratio whose denominator was 0 in every replicate)."""
    vals = np.asarray(draws, dtype=np.float64).ravel()
    vals = vals[np.isfinite(vals)]
    if vals.size == 0:
        return float("nan"), float("nan")
    return percentile_interval(vals, confidence)


def rate_interval(
    successes: int, trials: int, *, n_boot: int, confidence: float, rng: Any
) -> tuple[float, float]:
    """Bootstrap interval of the rate ``successes / trials`` (NaN when ``trials == 0``)."""
    if trials <= 0:
        return float("nan"), float("nan")
    return finite_interval(binomial_rates(successes, trials, n_boot, rng)[:, 0], confidence)
