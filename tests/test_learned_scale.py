"""Generalized Gaussians with a learned scale per cluster and feature (``families.learned_scale``):
the bound against Monte Carlo, the closed forms against autograd, the tangent statistics, a batch
objective that never drops with births and merges, and recovery of data drawn from the program."""

import numpy as np
import pyro
import pytest
import torch

from bnpzoo import PYPGGM
from bnpzoo.distributions import GeneralizedGaussian
from bnpzoo.families import ComponentPrior, LearnedScaleFamily
from bnpzoo.inference.kmeans import kmeans
from bnpzoo.inference.stick_mixture.vmm import fit_vmm
from bnpzoo.metrics import nmi
from bnpzoo.models.pyp_ggm import model
from bnpzoo.ops import generalized_gaussian_shape
from test_vmm import _monotone

RHOS = [1.0, 1.5, 2.0]


def _problem(seed=0, n=200, k=4):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, generator=g, dtype=torch.float64) * torch.tensor([0.5, 1.0, 3.0], dtype=torch.float64)
    weights = torch.softmax(2 * torch.randn(n, k, generator=g, dtype=torch.float64), 1)
    prior = ComponentPrior(mean=x.mean(0), mean_precision=1.3, covariance=torch.diag(x.var(0) / 4), dof=3.0)
    return x, weights, prior


@pytest.mark.parametrize("rho", RHOS)
def test_the_bound_is_below_the_monte_carlo_expectation_and_the_kl_equals_it(rho):
    """E_q ln GGD(x | mu, tau) by 40,000 draws of q (torch's Normal and Gamma, the zoo's GGD density)
    is at least the family's bound (Jensen: E|u|^rho <= (E u^2)^(rho/2)), equal to it at rho = 2; the
    KL equals its Monte-Carlo estimate within 4 standard errors."""
    torch.manual_seed(0)
    x, weights, prior = _problem()
    family = LearnedScaleFamily(rho)
    q = family.natural(family.statistics(x, weights, prior), prior)
    m, v, shape, rate = family._factors(q, prior)
    bound, kl = family.expected_log_density(x[:5], q, prior), family.kl(q, prior)
    a0, b0 = family._gamma_prior(prior, m)
    p_mu = torch.distributions.Normal(prior.mean, (prior.mean_precision / prior.std**2).rsqrt())
    for k in range(2):
        q_mu = torch.distributions.Normal(m[k] + prior.mean, v[k].sqrt())
        q_tau, p_tau = torch.distributions.Gamma(shape[k], rate[k]), torch.distributions.Gamma(a0, b0)
        mu, tau = q_mu.sample((40000,)), q_tau.sample((40000,))
        log_ratio = (q_mu.log_prob(mu) + q_tau.log_prob(tau) - p_mu.log_prob(mu) - p_tau.log_prob(tau)).sum(-1)
        assert float(kl[k]) == pytest.approx(float(log_ratio.mean()), abs=4 * float(log_ratio.std()) / 200)
        density = GeneralizedGaussian(mu, tau ** (-1 / rho), torch.tensor(rho, dtype=x.dtype)).log_prob(x[:5, None])
        density = density.sum(-1)  # (5, draws)
        error = 4 * density.std(1) / 200
        assert (bound[:, k] <= density.mean(1) + error).all()
        if rho == 2.0:
            assert torch.allclose(bound[:, k], density.mean(1), atol=float(error.max()))
        else:  # a bound, not the expectation: below it by more than the noise somewhere
            assert (bound[:, k] < density.mean(1) - error).any()


@pytest.mark.parametrize("rho", RHOS)
def test_the_closed_form_factors_are_a_stationary_point_of_the_bound(rho):
    """Autograd of the bound (data term less KL) with respect to (m, v, a, b) vanishes at the
    alternated closed forms."""
    x, weights, prior = _problem(seed=1)
    family = LearnedScaleFamily(rho)
    stats = family.statistics(x, weights, prior)
    factors = [value.clone().requires_grad_(True) for value in family._factors(family.natural(stats, prior), prior)]
    bound = (family.data_term(stats, factors) - family.factors_kl(factors, prior)).sum()
    for gradient, value in zip(torch.autograd.grad(bound, factors), factors):
        assert float((gradient * value.detach()).abs().max()) < 1e-8 * abs(float(bound.detach()))


