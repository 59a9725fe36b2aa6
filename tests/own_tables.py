"""A user's two tables as a new user has them (imported by the CLI tests, not collected)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


def write_people(folder: Path, *, city: bool = True) -> pd.DataFrame:
    """Write ``people.csv`` (80 rows: text ids ``person``, a text ``Gender``, ``Age``, an
    ``Income`` around 30,000, a text ``City`` unless ``city=False``, a train/val/test ``split``
    and a yes/no label ``Defaulted``) and ``links.csv`` (240 ``source``/``target`` id pairs)
    into ``folder``; return the people table."""
    rng = np.random.default_rng(0)
    n = 80
    ids = [f"p{i:03d}" for i in range(n)]
    income = rng.normal(30_000, 8_000, n).round()
    columns = {
        "person": ids,
        "Gender": rng.choice(["F", "M"], n),
        "Age": rng.integers(20, 70, n),
        "Income": income,
    }
    city_values = rng.choice(["Lyon", "Nice"], n)  # drawn either way: the same rows follow
    if city:
        columns["City"] = city_values
    columns["split"] = rng.choice(["train", "val", "test"], n, p=[0.6, 0.2, 0.2])
    columns["Defaulted"] = np.where(income > 30_000, "no", "yes")
    frame = pd.DataFrame(columns)
    frame.to_csv(folder / "people.csv", index=False)
    src, dst = rng.integers(0, n, 240), rng.integers(0, n, 240)
    links = pd.DataFrame({"source": [ids[s] for s in src], "target": [ids[t] for t in dst]})
    links.to_csv(folder / "links.csv", index=False)
    return frame


def table_args(folder: Path) -> list[str]:
    """The CLI flags that read :func:`write_people`'s tables in ``folder``: the two files, the
    id column, the label and the sensitive attribute."""
    return [
        "--nodes", str(folder / "people.csv"), "--edges", str(folder / "links.csv"),
        "--id-column", "person", "--label", "Defaulted", "--sensitive", "Gender",
    ]  # fmt: skip
