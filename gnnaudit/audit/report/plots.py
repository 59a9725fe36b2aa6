"""PNG charts of report figures (matplotlib Agg, no global pyplot state), base64 encoded.

A statistic describes a chart as a :class:`~gnnaudit.audit.report.section.Figure` (kind, data,
options); :func:`draw_figure` draws it. Kinds:

* ``"bar"``: horizontal bars, columns ``label``, ``value`` and optional ``ci_low`` /
  ``ci_high`` (drawn as whiskers) and ``baseline`` (drawn as a tick); options ``highlight``
  (labels drawn in a second colour), ``xlabel``, ``xlim``, ``vline`` (a reference value);
* ``"curve"``: lines, columns ``x``, ``y`` and optional ``series`` and ``y_low`` / ``y_high``
  (each point's interval, drawn as a band); options ``xlabel``,
  ``ylabel``, ``hline`` / ``hline_label`` (a reference level), ``logx``, ``ylim``;
* ``"scatter"``: points, columns ``x``, ``y`` and optional ``color`` (a category) and
  ``marker`` (a second category); options ``xlabel``, ``ylabel``;
* ``"interval"``: one estimate per row with its interval, against per-row thresholds (the
  summary card's chart), columns ``label``, ``value``, ``ci_low``, ``ci_high`` and optional
  ``flagged`` (drawn in a second colour), ``threshold`` (a dashed tick: the level the
  interval's lower end must pass to flag) and ``material`` (a dotted tick: the level its upper
  end must reach); option ``xlabel``.

``"pair_cards"`` figures are HTML, drawn by the renderer. matplotlib is optional (the
``plots`` extra): without it :func:`can_draw` is False and the renderer shows each chart's data
as a table with a note, never fails.
"""

from __future__ import annotations

import base64
import io
from typing import Any

import numpy as np
import pandas as pd

from gnnaudit._optional import available

__all__ = ["draw_figure", "png_base64", "can_draw", "PNG_KINDS", "NO_PLOTS_NOTE"]

#: figure kinds drawn as PNG by :func:`draw_figure`
PNG_KINDS = ("bar", "curve", "scatter", "interval")

#: shown in place of a chart when matplotlib is not installed
NO_PLOTS_NOTE = "chart not drawn: matplotlib is not installed (pip install 'gnnaudit[plots]')"


def can_draw() -> bool:
    """Whether PNG charts can be drawn (matplotlib is installed)."""
    return available("matplotlib")


