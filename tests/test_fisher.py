"""sga-fisher's per-sample Fisher: the closed form equals a Python loop of autograd calls."""

import pytest
import torch

from bnpzoo.inference.stick_mixture.fisher import gaussian_mixture_fisher, prior_curvature
from bnpzoo.ops import generalized_gaussian_log_density, stick_breaking_log_weights, stick_parameters


def _prior_u(u, alpha, discount):
    """ln p_u(v): the Pitman-Yor sticks' Beta density in the logit coordinate (Jacobian included)."""
    v = torch.sigmoid(u)
    a, b = stick_parameters(u.shape[0], alpha, discount, like=u)
    return (torch.distributions.Beta(a, b).log_prob(v) + v.log() + torch.log1p(-v)).sum()


def _per_sample_objective(x_n, mu, u, *, std, alpha, discount, m0, lam0, n_total, assignment=None):
    """l_n(theta) of inference.stick_mixture.fisher: ln sum_k pi_k N(x_n | mu_k) (or the assigned term) plus
    the prior's 1/N share, written directly with torch.distributions."""
    v = torch.sigmoid(u)
    scores = stick_breaking_log_weights(v) + generalized_gaussian_log_density(x_n[None], mu, std)[0]
    data = torch.logsumexp(scores, 0) if assignment is None else scores[assignment]
    prior_mu = torch.distributions.Normal(m0, std / lam0**0.5).log_prob(mu).sum()
    return data + (prior_mu + _prior_u(u, alpha, discount)) / n_total


@pytest.mark.parametrize("hard, discount", [(False, 0.0), (True, 0.0), (True, 0.4)])
def test_closed_form_fisher_equals_a_loop_over_samples(hard, discount):
    gen = torch.Generator().manual_seed(0)
    m, d, k = 7, 3, 4
    x = torch.randn(m, d, generator=gen, dtype=torch.float64) * 2
    mu = torch.randn(k, d, generator=gen, dtype=torch.float64)
    u = torch.randn(k - 1, generator=gen, dtype=torch.float64)
    hyper = dict(std=torch.tensor([1.3, 0.4, 2.0], dtype=torch.float64), alpha=1.7, discount=discount,
                 m0=torch.full((d,), 0.2, dtype=torch.float64), lam0=5.0, n_total=50)
    v = torch.sigmoid(u)
    scores = stick_breaking_log_weights(v) + generalized_gaussian_log_density(x, mu, hyper["std"])
    labels = scores.argmax(1)
    resp = torch.nn.functional.one_hot(labels, k).double() if hard else torch.softmax(scores, 1)

    squares_mu, squares_u = torch.zeros(k, d, dtype=torch.float64), torch.zeros(k - 1, dtype=torch.float64)
    for n in range(m):  # the reference: one autograd call per sample
        mu_n, u_n = mu.clone().requires_grad_(), u.clone().requires_grad_()
        value = _per_sample_objective(x[n], mu_n, u_n, assignment=labels[n] if hard else None, **hyper)
        g_mu, g_u = torch.autograd.grad(value, (mu_n, u_n))
        squares_mu += g_mu**2
        squares_u += g_u**2

    f_mu, f_u = gaussian_mixture_fisher(x, resp, mu, v, std=hyper["std"], alpha=hyper["alpha"], discount=discount,
                                        prior_mean=hyper["m0"], prior_precision=hyper["lam0"],
                                        n_total=hyper["n_total"])
    assert torch.allclose(f_mu[:, 0], (squares_mu / m).mean(1), rtol=1e-5, atol=1e-12)
    assert torch.allclose(f_u, squares_u / m, rtol=1e-5, atol=1e-12)


def test_prior_curvature_equals_autograds_second_derivative():
    u = torch.tensor([-0.3, 0.8, 1.5], dtype=torch.float64, requires_grad=True)
    hessian = torch.autograd.functional.hessian(lambda t: _prior_u(t, 1.7, 0.3), u)
    std = torch.tensor([1.3, 0.4], dtype=torch.float64)
    c_mu, c_v = prior_curvature(torch.sigmoid(u.detach()), std=std, alpha=1.7, discount=0.3, prior_precision=5.0,
                                n_total=10)
    assert torch.allclose(c_v, -torch.diagonal(hessian) / 10)
    assert torch.isclose(c_mu, (5.0 / std**2).mean() / 10)
