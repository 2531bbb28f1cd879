"""The Pyro program, its guides, and [DPM-SGA]'s closed-form gradients (eq. (12), (14))."""

import pyro
import pyro.poutine as poutine
import pytest
import torch
from pyro.infer import TraceEnum_ELBO
from pyro.poutine.util import site_is_subsample

from bnpzoo.families import ComponentPrior, gaussian_family
from bnpzoo.guides.stick_mixture import map_guide, mean_field_guide, natural_guide
from bnpzoo.inference.stick_mixture.sticks import stick_gradient, update_sticks
from bnpzoo.inference.stick_mixture.vmm import mean_gradient, update_means
from bnpzoo.models.assigned import AssignedNormal
from bnpzoo.models.dp_gmm import model
from bnpzoo.ops import generalized_gaussian_log_density, stick_breaking_log_weights

K, D, N = 5, 3, 40
HYPER = dict(truncation=K, alpha=2.5, sigma=0.8, prior_mean=0.3, prior_precision=1.7)


def _problem():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(N, D, generator=g, dtype=torch.float64)
    mu = torch.randn(K, D, generator=g, dtype=torch.float64).requires_grad_()
    v = torch.rand(K - 1, generator=g, dtype=torch.float64).mul(0.8).add(0.1).requires_grad_()
    z = torch.randint(K, (N,), generator=g)
    return x, mu, v, z


def test_log_joint_gradients_equal_the_closed_forms():
    """eq. (12) for the means; for the sticks eq. (14) in the logit coordinate u, with the Jacobian
    |dv/du| that the MAP guide adds (``inference.stick_mixture.sticks``)."""
    x, mu, v, z = _problem()
    u = torch.logit(v.detach()).requires_grad_()
    v = torch.sigmoid(u)
    conditioned = poutine.condition(model, data={"mu": mu, "v": v, "z": z})
    trace = poutine.trace(conditioned).get_trace(x, **HYPER)
    log_joint_u = trace.log_prob_sum() + (v.log() + torch.log1p(-v)).sum()
    grad_mu, grad_v = torch.autograd.grad(log_joint_u, [mu, u])
    resp = torch.nn.functional.one_hot(z, K).to(x.dtype)
    sigma = torch.tensor(HYPER["sigma"], dtype=x.dtype)
    eq12 = mean_gradient(x, resp, mu.detach(), sigma, HYPER["prior_mean"], HYPER["prior_precision"])
    eq14 = stick_gradient(resp.sum(0), v.detach(), HYPER["alpha"])  # d/du
    assert torch.allclose(grad_mu, eq12, atol=1e-10)
    assert torch.allclose(grad_v, eq14, atol=1e-10)


@pytest.mark.parametrize("alpha, discount", [(2.5, 0.0), (0.1, 0.0), (0.5, 0.6)])
def test_closed_form_updates_are_zeros_of_the_gradients(alpha, discount):
    x, mu, _, z = _problem()
    resp = torch.softmax(torch.randn(N, K, dtype=x.dtype), 1)
    means = update_means(x, resp, 0.3, 1.7)
    assert torch.allclose(mean_gradient(x, resp, means, 0.8, 0.3, 1.7), torch.zeros_like(means), atol=1e-9)
    counts = resp.sum(0) * torch.tensor([1.0, 1e-6, 3.0, 1e-3, 1.0], dtype=x.dtype)  # near-empty clusters too
    sticks = update_sticks(counts, alpha, discount)
    assert torch.allclose(stick_gradient(counts, sticks, alpha, discount), torch.zeros(K - 1, dtype=x.dtype),
                          atol=1e-8)


