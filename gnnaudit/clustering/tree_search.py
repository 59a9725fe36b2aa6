"""MaxSAT search strategies for optimal constrained clustering trees.

Ways to minimise the cost of a :class:`~gnnaudit.clustering.tree_encoding.TreeEncoding`
(its soft clauses, Eq. 37-38, plus weighted soft must-link / cannot-link clauses), each a
function ``(encoding, deadline, sat_solver, report) ->`` :class:`SolveResult` (``report``, the
progress callback, is passed explicitly: there is no module-level state):

* :func:`solve_rc2` -- pysat's core-guided RC2 MaxSAT solver (exact, weighted). It runs in a
  forked child process that is killed at the deadline, so the bound holds whatever RC2 is doing
  (its core heuristics are not interruptible in-process). A first SAT call in the parent gives
  a feasible model (or the infeasibility proof) before RC2 starts, so an expired RC2 still
  returns a tree (``feasible``) and RC2's lower bound.
* :func:`solve_lsu` -- anytime SAT-UNSAT linear search on one incremental SAT oracle;
* :func:`solve_binary` -- anytime binary search on the cost with retractable bounds (both in
  :mod:`gnnaudit.clustering.tree_sat`, with the oracle and :class:`SolveResult`, re-exported
  here);
* :func:`solve_auto` -- the default: a plain SAT call (an early tree or the infeasibility
  proof), then RC2 in a killable child process (= :func:`solve_rc2`).

Every oracle (the incremental SAT oracle and RC2's) is warm-started with ``enc.phases`` (the
greedy tree's assignment, :mod:`~gnnaudit.clustering.tree_warm`) when the encoding has them.
``deadline`` is an absolute :func:`time.perf_counter` value (``None``: no limit); oracles are
interrupted from a timer thread. With a model in hand the status is ``feasible``, without one
``unknown``. All searches support the lazy pool of conditional separating clauses
(:meth:`TreeEncoding.lazy_check`): every model is checked against it, repaired into a model of
the full formula (so it is a valid anytime answer) and the violated clauses are added; an
unsatisfiable relaxation is unsatisfiable in full, so ``optimal`` and ``infeasible`` stay exact.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from gnnaudit.clustering._tree_process import (
    can_fork,
    forked,
    remaining,
    unpack_model,
    with_timer,
)
from gnnaudit.clustering.tree_encoding import TreeEncoding
from gnnaudit.clustering.tree_sat import (
    AnytimeOracle,
    Report,
    SolveResult,
    model_values,
    silent,
    solve_binary,
    solve_lsu,
)

__all__ = ["SolveResult", "SOLVERS", "solve_auto", "solve_rc2", "solve_lsu", "solve_binary"]

logger = logging.getLogger(__name__)


def _rc2(enc: TreeEncoding, sat_solver: str, on_core: Callable[[int], None]) -> Any:
    """pysat's RC2 on the encoding (stratified weights, core exhaustion and minimisation),
    calling ``on_core(lower bound)`` after every core, its oracle warm-started with
    ``enc.phases``."""
    from pysat.examples.rc2 import RC2
    from pysat.formula import WCNF

    class _RC2(RC2):
        def process_core(self) -> None:
            super().process_core()
            on_core(int(self.cost))

    wcnf = WCNF()
    wcnf.nv = enc.n_vars
    wcnf.hard = enc.hard
    wcnf.soft = [list(c) for c in enc.soft]
    wcnf.wght = list(enc.soft_weights) or [1] * len(enc.soft)
    wcnf.topw = int(sum(wcnf.wght)) + 1
    rc2 = _RC2(wcnf, solver=sat_solver, exhaust=True, minz=True)
    if enc.phases:
        rc2.oracle.set_phases(enc.phases)
    return rc2


def _rc2_child(enc: TreeEncoding, sat_solver: str, conn: Any) -> None:  # pragma: no cover
    """Runs in the forked child: RC2 with the lazy loop; sends ("lb", cost), ("model",
    packed values, cost, lazy pairs added) and finally ("done", status)."""
    rc2 = _rc2(enc, sat_solver, lambda cost: conn.send(("lb", cost)))
    while True:
        model = rc2.compute()
        if model is None:
            conn.send(("done", "infeasible"))
            return
        vals = model_values(model, enc.n_vars)
        extra = enc.lazy_check(vals)
        conn.send(("model", np.packbits(vals).tobytes(), enc.cost(vals), enc.lazy_added))
        if not extra:
            conn.send(("done", "optimal"))
            return
        for clause in extra:
            rc2.add_clause(clause)


def _rc2_in_process(
    enc: TreeEncoding,
    deadline: float | None,
    sat_solver: str,
    best: np.ndarray | None,
    best_cost: int | None,
    t0: float,
    report: Report = silent,
) -> SolveResult:
    """RC2 in this process, interrupted by a timer (where no child process can be started):
    RC2 finishes the core it is processing after the interrupt, so it may overrun a little."""
    rc2 = _rc2(enc, sat_solver, lambda cost: report("bound", cost))
    timer = with_timer(deadline, rc2.interrupt)
    status, lower = "feasible", enc.lower_bound
    try:
        while True:
            model = rc2.compute(expect_interrupt=deadline is not None)
            lower = max(lower, int(rc2.cost))
            if model is None:
                break
            vals = model_values(model, enc.n_vars)
            extra = enc.lazy_check(vals)
            cost = enc.cost(vals)
            if best_cost is None or cost <= best_cost:
                best, best_cost = vals, cost
                report("model", np.packbits(vals).tobytes(), cost, enc.lazy_added)
            if not extra:
                status = "optimal"
                break
            for clause in extra:
                rc2.add_clause(clause)
    finally:
        if timer is not None:
            timer.cancel()
        rc2.delete()
    if status == "optimal":
        lower = best_cost if best_cost is not None else lower
    return SolveResult(status, best, best_cost, time.perf_counter() - t0, lower, "rc2")


def solve_rc2(
    enc: TreeEncoding, deadline: float | None, sat_solver: str, report: Report = silent
) -> SolveResult:
    """Core-guided RC2 (weighted), stoppable: a first SAT call in this process gives a feasible
    model or the infeasibility proof; RC2 then runs in a forked child process that is killed at
    the deadline (``feasible`` with the first model and RC2's lower bound, or ``unknown``)."""
    t0 = time.perf_counter()
    run = AnytimeOracle(enc, deadline, sat_solver, report)
    try:
        res = None
        if enc.weighted:  # up to half the time for a model that keeps most constraints
            left = remaining(deadline)
            until = None if left is None else time.perf_counter() + 0.5 * left
            res = run.warm_start(until)
        if not res:
            res = run.probe([])
    finally:
        run.close()
    best, best_cost = run.best, run.best_cost
    lower = enc.lower_bound
    if res is None or not res:
        status = "unknown" if res is None else "infeasible"
        if res is None and best is not None:
            status = "feasible"
        return SolveResult(status, best, best_cost, time.perf_counter() - t0, lower, "rc2")
    if best_cost is not None and best_cost <= lower:
        return SolveResult("optimal", best, best_cost, time.perf_counter() - t0, lower, "rc2")
    if not can_fork():
        return _rc2_in_process(enc, deadline, sat_solver, best, best_cost, t0, report)
    status, best, best_cost, lower = _follow_rc2_child(enc, deadline, sat_solver, best, best_cost)
    if status == "infeasible" and best is not None:  # cannot happen: the SAT call found one
        status = "feasible"  # pragma: no cover
    if status == "feasible" and best_cost is not None and lower >= best_cost:
        status = "optimal"
    return SolveResult(status, best, best_cost, time.perf_counter() - t0, lower, "rc2")


def _follow_rc2_child(
    enc: TreeEncoding,
    deadline: float | None,
    sat_solver: str,
    best: np.ndarray | None,
    best_cost: int | None,
) -> tuple[str, np.ndarray | None, int | None, int]:
    """Run RC2 in a forked child until the deadline, keeping its better models and bounds:
    ``(status, best values, best cost, lower bound)``."""
    status, lower = "feasible", enc.lower_bound
    with forked(_rc2_child, enc, sat_solver) as parent:
        while True:
            left = remaining(deadline)
            if left is not None and left <= 0:
                break
            try:
                if not parent.poll(left):
                    break
                msg = parent.recv()
            except EOFError:  # the child died
                break
            if msg[0] == "lb":
                lower = max(lower, msg[1])
            elif msg[0] == "model":
                enc.lazy_added = max(enc.lazy_added, int(msg[3]))
                if best_cost is None or msg[2] <= best_cost:
                    best, best_cost = unpack_model(msg[1], enc.n_vars), int(msg[2])
            elif msg[0] == "done":
                status = msg[1]
                if status == "optimal":
                    lower = best_cost if best_cost is not None else lower
                break
    return status, best, best_cost, lower


def _search_child(search: Any, enc: TreeEncoding, deadline: float | None, sat_solver: str,
                  conn: Any) -> None:  # pragma: no cover - runs in the child  # fmt: skip
    res = search(enc, deadline, sat_solver, lambda *msg: conn.send(msg))
    conn.send(("result", res, enc.lazy_added))


#: Seconds the parent waits past the deadline for the child's own timer to stop it.
_GRACE = 0.5

#: ``search(encoding, deadline, sat_solver, report)`` (``report`` defaults to no reporting).
Search = Callable[..., SolveResult]


def _stoppable(search: Search, name: str) -> Search:
    """Run an in-process search in a forked child that streams its best models and bounds;
    the parent kills it ``_GRACE`` seconds after the deadline if the SAT oracle did not stop
    (an interrupt is only seen between conflicts), and returns the best model received."""

    def run(
        enc: TreeEncoding, deadline: float | None, sat_solver: str, report: Report = silent
    ) -> SolveResult:
        if deadline is None or not can_fork():
            return search(enc, deadline, sat_solver, report)
        t0 = time.perf_counter()
        best: np.ndarray | None = None
        best_cost: int | None = None
        lower = enc.lower_bound
        result: SolveResult | None = None
        with forked(_search_child, search, enc, deadline, sat_solver) as parent:
            while True:
                left = deadline + _GRACE - time.perf_counter()
                if left <= 0 or not parent.poll(left):
                    break
                try:
                    msg = parent.recv()
                except EOFError:  # the child died
                    break
                if msg[0] == "model":
                    best, best_cost = unpack_model(msg[1], enc.n_vars), int(msg[2])
                    enc.lazy_added = max(enc.lazy_added, int(msg[3]))
                elif msg[0] == "bound":
                    lower = max(lower, int(msg[1]))
                elif msg[0] == "result":
                    result = msg[1]
                    enc.lazy_added = max(enc.lazy_added, int(msg[2]))
                    break
        if result is not None:
            return result
        logger.info("%s search killed at the deadline", name)
        status = "feasible" if best is not None else "unknown"
        return SolveResult(status, best, best_cost, time.perf_counter() - t0, lower, name)

    return run


_binary_stoppable = _stoppable(solve_binary, "binary")
_rc2_stoppable = _stoppable(solve_rc2, "rc2")  # in its child, RC2 runs in-process


def solve_auto(
    enc: TreeEncoding, deadline: float | None, sat_solver: str, report: Report = silent
) -> SolveResult:
    """The measured default (``benchmarks/results/tree_scale.md``): a plain SAT call first
    (the early tree or the infeasibility proof that made binary search beat RC2 on
    Ionosphere / breast_cancer at kappa 0.5), then RC2 in a killable child (on breast_cancer
    at kappa 0.1 it proved optimality in 2 of 2 sets within 30 s, binary search in 1 of 2), for
    hard and soft constraints alike: this is :func:`solve_rc2`."""
    return _rc2_stoppable(enc, deadline, sat_solver, report)


#: Solver name -> search function (the ``solver`` parameter of ``TreeClustering``). With a
#: deadline, binary and LSU run in a killable child process (RC2 has its own).
SOLVERS: dict[str, Search] = {
    "auto": solve_auto,
    "rc2": _rc2_stoppable,
    "lsu": _stoppable(solve_lsu, "lsu"),
    "binary": _binary_stoppable,
}
