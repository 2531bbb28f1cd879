"""The learned base measure (``bnpzoo.families.base_measure``): its update is the bound's maximum over
the prior, vmm's bound never drops while it learns, and many small clusters are kept."""

import numpy as np
import pytest
import torch
from dataclasses import replace

from bnpzoo import DPGMM
from bnpzoo.families import ComponentPrior, gaussian_family
from bnpzoo.families.base_measure import learned_prior
from bnpzoo.metrics import nmi

LEARNED = ("full", "diag", "spherical")


def _factors(covariance, seed=0, k=6, d=3):
    """Factors q of k clusters of 10 rows each, under a broad prior, in float64."""
    gen = torch.Generator().manual_seed(seed)
    centres = 4 * torch.randn(k, d, generator=gen, dtype=torch.float64)
    x = torch.randn(10 * k, d, generator=gen, dtype=torch.float64) * 0.5 + centres.repeat(10, 1)
    labels = torch.arange(k).repeat(10)  # row i is of cluster i % k, as its centre
    prior = ComponentPrior(x.mean(0), 1.0, torch.eye(d, dtype=torch.float64) * 4.0, dof=float(d))
    family = gaussian_family(covariance)
    q = family.natural(family.label_statistics(x, labels, k, prior), prior)
    return family, q, prior


@pytest.mark.parametrize("covariance", LEARNED)
def test_the_learned_prior_maximises_the_bound_given_the_factors(covariance):
    """sum_k -KL(q_k || p) at the learned (kappa0, Sigma0) is at least its value at every nearby prior:
    each scaled by 0.8 and 1.25, and Sigma0 moved along a random symmetric direction. A sign slip in
    either closed form (the Mahalanobis term, the mean of the precisions) fails it."""
    family, q, prior = _factors(covariance)
    learned = learned_prior(family.base_measure_moments(q), prior, most_precision=1e9, spread=True)
    best = -float(family.kl(q, learned).sum())
    assert best > -float(family.kl(q, prior).sum())
    d = prior.mean.numel()
    direction = torch.randn(d, d, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    direction = direction + direction.T if covariance == "full" else torch.diag(direction.diagonal())
    if covariance == "spherical":
        direction = torch.eye(d, dtype=torch.float64)
    for factor in (0.8, 1.25):
        for nearby in (replace(learned, mean_precision=learned.mean_precision * factor),
                       replace(learned, covariance=learned.covariance * factor),
                       replace(learned, covariance=learned.covariance + (factor - 1) * 0.1 * direction)):
            assert -float(family.kl(q, nearby).sum()) < best


def test_the_means_precision_is_learned_up_to_prior_precision():
    family, q, prior = _factors("full")
    free = learned_prior(family.base_measure_moments(q), prior, most_precision=1e9, spread=False)
    capped = learned_prior(family.base_measure_moments(q), prior, most_precision=free.mean_precision / 2, spread=False)
    assert capped.mean_precision == pytest.approx(free.mean_precision / 2)
    assert torch.equal(free.covariance, prior.covariance)  # Sigma0 only where asked


def _grid_of_clusters(seed, per_side=5, rows=60):
    """per_side^2 round clusters of ``rows`` rows in 2-D, 7 sds apart on a jittered grid."""
    rng = np.random.default_rng(seed)
    centres = 7.0 * np.stack(np.meshgrid(np.arange(per_side), np.arange(per_side)), -1).reshape(-1, 2)
    centres = centres + rng.uniform(-1, 1, centres.shape)
    z = np.repeat(np.arange(len(centres)), rows)
    return (centres[z] + rng.normal(size=(len(z), 2))).astype(np.float32), z


def test_many_small_clusters_are_all_kept(random_state):
    """25 clusters of 60 rows: the fixed prior (kappa0 = 1, Sigma0 the data's covariance over 4)
    merges neighbours (its bound prefers it), the learned base measure keeps the 25."""
    x, z = _grid_of_clusters(random_state)
    learned = DPGMM(random_state=random_state).fit(x)
    assert learned.n_clusters_ == 25 and nmi(z, learned.predict(x)) > 0.97
    assert learned.prior_precision_ < 1.0 and np.trace(learned.prior_covariance_) < 0.1 * np.trace(np.cov(x.T))
    fixed = DPGMM(random_state=random_state, base_measure="fixed").fit(x)
    assert fixed.n_clusters_ < 25 and fixed.prior_precision_ == 1.0


def test_the_bound_never_drops_while_the_base_measure_is_learned():
    x, _ = _grid_of_clusters(3, per_side=4, rows=40)
    for covariance in LEARNED:
        est = DPGMM(covariance=covariance, random_state=0, dtype="float64").fit(x)
        trace = np.asarray(est.elbo_trace_)
        assert np.all(np.diff(trace) >= -1e-8 * np.abs(trace[1:])), covariance
