"""Searches on one incremental SAT oracle for optimal constrained clustering trees: the
oracle with the lazy pool and the best model so far (:class:`AnytimeOracle`), the anytime
SAT-UNSAT linear search (:func:`solve_lsu`) and the binary search on the cost
(:func:`solve_binary`), with their :class:`SolveResult`. RC2, the process wrappers that stop a
search at its deadline and the solver table are in :mod:`gnnaudit.clustering.tree_search`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gnnaudit.clustering._tree_process import expired, with_timer
from gnnaudit.clustering.tree_encoding import TreeEncoding

__all__ = [
    "SolveResult",
    "Report",
    "silent",
    "model_values",
    "AnytimeOracle",
    "solve_lsu",
    "solve_binary",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SolveResult:
    """Outcome of one MaxSAT solve: ``status`` (``optimal``, ``feasible``, ``infeasible``,
    ``unknown``), the truth ``values`` of the variables (index 0 unused; ``None`` without a
    model), the model's ``cost``, the wall ``time`` in seconds, a proven lower ``bound`` on the
    optimal cost (``None`` when unknown) and the ``solver`` that ran."""

    status: str
    values: np.ndarray | None  # values[v] = truth value of variable v (index 0 unused)
    cost: int | None
    time: float
    bound: int | None = None
    solver: str = ""


def model_values(model: list[int], n_vars: int) -> np.ndarray:
    """The truth values ``(n_vars + 1,)`` of a DIMACS ``model`` (index 0 unused)."""
    m = np.asarray(model, dtype=np.int64)
    m = m[(m > 0) & (m <= n_vars)]
    values = np.zeros(n_vars + 1, dtype=bool)
    values[m] = True
    return values


#: Progress callback of a search, ``report(kind, *values)``: in a search child process it
#: sends the best models and bounds to the parent; elsewhere it does nothing.
Report = Callable[..., None]


def silent(*msg: Any) -> None:
    """The default :data:`Report`: progress goes nowhere."""


class AnytimeOracle:
    """One incremental SAT oracle with the lazy pool and the best model so far."""

    def __init__(
        self, enc: TreeEncoding, deadline: float | None, sat_solver: str, report: Report
    ) -> None:
        from pysat.solvers import Solver

        self.report = report
        self.enc = enc
        self.deadline = deadline
        self.oracle = Solver(name=sat_solver, bootstrap_with=enc.hard)
        if enc.phases:  # the warm start: the greedy tree's assignment
            self.oracle.set_phases(enc.phases)
        elif enc.weighted:  # prefer models that keep the soft constraints
            self.oracle.set_phases([int(v) for v in np.r_[enc.sel_ml, enc.sel_cl]])
        self.best: np.ndarray | None = None
        self.best_cost: int | None = None
        self.timer = with_timer(deadline, self.oracle.interrupt)

    def probe(self, assumptions: list[int]) -> bool | None:
        """Solve under ``assumptions`` until the model satisfies the lazy pool: ``True`` (the
        model is in ``self.last``), ``False`` (unsatisfiable) or ``None`` (interrupted)."""
        while True:
            if expired(self.deadline):
                return None
            res = self.oracle.solve_limited(
                assumptions=assumptions, expect_interrupt=self.deadline is not None
            )
            if res is None or not res:
                return res
            vals = model_values(self.oracle.get_model(), self.enc.n_vars)
            extra = self.enc.lazy_check(vals)  # repairs vals into a model of the full formula
            cost = self.enc.cost(vals)
            if self.best_cost is None or cost < self.best_cost:
                self.best, self.best_cost = vals, cost
                self.report("model", np.packbits(vals).tobytes(), cost, self.enc.lazy_added)
            if not extra:
                self.last = vals
                return True
            logger.debug("lazy pairs: +%d clauses", len(extra))
            self.oracle.append_formula(extra)

    def set_deadline(self, deadline: float | None) -> None:
        """Re-arm the interrupt timer for a new deadline."""
        if self.timer is not None:
            self.timer.cancel()
        self.oracle.clear_interrupt()
        self.deadline = deadline
        self.timer = with_timer(deadline, self.oracle.interrupt)

    def warm_start(self, until: float | None, max_rounds: int = 50) -> bool | None:
        """Soft constraints: look for a model that keeps as many of them as possible before
        ``until``: assume every selector, and after an unsatisfiable call drop the selectors
        of its core (a greedy correction set). The result is the best model so far."""
        keep = [int(v) for v in np.r_[self.enc.sel_ml, self.enc.sel_cl]]
        final = self.deadline
        self.set_deadline(until if final is None or until is None else min(until, final))
        res: bool | None = None
        try:
            for _ in range(max_rounds):
                res = self.probe(keep)
                if res is None or res:
                    break
                core = set(self.oracle.get_core() or [])
                dropped = [v for v in keep if v in core]
                if not dropped:
                    break
                keep = [v for v in keep if v not in core]
                logger.debug("warm start: %d soft constraints dropped", len(dropped))
        finally:
            self.set_deadline(final)
        return res

    def close(self) -> None:
        """Stop the timer and free the oracle."""
        if self.timer is not None:
            self.timer.cancel()
        self.oracle.delete()


def solve_lsu(
    enc: TreeEncoding, deadline: float | None, sat_solver: str, report: Report = silent
) -> SolveResult:
    """Anytime SAT-UNSAT linear search: each model tightens the cost bound with the binary
    clauses of :meth:`TreeEncoding.bound_clauses` (the class chains make a totalizer
    unnecessary). A time limit that stops it with a model yields ``feasible``."""
    if enc.weighted:
        raise ValueError("solve_lsu needs unit objective weights (no soft constraints)")
    t0 = time.perf_counter()
    lower = enc.lower_bound
    status = "unknown"
    run = AnytimeOracle(enc, deadline, sat_solver, report)
    try:
        while True:
            res = run.probe([])
            if res is None:
                status = "feasible" if run.best is not None else "unknown"
                break
            if not res:
                status = "optimal" if run.best is not None else "infeasible"
                break
            assert run.best_cost is not None
            logger.debug("linear search: cost %d", run.best_cost)
            if run.best_cost <= lower:
                status = "optimal"
                break
            run.oracle.append_formula(enc.bound_clauses(run.best_cost - 1))
    finally:
        run.close()
    bound = run.best_cost if status == "optimal" else lower
    return SolveResult(status, run.best, run.best_cost, time.perf_counter() - t0, bound, "lsu")


def solve_binary(
    enc: TreeEncoding, deadline: float | None, sat_solver: str, report: Report = silent
) -> SolveResult:
    """Anytime binary search on the cost with one incremental SAT oracle.

    The chains Eq. (32)-(33) make every bound ``cost <= c`` a handful of binary clauses
    (:meth:`TreeEncoding.bound_clauses`); each probe adds them under a fresh activation literal
    and assumes it. A satisfiable probe lowers the upper bound to the model's cost (and the
    clauses stay); an unsatisfiable one raises the lower bound and its activation literal is
    negated for good. About :math:`\\log_2 \\mu` probes instead of one core per unit of cost
    (RC2) or one model per improvement (linear search). Stopped by the time limit with a model:
    ``feasible``, with the proven lower bound.
    """
    if enc.weighted:
        raise ValueError("solve_binary needs unit objective weights (no soft constraints)")
    t0 = time.perf_counter()
    status = "unknown"
    lower = enc.lower_bound
    top = enc.n_vars  # activation literals above every variable
    run = AnytimeOracle(enc, deadline, sat_solver, report)
    try:
        res = run.probe([])
        if res is None:
            status = "feasible" if run.best is not None else "unknown"
        elif not res:
            status = "infeasible"
        else:
            status = "feasible"
            while run.best_cost is not None and lower < run.best_cost:
                mid = (lower + run.best_cost - 1) // 2  # probe cost <= mid
                clauses = enc.bound_clauses(mid)
                if clauses == [[]]:
                    lower = mid + 1
                    continue
                top += 1
                run.oracle.append_formula([[*clause, -top] for clause in clauses])
                res = run.probe([top])
                if res is None:
                    break
                if res:
                    run.oracle.add_clause([top])
                else:
                    run.oracle.add_clause([-top])
                    lower = mid + 1
                    report("bound", lower)
                logger.debug("binary search: cost in [%d, %s]", lower, run.best_cost)
            if run.best_cost is not None and lower >= run.best_cost:
                status = "optimal"
    finally:
        run.close()
    bound = None if status == "infeasible" else lower
    return SolveResult(status, run.best, run.best_cost, time.perf_counter() - t0, bound, "binary")
