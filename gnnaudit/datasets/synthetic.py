"""A synthetic credit-risk graph with a planted, tunable gender bias (the demo's default data).

Generative model, seeded by ``seed``:

* ``gender`` ~ Bernoulli(1/2), drawn **independently** of everything else (1 = female).
* Ten non-sensitive credit features, drawn independently of ``gender``: six numeric
  (``age``, ``income``, ``debt_ratio``, ``credit_history_years``, ``loan_amount``,
  ``late_payments``) and four binary (``homeowner``, ``employed``, ``has_guarantor``,
  ``savings_account``). Numeric columns are standardised (z-scores); binary columns stay 0/1.
* Label (1 = good credit):

  .. math:: s_v = w^\\top z_v + \\varepsilon_v + \\text{bias} \\cdot g_v, \\qquad
            y_v = [\\, s_v > \\operatorname{median}(s) \\,],\\qquad \\varepsilon_v \\sim N(0, 0.5^2)

  with fixed weights ``w`` on the non-sensitive features ``z``. With ``bias = 0`` the label is
  a function of ``z`` and independent noise only, hence independent of ``gender`` given ``z``.
* Edges: each individual links to its ``k = 4`` nearest neighbours in the non-sensitive feature
  space (similar people know each other) plus ``4`` random acquaintances, each of the same
  gender with probability ``homophily`` and of the other gender otherwise
  (``homophily = 0.5`` is gender-blind mixing, ``1`` only same-gender, ``0`` only cross-gender).
  The graph is then symmetrised, self loops and duplicates removed.

``gender`` is both a feature column (so a GNN can learn the planted effect and a counterfactual
audit can detect it) and ``data.sensitive``.
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.neighbors import NearestNeighbors
from torch_geometric.data import Data

from gnnaudit._validation import check_float, check_int
from gnnaudit.datasets.splits import DEFAULT_FRACTIONS, clean_edge_index, stratified_masks

__all__ = ["synthetic_credit_graph", "SYNTHETIC_FEATURES"]

#: Feature columns of :func:`synthetic_credit_graph`, in order (``gender`` last).
SYNTHETIC_FEATURES: tuple[str, ...] = (
    "age",
    "income",
    "debt_ratio",
    "credit_history_years",
    "loan_amount",
    "late_payments",
    "homeowner",
    "employed",
    "has_guarantor",
    "savings_account",
    "gender",
)

# Weights of the (standardised) non-sensitive features in the credit score, same column order.
_WEIGHTS = np.array([0.3, 0.9, -0.8, 0.5, -0.4, -0.9, 0.5, 0.7, 0.4, 0.5])
_NOISE_STD = 0.5
_KNN = 4
_RANDOM_EDGES = 4
_MIN_NODES = 20


def _credit_features(rng: np.random.Generator, n: int) -> np.ndarray:
    """Ten non-sensitive columns (raw units), none of which depends on gender."""
    age = rng.uniform(18, 75, n)
    income = rng.lognormal(mean=10.5, sigma=0.5, size=n)
    debt_ratio = rng.beta(2.0, 5.0, n)
    history = np.minimum(rng.exponential(8.0, n), age - 18)
    loan = rng.lognormal(mean=9.0, sigma=0.8, size=n)
    late = rng.poisson(1.0, n).astype(np.float64)
    homeowner = rng.random(n) < 0.45
    employed = rng.random(n) < 0.8
    guarantor = rng.random(n) < 0.2
    savings = rng.random(n) < 0.6
    return np.column_stack(
        [age, income, debt_ratio, history, loan, late, homeowner, employed, guarantor, savings]
    ).astype(np.float64)


def _standardise(cols: np.ndarray) -> np.ndarray:
    std = cols.std(axis=0)
    return (cols - cols.mean(axis=0)) / np.where(std > 0, std, 1.0)


def _edges(
    rng: np.random.Generator, z: np.ndarray, gender: np.ndarray, homophily: float
) -> torch.Tensor:
    n = z.shape[0]
    # kNN on the non-sensitive features (the first neighbour returned is the point itself).
    k = min(_KNN + 1, n)
    _, nbr = NearestNeighbors(n_neighbors=k).fit(z).kneighbors(z)
    knn_src = np.repeat(np.arange(n), k - 1)
    knn_dst = nbr[:, 1:].reshape(-1)
    # Random acquaintances: same gender with probability `homophily`.
    src = np.repeat(np.arange(n), _RANDOM_EDGES)
    same = rng.random(src.size) < homophily
    target_group = np.where(same, gender[src], 1 - gender[src])
    by_group = np.argsort(gender, kind="stable")
    group_size = np.bincount(gender, minlength=2)
    group_start = np.array([0, group_size[0]])
    pos = np.floor(rng.random(src.size) * group_size[target_group]).astype(np.int64)
    dst = by_group[group_start[target_group] + pos]
    ei = np.stack([np.concatenate([knn_src, src]), np.concatenate([knn_dst, dst])])
    return clean_edge_index(torch.from_numpy(ei), n)


def synthetic_credit_graph(
    num_nodes: int = 1000,
    bias: float = 1.5,
    homophily: float = 0.8,
    seed: int = 0,
) -> Data:
    """Generate the synthetic credit-risk graph (see the module docstring for the model).

    Parameters
    ----------
    num_nodes : number of individuals, at least 20.
    bias : weight of ``gender`` in the credit score (finite, may be negative; 0 = no bias).
        The non-sensitive part of the score has standard deviation about 2, so ``bias = 1.5``
        is a strong effect.
    homophily : probability in [0, 1] that a random acquaintance has the same gender.
    seed : seed of every random draw; the same arguments give the same graph.

    Returns
    -------
    Data with ``x`` (float32, ``num_nodes x 11``), ``y`` (0/1, 1 = good credit), undirected
    ``edge_index``, ``feature_names``, ``train_mask`` / ``val_mask`` / ``test_mask``
    (stratified 50/25/25, seeded), ``sensitive`` (LongTensor, 1 = female),
    ``sensitive_name = "gender"`` and ``sensitive_index`` (the column of ``gender`` in ``x``).
    """
    num_nodes = check_int("num_nodes", num_nodes, minimum=_MIN_NODES)
    bias = check_float("bias", bias)
    homophily = check_float("homophily", homophily, minimum=0.0, maximum=1.0)
    seed = check_int("seed", seed, minimum=0)

    rng = np.random.default_rng(seed)
    gender = (rng.random(num_nodes) < 0.5).astype(np.int64)
    raw = _credit_features(rng, num_nodes)
    binary = np.zeros(raw.shape[1], dtype=bool)
    binary[6:] = True
    z = raw.copy()
    z[:, ~binary] = _standardise(raw[:, ~binary])
    # The score uses standardised versions of every non-sensitive column.
    score = _standardise(z) @ _WEIGHTS + rng.normal(0.0, _NOISE_STD, num_nodes) + bias * gender
    y = (score > np.median(score)).astype(np.int64)
    edge_index = _edges(rng, _standardise(z), gender, homophily)

    x = np.column_stack([z, gender]).astype(np.float32)
    split = stratified_masks(torch.from_numpy(y), *DEFAULT_FRACTIONS, seed=seed)
    return Data(
        x=torch.from_numpy(x),
        y=torch.from_numpy(y),
        edge_index=edge_index,
        feature_names=list(SYNTHETIC_FEATURES),
        train_mask=split.train_mask,
        val_mask=split.val_mask,
        test_mask=split.test_mask,
        sensitive=torch.from_numpy(gender),
        sensitive_name="gender",
        sensitive_index=len(SYNTHETIC_FEATURES) - 1,
        num_nodes=num_nodes,
    )
