"""``gnnaudit explain-dbscan``: ExDBSCAN counterfactuals for one row of a csv table.

Prints the clustering, the counterfactuals and their feature changes; ``--out FILE`` also
writes the feature changes (one row per counterfactual and changed feature) as CSV, checked
before the clustering starts and written atomically (``--force`` replaces an existing file).
"""

from __future__ import annotations

import argparse
from typing import Any

from gnnaudit.cli.flag_names import set_parameter_flags
from gnnaudit.cli.options import (
    SEED,
    FloatRange,
    IntRange,
    add_force_argument,
    add_out_argument,
    add_renamed_argument,
    count_type,
    k_type,
)

#: ExDBSCAN parameter -> the flag that sets it (how errors name it)
PARAMETER_FLAGS = {
    "eps": "--eps",
    "min_samples": "--min-samples",
    "metric": "--metric",
    "n_counterfactuals": "--n-counterfactuals",
    "strategy": "--strategy",
    "random_state": "--seed",
    "x_or_index": "--index",
    "index": "--index",
    "target": "--target",
    "immutable": "--immutable",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``explain-dbscan`` command and its options to ``subparsers``."""
    p = subparsers.add_parser(
        "explain-dbscan",
        help="counterfactuals moving one point of a DBSCAN clustering into another cluster",
        description=(
            "Cluster the numeric columns of a csv file with DBSCAN and print ExDBSCAN "
            "counterfactuals of one row: the feature changes that move it into a target "
            "cluster (or any other cluster), with their validity."
        ),
    )
    p.add_argument("csv", help="csv file; numeric columns are the features")
    p.add_argument(
        "--eps", type=FloatRange(0.0, low_open=True), required=True, help="DBSCAN radius (> 0)"
    )
    p.add_argument("--min-samples", type=count_type(1), required=True, help="DBSCAN min_samples")
    p.add_argument("--index", type=count_type(0), required=True, help="row (0-based) to explain")
    p.add_argument(
        "--target",
        type=IntRange(-(2**63), 2**63 - 1, "int64"),
        default=None,
        help="target cluster (default: any other)",
    )
    add_renamed_argument(
        p,
        "--n-counterfactuals",
        "--k",
        type=k_type(),
        default=5,
        help="number of counterfactuals (default 5)",
    )
    p.add_argument(
        "--immutable", nargs="+", default=[], metavar="COL", help="columns not to change"
    )
    p.add_argument("--label", default=None, help="label column to leave out of the features")
    p.add_argument(
        "--metric", default="euclidean", choices=("euclidean", "manhattan", "chebyshev", "cosine")
    )
    p.add_argument(
        "--strategy", default="energy", choices=("energy", "random", "nearest", "furthest")
    )
    p.add_argument("--seed", type=SEED, default=0, help="random_state (random/furthest)")
    add_out_argument(
        p,
        kind="file",
        what="CSV file for the feature changes (counterfactual, target, valid, feature, "
        "original, new, change)",
    )
    add_force_argument(p, kind="file")
    set_parameter_flags(p, PARAMETER_FLAGS, owners=("ExDBSCAN",))
    p.set_defaults(func=run)


def _read_table(args: argparse.Namespace) -> Any:
    """The ``csv`` table; ``--label`` and ``--immutable`` must be columns (``--immutable`` a
    numeric feature) and ``--index`` a row (pandas only: an error here comes before
    scikit-learn and torch load)."""
    import pandas as pd

    from gnnaudit.errors import InvalidInputError
    from gnnaudit.safe_io import read_csv

    frame = read_csv("csv", args.csv)
    columns = [str(c) for c in frame.columns]
    if args.label is not None and args.label not in columns:
        raise InvalidInputError(
            f"--label: column {args.label!r} not found in csv {args.csv!r} (columns: "
            f"{columns[:20]})"
        )
    features = [c for c in columns if c != args.label and pd.api.types.is_numeric_dtype(frame[c])]
    unknown = [c for c in args.immutable if c not in features]
    if unknown:
        raise InvalidInputError(
            f"--immutable: unknown feature {unknown[0]!r}; the numeric features of csv "
            f"{args.csv!r} are {features[:20]}"
        )
    if args.index >= len(frame):
        raise InvalidInputError(
            f"--index {args.index} is not a row of csv {args.csv!r} (rows 0 to {len(frame) - 1})"
        )
    return frame


def run(args: argparse.Namespace) -> int:
    """Run ``gnnaudit explain-dbscan`` on the parsed ``args``; return the exit code."""
    from gnnaudit.safe_io import check_output_file

    if args.out is not None:
        check_output_file("--out", args.out, force=args.force, owned_only=True)
    frame = _read_table(args)
    # the checks above run before scikit-learn and torch are imported
    import warnings

    import numpy as np

    from gnnaudit.clustering import ExDBSCAN
    from gnnaudit.datasets import load_tabular
    from gnnaudit.safe_io import atomic_file

    data = load_tabular(frame, label=args.label, name="csv")
    model = ExDBSCAN(
        eps=args.eps,
        min_samples=args.min_samples,
        metric=args.metric,
        n_counterfactuals=args.n_counterfactuals,
        strategy=args.strategy,
        random_state=args.seed,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(data.X, feature_names=data.feature_names)
        result = model.explain(args.index, target=args.target, immutable=args.immutable)
    for w in caught:
        print(f"warning: {w.message}")
    counts = {int(c): int((model.labels_ == c).sum()) for c in np.unique(model.labels_)}
    print(f"DBSCAN(eps={args.eps}, min_samples={args.min_samples}): clusters/noise sizes {counts}")
    print(f"row {args.index} is in cluster {result.source_label} (-1 = noise)")
    print()
    print("counterfactuals:")
    print(result.summary().to_string(index=False))
    print()
    print("feature changes:")
    changes = result.to_frame()
    print(changes.to_string(index=False) if len(changes) else "(none)")
    if args.out is not None:
        with atomic_file(
            args.out, name="--out", force=args.force, producer="explain-dbscan"
        ) as tmp:
            changes.to_csv(tmp, index=False)
    print()
    print(
        f"validity {result.valid.mean():.3f}  proximity {result.proximity:.6g}  "
        f"DPP diversity {result.diversity:.6g}  energy {result.energy:.6g}"
    )
    if args.out is not None:
        print(f"feature changes written to {args.out}")
    return 0
