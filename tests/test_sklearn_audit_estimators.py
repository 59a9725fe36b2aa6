"""The scikit-learn estimator contract of the audit estimators (CounterfactualEvidence and
EmbeddingAudit): clone, get_params / set_params round trip, parameters checked at fit by the
declarative rules of gnnaudit._params, and fit setting only trailing-underscore attributes."""

from __future__ import annotations

import warnings

import pytest
import torch
from sklearn.base import BaseEstimator, clone
from torch import nn

from gnnaudit.audit import CounterfactualEvidence, EmbeddingAudit
from gnnaudit.datasets import synthetic_credit_graph
from gnnaudit.errors import InvalidInputError

ESTIMATORS = [CounterfactualEvidence, EmbeddingAudit]


class TwoPlanes(nn.Module):
    """A message-passing-free model whose hidden layer separates the sensitive groups."""

    def __init__(self, in_channels: int, gender: int) -> None:
        super().__init__()
        self.hidden = nn.Linear(in_channels, 3)
        self.out = nn.Linear(3, 2)
        with torch.no_grad():
            self.hidden.weight.zero_()
            self.hidden.bias.fill_(3.0)
            self.hidden.weight[0, gender] = 1.0
            self.hidden.weight[1, 1] = 1.0
            self.hidden.weight[2, 0] = 1.0
            self.out.weight.copy_(torch.tensor([[1.0, 0.2, 0.0], [-1.0, -0.2, 0.0]]))
            self.out.bias.zero_()

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.hidden(x)))


@pytest.fixture(scope="module")
def credit():
    return synthetic_credit_graph(num_nodes=200, bias=3.0, seed=0)


def _fit(estimator, credit):
    if isinstance(estimator, CounterfactualEvidence):
        pred = (credit.x[:, 1] > credit.x[:, 1].median()).long()
        return estimator.fit(credit, predictions=pred)
    model = TwoPlanes(credit.x.size(1), credit.sensitive_index)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return estimator.fit(model, credit, mask=torch.ones(credit.num_nodes, dtype=torch.bool))


#: a valid non-default value of one parameter per estimator, and an invalid one
CHANGES = {
    CounterfactualEvidence: ("alpha", 0.25, 1.5),
    EmbeddingAudit: ("depth", 2, 9),
}


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_is_a_base_estimator_without_hand_written_params(cls):
    assert issubclass(cls, BaseEstimator)
    assert "get_params" not in vars(cls) and "set_params" not in vars(cls)
    # every constructor parameter has a declarative rule (or, for client, a checker)
    params = set(cls().get_params())
    assert set(cls._parameter_constraints) == params - {"client"}


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_clone_and_get_set_params_round_trip(cls):
    name, value, _ = CHANGES[cls]
    est = cls()
    assert est.set_params(**{name: value}) is est
    assert est.get_params()[name] == value
    twin = clone(est)
    assert twin is not est and twin.get_params() == est.get_params()
    assert type(twin)(**twin.get_params()).get_params() == est.get_params()
    with pytest.raises(ValueError, match="nope"):
        est.set_params(nope=1)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_invalid_parameter_is_named_at_fit_not_init(cls, credit):
    name, _, bad = CHANGES[cls]
    est = cls(**{name: bad})  # stored as given
    assert est.get_params()[name] == bad
    with pytest.raises(InvalidInputError, match=rf"{cls.__name__}: {name} must be"):
        _fit(est, credit)
    est.set_params(**{name: CHANGES[cls][1]})
    _fit(est, credit)  # fixed by set_params


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_fit_sets_only_trailing_underscore_attributes(cls, credit):
    est = cls()
    before = dict(vars(est))
    _fit(est, credit)
    added = set(vars(est)) - set(before)
    assert added, "fit learned nothing"
    assert all(a.endswith("_") and not a.startswith("__") for a in added), sorted(added)
    # the parameters themselves are untouched
    for key, value in before.items():
        assert vars(est)[key] is value, key


def test_refit_after_set_params_uses_the_new_value(credit):
    est = _fit(CounterfactualEvidence(num_hops=1), credit)
    first = est.ks_.clone()
    est.set_params(num_hops=2)
    _fit(est, credit)
    assert not torch.allclose(first, est.ks_)


API_CHECKS = (
    "check_estimator_cloneable",
    "check_estimator_repr",
    "check_no_attributes_set_in_init",
    "check_do_not_raise_errors_in_init_or_set_params",
    "check_get_params_invariance",
    "check_set_params",
    "check_parameters_default_constructible",
    "check_estimator_tags_renamed",
    "check_valid_tag_types",
    "check_mixin_order",
)


@pytest.mark.parametrize("check_name", API_CHECKS)
@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_scikit_learn_api_checks_pass(cls, check_name):
    """scikit-learn's own checks of the estimator API (those that need no array ``fit``)."""
    from sklearn.utils import estimator_checks

    getattr(estimator_checks, check_name)(cls.__name__, cls())


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_check_estimator_runs_clean_on_the_declared_input(cls):
    """``check_estimator`` passes with no failure and no expected failure: the estimator
    declares (tags) that ``fit`` takes a model and a graph, so the array checks are skipped."""
    from sklearn.exceptions import SkipTestWarning
    from sklearn.utils.estimator_checks import check_estimator

    assert cls().__sklearn_tags__().input_tags.two_d_array is False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SkipTestWarning)
        check_estimator(cls())
