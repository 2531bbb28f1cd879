"""bnpzoo's estimators inside scikit-learn's tooling: its own estimator checks, GridSearchCV with
processes and threads, Pipelines on pandas DataFrames, and fits in threads of the caller's own."""

import threading
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from joblib import parallel_backend
from sklearn.utils.estimator_checks import parametrize_with_checks

from bnpzoo import DPBMM, DPGMM, HDPGD, PYPGGM, CoupledDP, MixtureSVI
from bnpzoo.data import blobs
from bnpzoo.models.dp_gmm import model as dp_gmm_model

# Every mixture of rows, under its defaults (and DPGMM under a stochastic learner); DPBMM, whose
# rows are binary, with a threshold that makes them so (as scikit-learn's BernoulliNB does). No
# check is expected to fail. HDPGD (proportions in groups) and CoupledDP (documents or rows in
# groups) need data and groups that scikit-learn's checks do not generate: they refuse it by name,
# and the tests below cover them where they apply.
CHECKED = [DPGMM(), DPGMM(inference="natgrad-svi", max_iter=50), PYPGGM(max_iter=50),
           MixtureSVI(model=dp_gmm_model, max_iter=50), DPBMM(binarize=0.0)]


with warnings.catch_warnings():  # bnpzoo follows scikit-learn's API without its BaseEstimator (own repr, saving)
    warnings.filterwarnings("ignore", "Estimator .* does not inherit from `sklearn.base.BaseEstimator`")
    EVERY_CHECK = parametrize_with_checks(CHECKED, expected_failed_checks=lambda est: {})


@EVERY_CHECK
def test_scikit_learns_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the checks' few-row data: a fit's notices
        check(estimator)


X = blobs(n=300, d=3, k=3, seed=0).X


@pytest.mark.parametrize("backend", ["loky", "threading"])
def test_grid_search_runs_in_processes_and_in_threads_with_the_scores_of_fits_in_turn(backend):
    folds = KFold(2)
    with parallel_backend(backend, n_jobs=2):
        search = GridSearchCV(DPGMM(random_state=0), {"alpha": [0.5, 1, 2]}, n_jobs=2, cv=folds).fit(X)
    in_turn = [np.mean([DPGMM(alpha=alpha, random_state=0).fit(X[train]).score(X[test])
                        for train, test in folds.split(X)]) for alpha in (0.5, 1, 2)]
    np.testing.assert_allclose(search.cv_results_["mean_test_score"], in_turn, rtol=1e-6)
    assert search.best_estimator_.n_clusters_ == 3


def test_a_pipeline_fit_predicts_a_dataframe_and_keeps_its_column_names():
    frame = pd.DataFrame(X * [1, 100, 0.01], columns=["height", "weight", "age"])
    labels = Pipeline([("scale", StandardScaler()), ("mixture", DPGMM(random_state=0))]).fit_predict(frame)
    assert labels.shape == (300,) and len(set(labels)) == 3
    est = DPGMM(random_state=0).fit(frame)
    assert list(est.feature_names_in_) == ["height", "weight", "age"]
    assert np.array_equal(est.labels_, est.predict(frame))
    with pytest.raises(ValueError, match="feature names should match"):
        est.predict(frame[["weight", "height", "age"]])
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        est.predict(frame.to_numpy())


def test_a_dataframe_with_a_text_or_missing_cell_names_its_row_and_column():
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": ["x", "y", "z"]})
    with pytest.raises(ValueError, match=r"row 0, column 1 \('b'\) holds 'x'"):
        DPGMM().fit(frame)
    frame["b"] = [1.0, np.nan, 3.0]
    with pytest.raises(ValueError, match=r"contains NaN: row 1, column 1 \('b'\)"):
        DPGMM().fit(frame)


@pytest.mark.parametrize("make, data", [
    (lambda: DPGMM(random_state=0), lambda: (X,)),
    (lambda: DPGMM(inference="svmm", max_iter=60, random_state=0), lambda: (X,)),
    (lambda: PYPGGM(max_iter=60, random_state=0), lambda: (X,)),
    (lambda: MixtureSVI(model=dp_gmm_model, max_iter=60, random_state=0), lambda: (X,)),
    (lambda: DPBMM(random_state=0), lambda: ((X > 0).astype(float),)),
], ids=["dpgmm", "dpgmm svmm", "pypggm", "mixture-svi", "dpbmm"])
def test_labels_are_the_predictions_of_the_rows_fitted_and_fit_predict_returns_them(make, data):
    args = data()
    est = make().fit(*args)
    assert est.labels_.dtype == np.int64 and np.array_equal(est.labels_, est.predict(*args))
    assert np.array_equal(make().fit_predict(*args), est.labels_)


@pytest.mark.parametrize("make", [DPGMM, PYPGGM, DPBMM, lambda: MixtureSVI(model=dp_gmm_model), HDPGD, CoupledDP])
def test_unfitted_estimators_raise_scikit_learns_not_fitted_error(make):
    est = make()
    groups = (np.zeros(len(X), int),) if isinstance(est, CoupledDP) else ()
    with pytest.raises(NotFittedError, match="not fitted yet"):
        est.predict(X, *groups)
    assert clone(est).get_params() == est.get_params()


def test_partial_fit_exists_only_for_the_learners_that_stream():
    assert not hasattr(DPGMM(), "partial_fit") and hasattr(DPGMM(inference="natgrad-svi"), "partial_fit")
    with pytest.raises(AttributeError, match="needs a stochastic learner"):
        DPGMM(inference="vmm").partial_fit(X)


def test_two_fits_in_two_threads_equal_the_same_fits_in_turn(same):
    makes = [lambda: DPGMM(inference="svmm", max_iter=40, random_state=1),
             lambda: PYPGGM(inference="sga", max_iter=40, random_state=2),
             lambda: DPGMM(inference="natgrad-svi", max_iter=40, random_state=3)]
    alone = [make().fit(X).means_ for make in makes]
    together = [None] * len(makes)

    def fit(i):
        together[i] = makes[i]().fit(X).means_

    threads = [threading.Thread(target=fit, args=(i,)) for i in range(len(makes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, b in zip(alone, together):
        assert same(a, b)


def test_dpbmm_binarizes_at_its_threshold_in_fit_and_prediction_alike():
    pixels = np.random.default_rng(0).random((200, 6))
    est = DPBMM(binarize=0.5, random_state=0).fit(pixels)
    assert np.array_equal(est.predict(pixels), DPBMM(random_state=0).fit((pixels > 0.5) * 1.0).predict(pixels > 0.5))
    with pytest.raises(ValueError, match="give binarize=threshold"):
        DPBMM().fit(pixels)
