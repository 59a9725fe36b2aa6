"""``gnnaudit fairden``: fair density-based clustering (FairDen) of a csv table.

Example::

    gnnaudit fairden data.csv --sensitive gender race --n-clusters 2 --categorical job \\
        --out labels.csv

Every column that is not sensitive, categorical, ``--label`` or ``--ignore`` must be numeric and
is a feature. Prints the balance (over the combined sensitive groups), the noise fraction and
each cluster's group mix; ``--out FILE`` writes one label per row (``-1`` = noise), checked
before the clustering starts and written atomically (``--force`` replaces an existing file).
"""

from __future__ import annotations

import argparse

from gnnaudit.cli.flag_names import set_parameter_flags
from gnnaudit.cli.options import (
    SEED,
    FloatRange,
    add_force_argument,
    add_out_argument,
    add_progress_argument,
    add_renamed_argument,
    count_type,
    k_type,
)

__all__ = ["register", "run", "PARAMETER_FLAGS"]

#: FairDen parameter -> the flag that sets it (how errors name it)
PARAMETER_FLAGS = {
    "n_clusters": "--n-clusters",
    "min_samples": "--min-samples",
    "solver": "--solver",
    "min_group_size": "--min-group-size",
    "rounding": "--rounding",
    "min_balance": "--min-balance",
    "min_dcsi_share": "--min-dcsi-share",
    "max_noise": "--max-noise",
    "random_state": "--seed",
    "sensitive_features": "--sensitive",
    "categorical": "--categorical",
}


