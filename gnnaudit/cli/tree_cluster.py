"""``gnnaudit tree-cluster``: an optimal constrained clustering tree for a csv table.

Example::

    gnnaudit tree-cluster data.csv --n-clusters 3 --depth 3 --must-link ml.csv --cannot-link cl.csv \\
        --objective md-ms --time-limit 60

Every numeric column except ``--label`` (and ``--ignore`` columns) is a feature. A constraint
file holds one pair of 0-based row indices per line (two integer columns, optional header).
Prints the tree, the solver status and the objective values; with ``--label`` also the ARI.
``--out FILE`` writes the cluster label of every row (checked before the solver starts, written
atomically, ``--force`` replaces an existing file; ``--output`` is a deprecated spelling).
Exit code 0 with a clustering -- including ``feasible_soft``: ``--time-limit`` stopped the
search before a tree honouring every constraint was found, and the greedy tree came back with
the number of constraints it breaks in the table and a warning; 2 for bad input (e.g.
``--time-limit`` outside [0.001, 1e6] seconds), contradictory constraints, or when no
clustering exists (status ``infeasible``, e.g. all rows identical with ``--n-clusters 2``), with one
line on stderr saying which.
"""

from __future__ import annotations

import argparse
from typing import Any

from gnnaudit.cli.flag_names import set_parameter_flags
from gnnaudit.cli.options import add_force_argument, add_out_argument, add_renamed_argument

__all__ = ["register", "run", "TIME_LIMIT_RANGE", "PARAMETER_FLAGS"]

