"""The batch learner: monotone objective, recovery of the generating clusters."""

import numpy as np
import pytest
import torch

from bnpzoo import DPGMM
from bnpzoo.inference.kmeans import kmeans
from bnpzoo.inference.sticks import reorder_and_prune
from bnpzoo.inference.vmm import fit_vmm
from bnpzoo.metrics import nmi
from bnpzoo.ops import default_sigma
from conftest import match_means


def _objective_trace(x, hard, prune_threshold=1e-3, **kw):
    x = torch.as_tensor(x, dtype=torch.float64)
    init, labels = kmeans(x, 50, seed=0)
    fit = fit_vmm(x, init, labels, sigma=default_sigma(x, init, labels), prior_mean=x.mean(0), hard=hard,
                  prune_threshold=prune_threshold, max_iter=200, tol=0.0, **kw)
    return np.array(fit.objective_trace)


def test_hard_mm_never_lowers_its_objective_on_digits(digits):
    trace = _objective_trace(digits.X, hard=True)
    assert trace.size > 5
    steps = np.diff(trace)
    assert (steps >= -1e-9 * np.abs(trace[:-1])).all(), steps.min()


def test_soft_mm_never_lowers_its_objective_without_pruning(digits):
    trace = _objective_trace(digits.X[:600], hard=False, prune_threshold=0.0)
    steps = np.diff(trace)
    assert (steps >= -1e-9 * np.abs(trace[:-1])).all(), steps.min()


def test_pruning_keeps_clusters_sorted_by_size_and_drops_empty_ones():
    counts = torch.tensor([3.0, 0.0, 10.0, 1.0, 0.0])
    keep = reorder_and_prune(counts, 1.0, 1e-3)
    assert keep.tolist() == [2, 0, 3]


@pytest.mark.parametrize("inference", ["vmm", "vi"])
def test_recovers_six_clusters_drawn_from_the_model(model_draw, inference):
    X, z, means = model_draw
    est = DPGMM(truncation=20, inference=inference, random_state=0).fit(X)
    assert est.n_clusters_ == 6
    assert nmi(z, est.predict(X)) > 0.99
    # the fitted means are the posterior mode given the true assignments (lambda0 = 20 shrinks
    # them toward the data mean) ...
    counts = np.bincount(z, minlength=6)[:, None]
    sums = np.stack([X[z == k].sum(0) for k in range(6)])
    mode = (sums + 20.0 * X.mean(0)) / (counts + 20.0)
    assert match_means(mode, est.means_.numpy()) < 0.02
    # ... so that undoing the prior's shrinkage gives back the generating means
    fitted_counts = np.bincount(est.predict(X), minlength=6)[:, None]
    unshrunk = (est.means_.numpy() * (fitted_counts + 20.0) - 20.0 * X.mean(0)) / fitted_counts
    assert match_means(means, unshrunk) < 0.2
