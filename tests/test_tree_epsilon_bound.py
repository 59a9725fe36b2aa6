"""An epsilon that puts every pair into one distance class is refused (issue 38)."""

from __future__ import annotations

import numpy as np
import pytest

from gnnaudit import InvalidInputError
from gnnaudit.cli.main import main
from gnnaudit.clustering import TreeClustering


def test_epsilon_at_the_largest_scaled_distance_is_refused():
    X = np.random.default_rng(0).normal(size=(30, 2))
    with pytest.raises(InvalidInputError, match=r"epsilon=1e\+20 is at least the largest"):
        TreeClustering(2, depth=1, epsilon=1e20).fit(X)
    # 100 * sqrt(2) = 141.4 is the largest distance on the [0, 100] scale of two features
    with pytest.raises(InvalidInputError, match="141.4"):
        TreeClustering(2, depth=1, epsilon=142.0).fit(X)
    assert TreeClustering(2, depth=1, epsilon=5.0).fit(X).labels_ is not None


def test_cli_epsilon_out_of_scale_names_the_flag(tmp_path, capsys):
    data = tmp_path / "x.csv"
    data.write_text("a,b\n" + "\n".join(f"{i},{i % 3}" for i in range(20)) + "\n")
    assert main(["tree-cluster", str(data), "--n-clusters", "2", "--epsilon", "1e20"]) == 2
    err = capsys.readouterr().err
    assert "--epsilon" in err and "[0, 100)" in err
