"""The scikit-learn face of DPGMM: validation, prediction, persistence, ArviZ."""

import numpy as np
import pytest

import bnpzoo
from bnpzoo import DPGMM

BAD_INPUT = [
    (np.array([[0.0, np.nan], [1.0, 2.0]]), "NaN"),
    (np.array([[0.0, np.inf], [1.0, 2.0]]), "inf"),
    (np.zeros(5), "2-D"),
    (np.zeros((0, 3)), "empty"),
    ([["a", "b"]], "numeric"),
]


@pytest.mark.parametrize("X, message", BAD_INPUT)
def test_bad_input_is_a_value_error_naming_the_problem(X, message):
    with pytest.raises(ValueError, match=message):
        DPGMM().fit(X)


@pytest.mark.parametrize("params, name", [
    ({"truncation": 0}, "truncation"), ({"sigma": 0.0}, "sigma"), ({"sigma": -1.0}, "sigma"),
    ({"alpha": 0}, "alpha"), ({"inference": "online-vi"}, "inference"), ({"max_iter": 2.5}, "max_iter"),
    ({"prune_threshold": 1.0}, "prune_threshold"), ({"device": "tpu"}, "device"),
])
def test_bad_hyperparameters_are_rejected_at_fit_with_their_name(params, name):
    with pytest.raises(ValueError, match=name):
        DPGMM(**params).fit(np.random.default_rng(0).normal(size=(20, 2)))


def test_constructor_is_keyword_only_and_stores_arguments_untouched():
    with pytest.raises(TypeError):
        DPGMM(10)
    assert DPGMM(scale=-3.0).scale == -3.0


def test_the_old_name_of_the_component_scale_still_fits_with_a_future_warning():
    """DPGMM(sigma=...) was renamed scale= (PYPGGM's name, and the fitted scale_'s): for one release
    the old name gives the same fit with a FutureWarning; both at once is an error."""
    X = np.random.default_rng(0).normal(size=(200, 2))
    with pytest.warns(FutureWarning, match="scale="):
        old = DPGMM(sigma=0.7, random_state=0).fit(X)
    new = DPGMM(scale=0.7, random_state=0).fit(X)
    assert np.array_equal(old.means_, new.means_) and np.allclose(new.scale_, 0.7)
    with pytest.raises(ValueError, match="give scale"):
        DPGMM(sigma=0.7, scale=0.7).fit(X)


def test_predict_before_fit_and_wrong_width_are_clear_errors(model_draw):
    X = model_draw[0]
    with pytest.raises(ValueError, match="not fitted"):
        DPGMM().predict(X)
    est = DPGMM(truncation=10, random_state=0).fit(X)
    with pytest.raises(ValueError, match="features"):
        est.predict(np.zeros((3, 5)))


def test_fitted_attributes_predictions_and_scores_are_consistent(model_draw):
    X = model_draw[0]
    est = DPGMM(truncation=10, random_state=0).fit(X)
    proba = est.predict_proba(X)
    assert proba.shape == (len(X), est.n_clusters_)
    assert np.allclose(proba.sum(1), 1, atol=1e-5)
    assert np.array_equal(est.predict(X), proba.argmax(1))
    assert np.array_equal(DPGMM(truncation=10, random_state=0).fit_predict(X), est.predict(X))
    assert np.isclose(est.weights_.sum(), 1.0)
    assert est.converged_ and est.n_iter_ >= 1 and len(est.elbo_trace_) >= 2
    assert np.isfinite(est.score(X)) and est.score(X) > est.score(X + 50.0)


def test_same_seed_same_fit(model_draw):
    X = model_draw[0]
    a = DPGMM(truncation=10, random_state=3).fit(X)
    b = DPGMM(truncation=10, random_state=3).fit(X)
    assert np.array_equal(a.means_, b.means_)


def test_save_and_load_lose_nothing(model_draw, tmp_path):
    X = model_draw[0]
    est = DPGMM(truncation=10, random_state=0, alpha=2.0).fit(X)
    est.save(tmp_path / "model.pt")
    back = DPGMM.load(tmp_path / "model.pt")
    assert back.get_params() == est.get_params()
    assert np.array_equal(back.predict_proba(X), est.predict_proba(X))
    assert back.elbo_trace_ == est.elbo_trace_ and back.n_clusters_ == est.n_clusters_


@pytest.mark.parametrize("guide", ["map", "mean-field"])
def test_vi_runs_with_both_guides_and_minibatches(model_draw, guide):
    X = model_draw[0]
    est = DPGMM(truncation=10, inference="vi", guide=guide, batch_size=256, max_iter=150, random_state=0).fit(X)
    assert est.n_clusters_ >= 1 and np.isfinite(est.elbo_trace_).all()


# PSIS flags the deliberately bad sigma=20 fit as unreliable (Pareto k > 0.7): that is its job
@pytest.mark.filterwarnings("ignore:Estimated shape parameter of Pareto")
def test_to_arviz_and_compare(model_draw):
    X = model_draw[0]
    good = DPGMM(truncation=10, random_state=0).fit(X)
    coarse = DPGMM(truncation=10, scale=20.0, random_state=0).fit(X)
    idata = good.to_arviz(X, num_draws=50)
    assert idata.log_likelihood["x"].shape == (1, 50, len(X))
    assert idata.posterior["mu"].shape == (1, 50, good.n_clusters_, 2)
    table = bnpzoo.compare({"fitted sigma": good, "sigma=20": coarse}, X, num_draws=50)
    assert table.index[0] == "fitted sigma"
