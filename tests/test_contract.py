"""The estimator contract, every check on every estimator (as scikit-learn's common checks run on
all of its own): parameters, clone, fit / predict / fit_predict, save and load, pickle,
``to_arviz``, ``partial_fit`` where it is offered (and a reason where not), and bad input. The
estimators are those of the fuzz table (``conftest.ESTIMATOR_CASES``), each on data it takes."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from bnpzoo import DPBMM, HDPGD, CoupledDP, MixtureSVI
from bnpzoo.metrics import nmi
from conftest import ESTIMATOR_CASES, student_t_model

RNG = np.random.default_rng(1)
CENTRES = np.array([[-6.0, 0.0], [0.0, 6.0], [6.0, 0.0]])
ROWS = CENTRES[np.arange(150) % 3] + RNG.normal(size=(150, 2))
GROUPS = np.arange(150) % 3  # HDPGD and CoupledDP: three groups


def _data(est):
    """(X, the fit's extra arguments) for an estimator."""
    if isinstance(est, DPBMM):
        return (ROWS[:, :1] + RNG.normal(size=(150, 6)) > 0).astype(float), ()
    if isinstance(est, HDPGD):
        e = np.exp(np.c_[ROWS, -ROWS[:, :1]] / 4)
        return e / (e.sum(1, keepdims=True) + 1.0), (GROUPS,)
    return ROWS, ((GROUPS,) if isinstance(est, CoupledDP) else ())


def _code(est) -> dict:
    return {"model": est.model} if isinstance(est, (MixtureSVI, HDPGD)) and est.model is not None else {}


@pytest.fixture(scope="module", params=list(ESTIMATOR_CASES))
def fitted(request):
    est = ESTIMATOR_CASES[request.param]()
    X, extra = _data(est)
    assert est.fit(X, *extra) is est
    return est, X, extra


@pytest.mark.parametrize("case", list(ESTIMATOR_CASES))
def test_parameters_round_trip_and_clone_keeps_them(case):
    est = ESTIMATOR_CASES[case]()
    params = est.get_params()
    assert est.set_params(**params) is est and est.get_params() == params
    copy = clone(est)
    assert copy is not est and copy.get_params() == params
    with pytest.raises(ValueError, match="no_such_parameter"):
        est.set_params(no_such_parameter=1)


@pytest.mark.parametrize("case", list(ESTIMATOR_CASES))
def test_prediction_before_fit_is_not_fitted_error(case):
    est = ESTIMATOR_CASES[case]()
    X, extra = _data(est)
    with pytest.raises(NotFittedError):
        est.predict(X, *extra)


def test_predict_gives_a_label_a_row_and_fit_predict_the_fits_labels(fitted):
    est, X, extra = fitted
    labels = est.predict(X, *extra)
    assert labels.shape == (len(X),) and labels.dtype.kind == "i" and labels.min() >= 0
    # a second fit's own labels (CUDA's atomic sums let two fits of one seed differ in a near tie;
    # bitwise repeatability on the CPU is test_reliability's)
    refit = clone(est)
    again = refit.fit_predict(X, *extra)
    assert np.array_equal(again, refit.labels_ if hasattr(refit, "labels_") else refit.predict(X, *extra))
    fits_labels = getattr(est, "labels_", labels)  # CoupledDP: its predictions on the training rows
    if isinstance(est, HDPGD) and est.inference == "vi":  # from the fit's own relevances (HDPGD._finish)
        assert nmi(fits_labels, labels) > 0.8
    else:
        assert np.array_equal(fits_labels, labels)


def test_save_and_load_predict_the_same(fitted, tmp_path):
    est, X, extra = fitted
    est.save(tmp_path / "fit.pt")
    back = type(est).load(tmp_path / "fit.pt", **_code(est))
    assert back.get_params() == est.get_params()
    assert np.array_equal(back.predict(X, *extra), est.predict(X, *extra))


def test_pickle_predicts_the_same(fitted):
    est, X, extra = fitted
    if isinstance(est, MixtureSVI) and est.model is student_t_model:
        assert est.model.__module__ == "conftest"  # importable by name, so it pickles as a reference
    back = pickle.loads(pickle.dumps(est))
    assert np.array_equal(back.predict(X, *extra), est.predict(X, *extra))


def test_to_arviz_gives_the_posterior(fitted):
    est, X, extra = fitted
    idata = est.to_arviz() if isinstance(est, CoupledDP) else est.to_arviz(X, *extra, num_draws=20)
    assert "posterior" in idata.groups()
    if not isinstance(est, CoupledDP):  # the sampler's chains have no pointwise likelihood
        assert idata.log_likelihood["x"].shape[-1] == len(X)


def test_partial_fit_continues_where_offered_and_says_why_not_elsewhere(fitted):
    est, X, extra = fitted
    if not hasattr(est, "partial_fit"):
        with pytest.raises(AttributeError, match="partial_fit"):
            est.partial_fit
        assert not isinstance(est, HDPGD) or est.inference != "online-vi"
        return
    stream = clone(est)
    stream.partial_fit(X, *extra)
    steps = stream.n_iter_
    assert stream.partial_fit(X, *extra) is stream and stream.n_iter_ > steps
    assert stream.predict(X, *extra).shape == (len(X),)


def test_bad_input_is_a_value_error_naming_where(fitted):
    est, X, extra = fitted
    bad = np.array(X, dtype=float)
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="row 3"):
        clone(est).fit(bad, *extra)
    with pytest.raises(ValueError, match="feature"):
        est.predict(np.c_[X, X], *extra)
