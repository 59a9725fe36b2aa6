"""MaxSAT search strategies for optimal constrained clustering trees.

Three ways to minimise the cost of a :class:`~gnnaudit.clustering.tree_encoding.TreeEncoding`
(its soft unit clauses, Eq. 37-38), each a function ``(encoding, time_limit, sat_solver) ->``
:class:`SolveResult`:

* :func:`solve_rc2` -- pysat's core-guided RC2 MaxSAT solver (exact; no anytime model);
* :func:`solve_lsu` -- anytime SAT-UNSAT linear search on one incremental SAT oracle;
* :func:`solve_binary` -- anytime binary search on the cost with retractable bounds.

All three return the same optimal cost. A time limit interrupts the oracle from a timer thread:
with a model in hand the status is ``feasible`` (LSU, binary), without one ``unknown``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gnnaudit.clustering.tree_encoding import TreeEncoding

__all__ = ["SolveResult", "SOLVERS", "solve_rc2", "solve_lsu", "solve_binary"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SolveResult:
    """Outcome of one MaxSAT solve: ``status`` (``optimal``, ``feasible``, ``infeasible``,
    ``unknown``), the truth ``values`` of the variables (index 0 unused; ``None`` without a
    model), the model's ``cost`` and the wall ``time`` in seconds."""

    status: str
    values: np.ndarray | None  # values[v] = truth value of variable v (index 0 unused)
    cost: int | None
    time: float


def _values(model: list[int], n_vars: int) -> np.ndarray:
    m = np.asarray(model, dtype=np.int64)
    m = m[(m > 0) & (m <= n_vars)]
    values = np.zeros(n_vars + 1, dtype=bool)
    values[m] = True
    return values


def _with_timer(time_limit: float | None, interrupt: Any) -> threading.Timer | None:
    if time_limit is None:
        return None
    timer = threading.Timer(time_limit, interrupt)
    timer.daemon = True
    timer.start()
    return timer


def solve_rc2(enc: TreeEncoding, time_limit: float | None, sat_solver: str) -> SolveResult:
    """Core-guided RC2. It holds no solution before it proves optimality, so a time limit that
    stops it yields ``unknown``."""
    from pysat.examples.rc2 import RC2
    from pysat.formula import WCNF

    wcnf = WCNF()
    wcnf.nv = enc.n_vars
    wcnf.hard = enc.hard
    wcnf.soft = [list(c) for c in enc.soft]
    wcnf.wght = [1] * len(enc.soft)
    t0 = time.perf_counter()
    rc2 = RC2(wcnf, solver=sat_solver, exhaust=True, minz=True)
    timer = _with_timer(time_limit, rc2.interrupt)
    try:
        model = rc2.compute(expect_interrupt=time_limit is not None)
        interrupted = rc2.interrupted
    finally:
        if timer is not None:
            timer.cancel()
        rc2.delete()
    elapsed = time.perf_counter() - t0
    if model is None:
        return SolveResult("unknown" if interrupted else "infeasible", None, None, elapsed)
    values = _values(model, enc.n_vars)
    return SolveResult("optimal", values, enc.cost(values), elapsed)


def solve_lsu(enc: TreeEncoding, time_limit: float | None, sat_solver: str) -> SolveResult:
    """Anytime SAT-UNSAT linear search: each model tightens the cost bound with the binary
    clauses of :meth:`TreeEncoding.bound_clauses` (the class chains make a totalizer
    unnecessary). A time limit that stops it with a model yields ``feasible``."""
    from pysat.solvers import Solver

    t0 = time.perf_counter()
    best: np.ndarray | None = None
    best_cost: int | None = None
    lower = enc.lower_bound
    status = "unknown"
    with Solver(name=sat_solver, bootstrap_with=enc.hard) as oracle:
        timer = _with_timer(time_limit, oracle.interrupt)
        try:
            while True:
                res = oracle.solve_limited(expect_interrupt=time_limit is not None)
                if res is None:
                    status = "feasible" if best is not None else "unknown"
                    break
                if not res:
                    status = "optimal" if best is not None else "infeasible"
                    break
                best = _values(oracle.get_model(), enc.n_vars)
                best_cost = enc.cost(best)
                logger.debug("linear search: cost %d", best_cost)
                if best_cost <= lower:
                    status = "optimal"
                    break
                for clause in enc.bound_clauses(best_cost - 1):
                    oracle.add_clause(clause)
        finally:
            if timer is not None:
                timer.cancel()
    return SolveResult(status, best, best_cost, time.perf_counter() - t0)


def solve_binary(enc: TreeEncoding, time_limit: float | None, sat_solver: str) -> SolveResult:
    """Anytime binary search on the cost with one incremental SAT oracle.

    The chains Eq. (32)-(33) make every bound ``cost <= c`` a handful of binary clauses
    (:meth:`TreeEncoding.bound_clauses`); each probe adds them under a fresh activation literal
    and assumes it. A satisfiable probe lowers the upper bound to the model's cost (and the
    clauses stay); an unsatisfiable one raises the lower bound and its activation literal is
    negated for good. About :math:`\\log_2 \\mu` probes instead of one core per unit of cost
    (RC2) or one model per improvement (linear search). Stopped by the time limit with a model:
    ``feasible``.
    """
    from pysat.solvers import Solver

    t0 = time.perf_counter()
    best: np.ndarray | None = None
    status = "unknown"
    lower = enc.lower_bound
    top = enc.n_vars
    expect = time_limit is not None
    with Solver(name=sat_solver, bootstrap_with=enc.hard) as oracle:
        timer = _with_timer(time_limit, oracle.interrupt)
        try:
            res = oracle.solve_limited(expect_interrupt=expect)
            if res is None or not res:
                status = "unknown" if res is None else "infeasible"
            else:
                best = _values(oracle.get_model(), enc.n_vars)
                upper = enc.cost(best)
                status = "feasible"
                while lower < upper:
                    mid = (lower + upper - 1) // 2  # probe cost <= mid
                    clauses = enc.bound_clauses(mid)
                    if clauses == [[]]:
                        lower = mid + 1
                        continue
                    top += 1
                    for clause in clauses:
                        oracle.add_clause([*clause, -top])
                    res = oracle.solve_limited(assumptions=[top], expect_interrupt=expect)
                    if res is None:
                        break
                    if res:
                        oracle.add_clause([top])
                        best = _values(oracle.get_model(), enc.n_vars)
                        upper = enc.cost(best)
                    else:
                        oracle.add_clause([-top])
                        lower = mid + 1
                    logger.debug("binary search: cost in [%d, %d]", lower, upper)
                if lower >= upper:
                    status = "optimal"
        finally:
            if timer is not None:
                timer.cancel()
    cost = enc.cost(best) if best is not None else None
    return SolveResult(status, best, cost, time.perf_counter() - t0)


#: Solver name -> search function (the ``solver`` parameter of ``TreeClustering``).
SOLVERS: dict[str, Callable[[TreeEncoding, float | None, str], SolveResult]] = {
    "rc2": solve_rc2,
    "lsu": solve_lsu,
    "binary": solve_binary,
}
