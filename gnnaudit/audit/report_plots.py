"""PNG plots of an audit report (matplotlib Agg, no global pyplot state), base64 encoded."""

from __future__ import annotations

import base64
import io

import pandas as pd

__all__ = ["discrimination_chart", "error_curve_chart", "png_base64"]


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def png_base64(fig) -> str:
    """Render a matplotlib ``Figure`` to PNG and return it base64 encoded (ASCII)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _value_label(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.3g}"


def discrimination_chart(table: pd.DataFrame, top: int = 15, highlight: str | None = None) -> str:
    """Horizontal bars of the top ``top`` discrimination scores with their baselines.

    ``highlight`` (a feature name, e.g. the sensitive attribute) is drawn in a second colour.
    Returns a base64 PNG (an empty string for an empty table).
    """
    if table.empty:
        return ""
    top_rows = table.head(top).iloc[::-1]
    labels = [
        f"{f} = {_value_label(v)}"
        for f, v in zip(top_rows["feature"], top_rows["value"], strict=True)
    ]
    fig = _figure(7.0, 0.35 * len(top_rows) + 1.2)
    ax = fig.add_subplot(1, 1, 1)
    colors = ["#c0392b" if f == highlight else "#2c7fb8" for f in top_rows["feature"]]
    pos = range(len(top_rows))
    ax.barh(pos, top_rows["score"], color=colors, label="score (Eq. 12)")
    ax.scatter(
        top_rows["baseline"],
        pos,
        color="black",
        marker="|",
        s=200,
        zorder=3,
        label="baseline (uniform evidences)",
    )
    ax.set_yticks(list(pos))
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlim(0, 1.05)
    ax.set_xlabel("discrimination score")
    ax.set_title("Top discrimination scores")
    ax.legend(loc="lower right", fontsize=7)
    return png_base64(fig)


def error_curve_chart(frame: pd.DataFrame) -> str:
    """Accuracy within the top-k global evidences vs k, with the overall test accuracy."""
    if frame.empty:
        return ""
    fig = _figure(6.0, 3.5)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(
        frame["k"],
        frame["accuracy_in_evidence"],
        marker="o",
        color="#2c7fb8",
        label="accuracy in top-k global evidences",
    )
    ax.axhline(
        float(frame["accuracy_overall"].iloc[0]),
        color="#c0392b",
        linestyle="--",
        label="accuracy on all test nodes",
    )
    if frame["k"].max() / max(frame["k"].min(), 1) >= 20:
        ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("k (top global evidence pairs)")
    ax.set_ylabel("accuracy")
    ax.set_title("Error verification (CE paper Sec. 7.2)")
    ax.legend(loc="lower right", fontsize=7)
    return png_base64(fig)