#: ``--time-limit`` bounds in seconds, = :data:`gnnaudit.clustering.tree_clustering.TIME_LIMIT_RANGE`
#: (kept here so that a bad value is refused before scikit-learn loads; a test checks they agree)
TIME_LIMIT_RANGE = (1e-3, 1e6)
#: the feature scale ``--epsilon`` is measured on (= ``tree_inputs.UNIT``; a test checks it)
UNIT = 100.0
#: TreeClustering parameter -> the flag that sets it (how errors name it)
PARAMETER_FLAGS = {
    "n_clusters": "--n-clusters",
    "depth": "--depth",
    "objective": "--objective",
    "epsilon": "--epsilon",
    "min_clusters": "--min-clusters",
    "solver": "--solver",
    "time_limit": "--time-limit",
    "must_link": "--must-link",
    "cannot_link": "--cannot-link",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``tree-cluster`` command and its options to ``subparsers``."""
    p = subparsers.add_parser(
        "tree-cluster",
        help="optimal constrained clustering tree (MaxSAT) for a csv table",
        description="Find a depth-d decision tree whose leaves are clusters, epsilon-optimal for "
        "the max-diameter (md) or Pareto max-diameter / min-split (md-ms) objective, honouring "
        "must-link and cannot-link constraints.",
    )
    p.add_argument("data", help="csv file with a header row; numeric feature columns")
    add_renamed_argument(
        p, "--n-clusters", "--k", type=int, required=True, help="number of clusters"
    )
    p.add_argument("--depth", type=int, default=3, help="tree depth (default 3)")
    p.add_argument("--must-link", default=None, help="csv of must-link row-index pairs")
    p.add_argument("--cannot-link", default=None, help="csv of cannot-link row-index pairs")
    p.add_argument("--objective", default="md-ms", choices=("md", "md-ms"))
    p.add_argument(
        "--epsilon", type=float, default=0.1, help="distance-class width on the [0,100] scale"
    )
    p.add_argument(
        "--min-clusters", type=int, default=None, help="non-empty clusters (default --n-clusters)"
    )
    p.add_argument(
        "--solver",
        default="auto",
        choices=("auto", "lsu", "rc2", "binary"),
        help="MaxSAT solver (default auto; every solver keeps the best tree found when "
        "--time-limit stops it)",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        default=None,
        help="time limit of the whole fit in seconds, 0.001 to 1e6 (default none); at 5 s or "
        "more a tree or a proof of infeasibility always comes back",
    )
    p.add_argument("--no-smart-pairs", action="store_true", help="disable smart pairs")
    p.add_argument("--no-tree", action="store_true", help="CC baseline: no tree")
    p.add_argument("--label", default=None, help="ground-truth column (not a feature; ARI)")
    p.add_argument("--ignore", nargs="*", default=(), help="columns to drop before clustering")
    add_out_argument(
        p,
        kind="file",
        what="CSV file for the cluster labels (columns row, cluster)",
        deprecated=("--output",),
    )
    add_force_argument(p, kind="file")
    set_parameter_flags(p, PARAMETER_FLAGS, owners=("TreeClustering",))
    p.set_defaults(func=run)


def _read_pairs(path: str | None, name: str) -> Any:
    import numpy as np
    import pandas as pd

    from gnnaudit.errors import InvalidInputError
    from gnnaudit.safe_io import read_csv, read_text

    if path is None:
        return None
    lines = [line.split("#", 1)[0].strip() for line in read_text(name, path).splitlines()]
    if not any(lines):  # an empty file (or only comments): no constraints
        return np.zeros((0, 2), dtype=np.int64)
    frame = read_csv(name, path, min_rows=0, header=None, comment="#", skipinitialspace=True)
    if frame.shape[1] != 2:
        raise InvalidInputError(
            f"{name}: {path!r} must have two columns (row indices), got {frame.shape[1]}"
        )
    numeric = frame.apply(pd.to_numeric, errors="coerce")
    if numeric.iloc[0].isna().any():  # a header line
        numeric = numeric.iloc[1:]
    if numeric.isna().any().any():
        raise InvalidInputError(f"{name}: {path!r} must hold integer row indices only")
    return numeric.to_numpy()


def _check_numbers(args: argparse.Namespace) -> None:
    """``--time-limit``, ``--epsilon``, ``--n-clusters``, ``--depth`` and ``--min-clusters``
    within their ranges (NaN fails too), before anything heavy is imported."""
    from gnnaudit.errors import InvalidInputError

    low, high = TIME_LIMIT_RANGE
    if args.time_limit is not None and not low <= args.time_limit <= high:  # NaN fails too
        raise InvalidInputError(
            f"--time-limit must be between {low:g} and {high:g} seconds (or left out for no "
            f"limit); got {args.time_limit!r}"
        )
    if not 0 <= args.epsilon < UNIT:  # NaN fails too; the fit refines the bound by dimension
        raise InvalidInputError(
            f"--epsilon is a distance-class width on the [0, 100] feature scale and must lie in "
            f"[0, 100); got {args.epsilon!r} (default 0.1; 0 is exact)"
        )
    for flag, value in (("--n-clusters", args.n_clusters), ("--depth", args.depth)):
        if not 1 <= value <= (12 if flag == "--depth" else 10**6):
            raise InvalidInputError(
                f"{flag} must be between 1 and {12 if flag == '--depth' else 10**6}; got {value}"
            )
    k_min, which = args.n_clusters, "--n-clusters"
    if args.min_clusters is not None:
        k_min, which = args.min_clusters, "--min-clusters"
        if not 1 <= k_min <= args.n_clusters:
            raise InvalidInputError(
                f"--min-clusters must be between 1 and --n-clusters {args.n_clusters}; got {k_min}"
            )
    if not args.no_tree and 2**args.depth < k_min:
        need = (k_min - 1).bit_length()
        raise InvalidInputError(
            f"--depth {args.depth} gives {2**args.depth} leaves but {which} {k_min} clusters "
            f"must be non-empty; use --depth {need} or more, or fewer clusters"
        )


def _read_table(args: argparse.Namespace) -> Any:
    """The ``data`` table without the ``--ignore`` columns; ``--label`` and ``--ignore`` must
    be columns, and ``--epsilon`` below the largest distance of the numeric columns on the
    [0, 100] scale (pandas only: an error here comes before scikit-learn and torch load)."""
    import math

    import pandas as pd

    from gnnaudit.errors import InvalidInputError
    from gnnaudit.safe_io import read_csv

    frame = read_csv("data", args.data)
    columns = [str(c) for c in frame.columns]
    for flag, names in (("--ignore", list(args.ignore)), ("--label", [args.label])):
        missing = [c for c in names if c is not None and c not in columns]
        if missing:
            raise InvalidInputError(
                f"{flag}: column(s) {missing} not found in data {args.data!r} (columns: "
                f"{columns[:20]})"
            )
    frame = frame.drop(columns=list(args.ignore))
    features = frame.drop(columns=[args.label] if args.label else [])
    d = sum(pd.api.types.is_numeric_dtype(features[c]) for c in features.columns)
    largest = UNIT * math.sqrt(max(1, d))
    if d and args.epsilon >= largest:
        raise InvalidInputError(
            f"--epsilon {args.epsilon!r} is at least the largest distance between two points "
            f"on the [0, {UNIT:g}] feature scale ({largest:.4g} for {d} feature(s)): every pair "
            "would fall into one distance class; use a value well below it (default 0.1)"
        )
    return frame


def _load_data(args: argparse.Namespace, frame: Any) -> Any:
    """The table ``frame`` (``--ignore`` columns dropped) as a tabular dataset."""
    from gnnaudit.datasets import load_tabular
    from gnnaudit.errors import InvalidInputError

    data = load_tabular(frame, label=args.label, name=f"data {args.data!r}")
    if data.X.shape[1] == 0:
        raise InvalidInputError("data: no numeric feature column")
    return data


def _summary(model: Any, data: Any) -> dict[str, Any]:
    """The rows of the summary table printed after the tree."""
    import numpy as np

    rows = {
        "status": model.status_,
        "max_diameter": model.max_diameter_,
        "min_split": model.min_split_,
        "clusters used": None if model.labels_ is None else int(len(np.unique(model.labels_))),
        "constraints broken": None
        if model.labels_ is None
        else int(len(model.violated_constraints_)),
        "distance classes": model.n_distance_classes_,
        "variables": model.n_vars_,
        "clauses": model.n_clauses_,
        "build time (s)": round(model.build_time_, 3),
        "solve time (s)": round(model.solve_time_, 3),
    }
    if data.labels is not None and model.labels_ is not None:
        from sklearn.metrics import adjusted_rand_score

        rows["ARI vs label"] = round(float(adjusted_rand_score(data.labels, model.labels_)), 4)
    return rows


def run(args: argparse.Namespace) -> int:
    """Run ``gnnaudit tree-cluster`` on the parsed ``args``; return the exit code."""
    from gnnaudit.safe_io import check_output_file

    if args.out is not None:
        check_output_file("--out", args.out, force=args.force, owned_only=True)
    _check_numbers(args)
    frame = _read_table(args)
    ml = _read_pairs(args.must_link, "--must-link")
    cl = _read_pairs(args.cannot_link, "--cannot-link")
    # every check above runs before scikit-learn, the solvers and torch are imported
    import pandas as pd

    from gnnaudit.clustering import TreeClustering
    from gnnaudit.errors import InfeasibleError
    from gnnaudit.safe_io import atomic_file

    data = _load_data(args, frame)
    model = TreeClustering(
        n_clusters=args.n_clusters,
        depth=args.depth,
        objective=args.objective,
        epsilon=args.epsilon,
        min_clusters=args.min_clusters,
        smart_pairs=not args.no_smart_pairs,
        solver=args.solver,
        time_limit=args.time_limit,
        tree=not args.no_tree,
    ).fit(data.X, must_link=ml, cannot_link=cl)

    if model.tree_ is not None:
        print(model.export_text(feature_names=data.feature_names))
        print()
    rows = _summary(model, data)
    table = pd.DataFrame({"value": pd.Series(rows, dtype=object)})
    print(table.to_string())
    if model.status_ == "feasible_soft":
        import logging

        logging.getLogger("gnnaudit.cli").warning(
            "--time-limit %s s stopped the search before a tree honouring every constraint was "
            "found: this is the greedy tree, breaking %d constraint pair(s)",
            args.time_limit, rows["constraints broken"],
        )  # fmt: skip
    if model.labels_ is None:
        if model.status_ == "infeasible":
            why = model.infeasibility_
            raise InfeasibleError(
                f"no clustering: no depth-{args.depth} tree with --n-clusters {args.n_clusters} satisfies the "
                "constraints (status infeasible)" + (f"; {why.message}" if why else "")
            )
        raise InfeasibleError(
            f"no clustering: none found (status {model.status_}) within --time-limit "
            f"{args.time_limit} s; raise --time-limit"
        )
    if args.out is not None:
        with atomic_file(args.out, name="--out", force=args.force, producer="tree-cluster") as tmp:
            pd.DataFrame({"cluster": model.labels_}).to_csv(tmp, index_label="row")
    return 0
