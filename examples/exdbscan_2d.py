"""ExDBSCAN on 2-D moons: plot a noise point, its reference cores and counterfactuals.

Usage: python examples/exdbscan_2d.py [OUTPUT.png] [--n-counterfactuals 5] [--strategy energy]
"""

from __future__ import annotations

import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import make_moons  # noqa: E402

from gnnaudit.clustering import ExDBSCAN  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", nargs="?", default="exdbscan_2d.png", help="PNG path")
    parser.add_argument("--n-counterfactuals", type=int, default=5)
    parser.add_argument(
        "--strategy", default="energy", choices=("energy", "random", "nearest", "furthest")
    )
    args = parser.parse_args()

    X, _ = make_moons(600, noise=0.07, random_state=0)
    model = ExDBSCAN(
        eps=0.12, min_samples=5, n_counterfactuals=args.n_counterfactuals, strategy=args.strategy
    ).fit(X)
    x = np.array([0.5, 0.25])  # between the moons: noise
    result = model.explain(x, target=1)
    print(result.summary().to_string(index=False))
    print(f"proximity {result.proximity:.4f}  DPP diversity {result.diversity:.4f}")

    cg = model.core_graph_
    fig, ax = plt.subplots(figsize=(7, 5))
    for c in cg.clusters:
        pts = X[model.labels_ == c]
        ax.scatter(pts[:, 0], pts[:, 1], s=6, alpha=0.35, label=f"cluster {c}")
    noise = X[model.labels_ == -1]
    ax.scatter(noise[:, 0], noise[:, 1], s=10, c="grey", marker="x", label="noise")
    ax.scatter(*x, s=120, c="black", marker="*", label="explained point", zorder=5)
    cores = X[result.reference_cores]
    ax.scatter(
        cores[:, 0],
        cores[:, 1],
        s=60,
        facecolors="none",
        edgecolors="red",
        label="reference cores",
        zorder=4,
    )
    for q in cores:
        ax.add_patch(plt.Circle(q, cg.eps, fill=False, color="red", lw=0.6, alpha=0.6))
    cf = result.counterfactuals
    ax.scatter(cf[:, 0], cf[:, 1], s=50, c="red", marker="D", label="counterfactuals", zorder=5)
    for c in cf:
        ax.plot([x[0], c[0]], [x[1], c[1]], c="black", lw=0.5, ls="--")
    ax.set_aspect("equal")
    ax.set_title(f"ExDBSCAN ({args.strategy}, k={len(result)}) toward cluster 1")
    ax.legend(loc="lower left", fontsize=7)
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"saved {args.output}")


if __name__ == "__main__":
    main()