@pytest.mark.parametrize("rho", [1.0, 1.5])
def test_tangent_statistics_touch_the_bound_at_their_anchor_and_stay_below_it_elsewhere(rho):
    """sum_n w_nk (the bound on E_q ln f) from statistics anchored at q equals the weighted table
    (the pass's value); anchored anywhere else (the rows' own means, another q) it is below it. Labels
    give the statistics of one-hot weights."""
    x, weights, prior = _problem(seed=2)
    family = LearnedScaleFamily(rho)
    q = family.natural(family.statistics(x, weights.flip(1), prior), prior)  # any q
    direct = (weights * family.expected_log_density(x, q, prior)).sum(0)
    anchored = family.statistics(x, weights, prior, factors=q)
    assert torch.allclose(family.expected_data_term(q, anchored, prior), direct, rtol=1e-10)
    for other in (None, family.natural(family.statistics(x, weights, prior), prior)):
        loose = family.expected_data_term(q, family.statistics(x, weights, prior, factors=other), prior)
        assert (loose <= direct + 1e-9 * direct.abs()).all() and (loose < direct).any()
    labels = weights.argmax(1)
    one_hot = torch.nn.functional.one_hot(labels, 4).double()
    for factors in (None, q):
        by_label = family.label_statistics(x, labels, 4, prior, factors=factors)
        by_weight = family.statistics(x, one_hot, prior, factors=factors)
        for name in by_label:
            torch.testing.assert_close(by_label[name], by_weight[name])


def _mixture(seed, n=1500, k=4):
    """Laplace clusters with a scale per cluster and feature (0.3 to 3) drawn by ``models.pyp_ggm``
    (covariance "diag", rho = 1) at given sticks, means and precisions."""
    g = torch.Generator().manual_seed(seed)
    means = 8 * torch.randn(k, 3, generator=g)
    std = torch.exp(torch.empty(k, 3).uniform_(np.log(0.3), np.log(3.0), generator=g))
    tau = (std * generalized_gaussian_shape(1.0, 1.0)) ** -1.0
    sticks = 1 / torch.arange(k, 1, -1, dtype=torch.float32)  # equal weights
    pyro.set_rng_seed(seed)
    conditioned = pyro.poutine.condition(model, data={"v": sticks, "mu": means, "precision": tau})
    trace = pyro.poutine.trace(conditioned).get_trace(None, num_data=n, dim=3, truncation=k, rho=1.0,
                                                      covariance="diag")
    return trace.nodes["x"]["value"], trace.nodes["z"]["value"].numpy(), std


@pytest.mark.parametrize("hard", [True, False], ids=["hard", "soft"])
@pytest.mark.parametrize("alpha, discount", [(0.1, 0.0), (1.0, 0.5), (20.0, 0.0)])
def test_the_objective_never_drops_with_births_and_merges(alpha, discount, hard):
    """A start of 12 K-means clusters, merges at every iteration and births once the assignments
    settle: each iteration's statistics are tangents at the factors before, and a move must raise
    the memoized bound past the objective itself, so the trace never drops."""
    for seed in range(2):
        x = _mixture(seed)[0].double()
        _, labels = kmeans(x, 12, seed=0)
        prior = ComponentPrior(mean=x.mean(0), mean_precision=1.0, covariance=torch.diag(x.var(0) / 4), dof=3.0)
        fit = fit_vmm(x, labels, 12, family=LearnedScaleFamily(1.0), prior=prior, hard=hard, max_iter=200, tol=0.0,
                      alpha=alpha, discount=discount, merge_moves=True, split_moves=True)
        _monotone(fit)


def test_recovers_clusters_and_scales_drawn_from_the_program(random_state):
    """Four Laplace clusters of about 375 rows whose scales differ per cluster and feature by up to
    10x: all found, and each fitted standard deviation within 20 % of the truth (a Laplace scale's
    relative sampling error at 375 rows is 1 / sqrt(375) = 0.05)."""
    for seed in range(2):
        x, z, std = _mixture(seed)
        est = PYPGGM(likelihood="laplace", covariance="diag", inference="vmm", random_state=random_state + seed).fit(x)
        labels = est.predict(x)
        assert est.n_clusters_ == 4 and nmi(z, labels) > 0.98
        for k in range(4):
            fitted = torch.as_tensor(est.covariances_[np.bincount(labels[z == k]).argmax()]).sqrt()
            assert torch.allclose(fitted.float(), std[k], rtol=0.2), (seed, k)


def test_every_learner_fits_a_learned_scale_and_it_survives_save_and_load(tmp_path):
    x, z, _ = _mixture(0, n=800)
    for inference in ("vmm", "svmm", "natgrad-svi"):
        est = PYPGGM(likelihood="laplace", covariance="diag", inference=inference, random_state=0).fit(x)
        assert est.covariance_type_ == "diag" and est.covariances_.shape == est.means_.shape
        assert nmi(z, est.predict(x)) > 0.8, inference
    est.save(tmp_path / "fit")
    loaded = PYPGGM.load(tmp_path / "fit")
    np.testing.assert_array_equal(loaded.predict(x), est.predict(x))
    np.testing.assert_array_equal(loaded.score_samples(x), est.score_samples(x))


def test_a_learned_scale_needs_rho_at_most_two_and_no_full_covariance():
    x = np.random.default_rng(0).normal(size=(100, 2))
    with pytest.raises(ValueError, match="1 <= rho <= 2"):
        PYPGGM(rho=3.0, covariance="diag").fit(x)
    with pytest.raises(ValueError, match="Gaussian"):
        PYPGGM(likelihood="laplace", covariance="full").fit(x)