_BLUE, _RED, _GREY = "#2c7fb8", "#c0392b", "#555555"
_PALETTE = ["#2c7fb8", "#e6550d", "#31a354", "#756bb1", "#636363", "#d6616b", "#8c6d31"]
_MARKERS = ["o", "^", "s", "D", "v", "P", "X"]


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def png_base64(fig: Any) -> str:
    """Render a matplotlib ``Figure`` to PNG and return it base64 encoded (ASCII)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _bar(data: pd.DataFrame, title: str, options: dict[str, Any]) -> str:
    rows = data.iloc[::-1].reset_index(drop=True)
    labels = [str(v) for v in rows["label"]]
    values = rows["value"].to_numpy(dtype=np.float64)
    highlight = set(map(str, options.get("highlight") or []))
    colors = [_RED if lab in highlight else _BLUE for lab in labels]
    fig = _figure(7.0, 0.34 * len(rows) + 1.3)
    ax = fig.add_subplot(1, 1, 1)
    pos = np.arange(len(rows))
    ax.barh(pos, values, color=colors)
    if {"ci_low", "ci_high"} <= set(rows.columns):
        lo = rows["ci_low"].to_numpy(dtype=np.float64)
        hi = rows["ci_high"].to_numpy(dtype=np.float64)
        ok = np.isfinite(lo) & np.isfinite(hi)
        err = np.vstack([np.clip(values - lo, 0, None), np.clip(hi - values, 0, None)])
        ax.errorbar(
            values[ok], pos[ok], xerr=err[:, ok], fmt="none", ecolor="black", capsize=3, lw=1
        )
    if "baseline" in rows.columns:
        ax.scatter(
            rows["baseline"], pos, color="black", marker="|", s=200, zorder=3, label="baseline"
        )
        ax.legend(loc="lower right", fontsize=7)
    if options.get("vline") is not None:
        ax.axvline(float(options["vline"]), color=_GREY, linestyle="--", lw=1)
    ax.set_yticks(list(pos))
    ax.set_yticklabels(labels, fontsize=8)
    for tick, color in zip(ax.get_yticklabels(), colors, strict=True):
        tick.set_color(color if color == _RED else "black")
    if options.get("xlim"):
        ax.set_xlim(*options["xlim"])
    ax.set_xlabel(str(options.get("xlabel", "")))
    ax.set_title(title, fontsize=10)
    return png_base64(fig)


def _curve(data: pd.DataFrame, title: str, options: dict[str, Any]) -> str:
    fig = _figure(6.0, 3.5)
    ax = fig.add_subplot(1, 1, 1)
    groups = data.groupby("series", sort=False) if "series" in data.columns else [("", data)]
    for i, (name, part) in enumerate(groups):
        colour = _PALETTE[i % len(_PALETTE)]
        ax.plot(part["x"], part["y"], marker="o", color=colour, label=str(name) or None)
        if {"y_low", "y_high"} <= set(part.columns):  # the interval of each point, as a band
            ax.fill_between(part["x"], part["y_low"], part["y_high"], color=colour, alpha=0.2)
    if options.get("hline") is not None:
        ax.axhline(
            float(options["hline"]),
            color=_RED,
            linestyle="--",
            label=str(options.get("hline_label", "")) or None,
        )
    if options.get("logx"):
        ax.set_xscale("log")
    if options.get("ylim"):
        ax.set_ylim(*options["ylim"])
    ax.set_xlabel(str(options.get("xlabel", "")))
    ax.set_ylabel(str(options.get("ylabel", "")))
    ax.set_title(title, fontsize=10)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize=7)
    return png_base64(fig)


def _scatter(data: pd.DataFrame, title: str, options: dict[str, Any]) -> str:
    fig = _figure(6.0, 4.5)
    ax = fig.add_subplot(1, 1, 1)
    color = (
        data["color"].astype(str) if "color" in data.columns else pd.Series("", index=data.index)
    )
    marker = (
        data["marker"].astype(str) if "marker" in data.columns else pd.Series("", index=data.index)
    )
    colors = {c: _PALETTE[i % len(_PALETTE)] for i, c in enumerate(sorted(color.unique()))}
    markers = {m: _MARKERS[i % len(_MARKERS)] for i, m in enumerate(sorted(marker.unique()))}
    for (c, m), part in data.groupby([color, marker], sort=True):
        label = " / ".join(v for v in (c, m) if v)
        ax.scatter(
            part["x"], part["y"], s=9, alpha=0.7, color=colors[c], marker=markers[m], label=label
        )
    ax.set_xlabel(str(options.get("xlabel", "")))
    ax.set_ylabel(str(options.get("ylabel", "")))
    ax.set_title(title, fontsize=10)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize=7, markerscale=1.5)
    return png_base64(fig)


def _column(rows: pd.DataFrame, name: str, default: float) -> np.ndarray:
    if name not in rows.columns:
        return np.full(len(rows), default)
    return rows[name].to_numpy(dtype=np.float64)


def _interval(data: pd.DataFrame, title: str, options: dict[str, Any]) -> str:
    from matplotlib.lines import Line2D

    rows = data.reset_index(drop=True)
    n = len(rows)
    pos = np.arange(n)[::-1]  # the first row on top
    values = rows["value"].to_numpy(dtype=np.float64)
    lo, hi = _column(rows, "ci_low", np.nan), _column(rows, "ci_high", np.nan)
    flagged = _column(rows, "flagged", 0.0) > 0
    ticks = {"threshold": ("--", _column(rows, "threshold", np.nan))}
    ticks["material"] = (":", _column(rows, "material", np.nan))
    fig = _figure(7.0, 0.45 * n + 1.6)
    ax = fig.add_subplot(1, 1, 1)
    for i in range(n):
        color = _RED if flagged[i] else _BLUE
        if np.isfinite(lo[i]) and np.isfinite(hi[i]):
            ax.plot([lo[i], hi[i]], [pos[i], pos[i]], color=color, lw=2, marker="|", ms=12)
        ax.plot([values[i]], [pos[i]], "o", color=color, ms=7, zorder=3)
        for style, levels in ticks.values():
            if np.isfinite(levels[i]):
                ax.plot([levels[i]] * 2, [pos[i] - 0.38, pos[i] + 0.38], style, color=_GREY, lw=1.4)
    ax.axvline(0.0, color="black", lw=0.6)
    ax.set_yticks(list(range(n)))  # bottom to top: the rows in reverse
    ax.set_yticklabels([str(v) for v in rows["label"]][::-1], fontsize=9)
    for tick, flag in zip(ax.get_yticklabels(), flagged[::-1], strict=True):
        tick.set_color(_RED if flag else "black")
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlabel(str(options.get("xlabel", "")))
    ax.set_title(title, fontsize=10)
    handles = [
        Line2D([], [], color=_RED, marker="o", lw=2, label="flagged (estimate, interval)"),
        Line2D([], [], color=_BLUE, marker="o", lw=2, label="not flagged"),
        Line2D([], [], color=_GREY, ls="--", label="flag when the lower end passes"),
    ]
    if np.isfinite(ticks["material"][1]).any():
        handles.append(Line2D([], [], color=_GREY, ls=":", label="and the upper end reaches"))
    ax.legend(  # below the axes: never over an interval or a threshold
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.6 / (0.77 * (0.45 * n + 1.6))),  # 0.6 in below the axes
        ncol=2,
        fontsize=7,
        frameon=False,
    )
    return png_base64(fig)


_DRAW = {"bar": _bar, "curve": _curve, "scatter": _scatter, "interval": _interval}


def draw_figure(kind: str, data: pd.DataFrame, title: str, options: dict[str, Any]) -> str:
    """Base64 PNG of a figure of kind ``kind`` (see the module docstring); ``""`` when ``data``
    is empty or the kind is not a PNG kind."""
    if kind not in _DRAW or data is None or data.empty:
        return ""
    return _DRAW[kind](data, title, options)