def test_enumerated_bound_with_map_guide_is_the_marginal_log_joint():
    x, mu, v, _ = _problem()
    guide = map_guide(mu.detach(), v.detach())
    loss = TraceEnum_ELBO(max_plate_nesting=1).loss(model, guide, x, **HYPER)
    sigma, m0, lam = HYPER["sigma"], HYPER["prior_mean"], HYPER["prior_precision"]
    v = v.detach()
    table = stick_breaking_log_weights(v) + generalized_gaussian_log_density(x, mu.detach(), sigma)
    prior = torch.distributions.Normal(m0, sigma / lam**0.5).log_prob(mu.detach()).sum()
    prior = prior + torch.distributions.Beta(1.0, HYPER["alpha"]).log_prob(v).sum()
    jacobian = (v.log() + torch.log1p(-v)).sum()  # the MAP guide's sticks are points in logit space
    assert loss == pytest.approx(-(torch.logsumexp(table, 1).sum() + prior + jacobian).item(), rel=1e-5)


def test_assigned_log_prob_broadcasts_an_enumerated_assignment_without_a_k_n_d_tensor():
    x, mu, _, _ = _problem()
    z = torch.arange(K).view(K, 1)
    lp = AssignedNormal(mu.detach(), 0.8, z).expand((K, N)).log_prob(x)
    assert lp.shape == (K, N)
    assert torch.allclose(lp, generalized_gaussian_log_density(x, mu.detach(), 0.8).T)


def test_model_generates_data_of_the_requested_shape():
    trace = poutine.trace(model).get_trace(None, truncation=4, num_data=25, dim=3)
    assert trace.nodes["x"]["value"].shape == (25, 3)
    assert trace.nodes["z"]["value"].max() < 4


def _natural(means, sticks, covariance="fixed"):
    """The natural guide of a family, started from statistics of counts N_k at ``means``."""
    d = means.shape[1]
    prior = ComponentPrior(mean=torch.full((d,), 0.3, dtype=means.dtype), mean_precision=1.7,
                           covariance=0.64 * torch.eye(d, dtype=means.dtype), dof=float(d))
    counts = torch.linspace(20.0, 1.0, means.shape[0], dtype=means.dtype)
    centred = means - prior.mean
    stats = {"count": counts, "sum": counts[:, None] * centred,
             "scatter": counts[:, None, None] * (centred[:, :, None] * centred[:, None, :] + 0.64 * torch.eye(d)),
             "squares": counts[:, None] * (centred**2 + 0.64)}
    return natural_guide(gaussian_family(covariance), prior, stats, alpha=2.5)


@pytest.mark.parametrize("make_guide", [map_guide, mean_field_guide, _natural])
def test_guide_latent_sites_equal_the_models_non_enumerated_latent_sites(make_guide):
    x, mu, v, _ = _problem()
    guide = make_guide(mu.detach(), v.detach())
    assert _sampled(guide, x, HYPER) == _latent(x, HYPER) == {"v", "mu"}


@pytest.mark.filterwarnings("ignore:Singular sample detected")  # the prior's Wishart at nu0 = D; torch redraws
@pytest.mark.parametrize("covariance", ["full", "diag", "spherical"])
def test_the_natural_guide_of_a_learned_covariance_samples_the_models_latent_sites(covariance):
    x, mu, v, _ = _problem()
    hyper = dict(HYPER, covariance=covariance)
    guide = _natural(mu.detach(), v.detach(), covariance)
    assert _sampled(guide, x, hyper) == _latent(x, hyper) == {"v", "mu", "precision"}


def _latent(x, hyper) -> set:
    model_trace = poutine.trace(pyro.infer.config_enumerate(model)).get_trace(x, **hyper)
    return {name for name, site in model_trace.nodes.items()
            if site["type"] == "sample" and not site["is_observed"] and not site_is_subsample(site)
            and site["infer"].get("enumerate") != "parallel"}


def _sampled(guide, x, hyper) -> set:
    guide_trace = poutine.trace(guide).get_trace(x, **hyper)
    return {name for name, site in guide_trace.nodes.items()
            if site["type"] == "sample" and not site_is_subsample(site)}