# long: whole: a flat table of argparse calls, one per documented flag
def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``fairden`` command and its options to ``subparsers``."""
    p = subparsers.add_parser(
        "fairden",
        help="fair density-based clustering (FairDen) of a csv table",
        description="Cluster a csv table into density-connected clusters balanced w.r.t. one or "
        "several sensitive attributes (FairDen, Krieger et al. 2025).",
    )
    p.add_argument("data", help="csv file with a header row")
    p.add_argument(
        "--sensitive", nargs="+", required=True, metavar="COL", help="sensitive column(s)"
    )
    add_renamed_argument(
        p,
        "--n-clusters",
        "--k",
        type=k_type(),
        default=2,
        help="number of non-noise clusters (default 2)",
    )
    p.add_argument(
        "--categorical", nargs="*", default=(), metavar="COL", help="categorical columns"
    )
    add_renamed_argument(
        p,
        "--min-samples",
        "--min-pts",
        type=count_type(1),
        default=None,
        help="minPts of the dc-distance and the noise threshold (default 2*d-1)",
    )
    p.add_argument(
        "--solver", default="auto", choices=("auto", "dense", "matrix_free"), help="eigensolver"
    )
    p.add_argument(
        "--min-group-size",
        type=count_type(1),
        default=None,
        help="exclude sensitive groups smaller than this (default: error if a group < --n-clusters)",
    )
    p.add_argument(
        "--label", default=None, help="ground-truth column (not a feature; ARI is printed)"
    )
    p.add_argument("--ignore", nargs="*", default=(), metavar="COL", help="columns to drop")
    p.add_argument(
        "--rounding",
        default="repair",
        choices=("repair", "pareto", "kmeans", "balanced"),
        help="how the spectral embedding becomes clusters: repair (default) starts from the "
        "paper's k-means rounding and, when it misses --min-balance, moves density-cheap points "
        "or drops surplus ones as noise (at most --max-noise), taking the candidate with the "
        "best DCSI that reaches --min-balance, or the most balanced one keeping --min-dcsi-share "
        "of the paper rounding's DCSI (with a warning); kmeans is the paper's Alg. 1 unchanged; "
        "pareto computes the whole balance/DCSI front and picks from it by the same rule; "
        "balanced forces full balance",
    )
    p.add_argument(
        "--min-balance",
        type=FloatRange(0.0, 1.0, why="a balance lies in [0, 1]"),
        default=0.8,
        help="mean cluster balance the repair aims for (default 0.8, the four-fifths rule)",
    )
    p.add_argument(
        "--min-dcsi-share",
        type=FloatRange(0.0, 1.0, why="a share of the paper rounding's DCSI lies in [0, 1]"),
        default=0.7,
        help="share of the paper rounding's DCSI a candidate must keep before --min-balance "
        "counts (default 0.7; 0 makes --min-balance a hard target)",
    )
    p.add_argument(
        "--max-noise",
        type=FloatRange(0.0, 1.0, why="a share of the clustered points lies in [0, 1]"),
        default=0.1,
        help="largest share of the clustered points the repair may drop as noise (default 0.1)",
    )
    p.add_argument("--seed", type=SEED, default=0, help="random seed (default 0)")
    add_out_argument(p, kind="file", what="CSV file for the cluster labels (one per row)")
    add_force_argument(p, kind="file")
    add_progress_argument(p)
    set_parameter_flags(p, PARAMETER_FLAGS, owners=("FairDen",))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``gnnaudit fairden`` on the parsed ``args``; return the exit code."""
    from gnnaudit.errors import InvalidInputError
    from gnnaudit.safe_io import check_output_file, read_csv

    if args.out is not None:
        check_output_file("--out", args.out, force=args.force, owned_only=True)
    frame = read_csv("data", args.data)
    columns = [str(c) for c in frame.columns]
    for flag, names in (
        ("--ignore", list(args.ignore)),
        ("--sensitive", list(args.sensitive)),
        ("--categorical", list(args.categorical)),
        ("--label", [args.label] if args.label is not None else []),
    ):
        missing = [c for c in names if c not in columns]
        if missing:
            raise InvalidInputError(
                f"{flag}: column(s) {missing} not found in data {args.data!r} (columns: "
                f"{columns[:20]})"
            )
    frame = frame.drop(columns=list(args.ignore))
    # the checks above run before scikit-learn and torch are imported
    import pandas as pd

    from gnnaudit.cli.options import progress_enabled
    from gnnaudit.clustering import FairDen
    from gnnaudit.clustering.metrics import adjusted_rand_noise, balance, group_mix, noise_fraction
    from gnnaudit.datasets.tabular import load_tabular
    from gnnaudit.safe_io import atomic_file

    data = load_tabular(
        frame,
        label=args.label,
        sensitive=list(args.sensitive),
        categorical=list(args.categorical) or None,
        name=f"data {args.data!r}",
    )
    if data.X.shape[1] == 0:
        raise InvalidInputError("data: FairDen needs at least one numeric feature column")
    model = FairDen(
        n_clusters=args.n_clusters,
        min_samples=args.min_samples,
        solver=args.solver,
        random_state=args.seed,
        min_group_size=args.min_group_size,
        rounding=args.rounding,
        min_balance=args.min_balance,
        min_dcsi_share=args.min_dcsi_share,
        max_noise=args.max_noise,
        progress=progress_enabled(args),
    ).fit(data.X, sensitive_features=data.sensitive, categorical=data.categorical)
    sens = frame[list(args.sensitive)].to_numpy(dtype=object)
    print(
        f"FairDen: {model.n_clusters_} clusters (k={model.k_}, min_samples={model.min_samples_}, "
        f"solver={model.solver_}) on {data.n_samples} rows"
    )
    print(
        f"balance (combined groups): {model.balance_:.4f} (paper's rounding "
        f"{model.paper_balance_:.4f}); DCSI (squared): {model.dcsi_:.4f} (paper's rounding "
        f"{model.paper_dcsi_:.4f})"
    )
    if len(args.sensitive) > 1:
        for j, col in enumerate(args.sensitive):
            print(f"balance ({col}): {balance(model.labels_, sens[:, j]):.4f}")
    print(f"noise fraction: {noise_fraction(model.labels_):.4f}")
    if data.labels is not None:
        ari = adjusted_rand_noise(data.labels, model.labels_)
        print(f"ARI vs {args.label} (noise-adjusted): {ari:.4f}")
    print(group_mix(model.labels_, sens).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.out is not None:
        with atomic_file(args.out, name="--out", force=args.force, producer="fairden") as tmp:
            pd.DataFrame({"label": model.labels_}).to_csv(tmp, index=False)
        print(f"labels written to {args.out}")
    return 0
