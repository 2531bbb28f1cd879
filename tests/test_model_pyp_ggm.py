"""The Pitman-Yor generalized-Gaussian program: its guides, its gradients ([PYPM-sVMM] eq. (19)),
and the DP Gaussian mixture as its special case."""

import math

import pyro
import pytest
import torch
from pyro import poutine
from pyro.poutine.util import site_is_subsample

from bnpzoo.guides.stick_mixture import map_guide, mean_field_guide
from bnpzoo.models import dp_gmm, pyp_ggm
from bnpzoo.ops import generalized_gaussian_shape

K, D, N = 5, 3, 40


def _problem(seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, D, generator=g, dtype=torch.float64)
    mu = torch.randn(K, D, generator=g, dtype=torch.float64).requires_grad_()
    v = torch.rand(K - 1, generator=g, dtype=torch.float64).mul(0.8).add(0.1)
    z = torch.randint(K, (N,), generator=g)
    return x, mu, v, z


@pytest.mark.parametrize("rho", [1.0, 1.5, 2.0, 3.0])
def test_mean_gradient_is_eq_19(rho):
    """d/dB_k ln p(x, z, B, v) = sum_n (rho / s) |u|^(rho-1) sgn(u) E[z_nk] - lambda0 (B_k - m0) / sd^2,
    u = (x_n - B_k) / s: [PYPM-sVMM] eq. (19), with the prior's variance sd^2 / lambda0."""
    x, mu, v, z = _problem()
    sd = torch.tensor([0.7, 1.2, 2.0], dtype=torch.float64)
    hyper = dict(truncation=K, alpha=1.5, discount=0.3, scale=sd, rho=rho, prior_mean=0.2, prior_precision=3.0)
    trace = poutine.trace(poutine.condition(pyp_ggm.model, data={"mu": mu, "v": v, "z": z})).get_trace(x, **hyper)
    (grad,) = torch.autograd.grad(trace.log_prob_sum(), [mu])
    s = generalized_gaussian_shape(sd, rho)
    resp = torch.nn.functional.one_hot(z, K).to(x.dtype)
    u = (x[:, None] - mu.detach()[None]) / s  # N x K x D, fine at this size
    likelihood = (rho / s * u.abs() ** (rho - 1) * u.sign() * resp[..., None]).sum(0)
    assert torch.allclose(grad, likelihood - 3.0 * (mu.detach() - 0.2) / sd**2, atol=1e-9)


def test_sticks_are_pitman_yor_and_d_0_rho_2_is_the_dp_gaussian_mixture():
    x, mu, v, z = _problem()
    mu = mu.detach()
    trace = poutine.trace(poutine.condition(pyp_ggm.model, data={"mu": mu, "v": v, "z": z})).get_trace(
        x, truncation=K, alpha=1.5, discount=0.4)
    beta = trace.nodes["v"]["fn"]
    assert torch.allclose(beta.concentration1, torch.full((K - 1,), 0.6, dtype=x.dtype))
    assert torch.allclose(beta.concentration0, 1.5 + 0.4 * torch.arange(1.0, K, dtype=x.dtype))
    common = dict(truncation=K, alpha=1.5, prior_mean=0.3, prior_precision=2.0)
    pyp = poutine.trace(poutine.condition(pyp_ggm.model, data={"mu": mu, "v": v, "z": z})).get_trace(
        x, discount=0.0, rho=2.0, scale=0.8, **common)
    dp = poutine.trace(poutine.condition(dp_gmm.model, data={"mu": mu, "v": v, "z": z})).get_trace(
        x, sigma=0.8, **common)
    assert pyp.log_prob_sum().item() == dp.log_prob_sum().item()


@pytest.mark.parametrize("make_guide", [map_guide, mean_field_guide])
def test_guide_latent_sites_equal_the_models_non_enumerated_latent_sites(make_guide):
    x, mu, v, _ = _problem()
    hyper = dict(truncation=K, discount=0.5, rho=1.0)
    guide = make_guide(mu.detach(), v)
    model_trace = poutine.trace(pyro.infer.config_enumerate(pyp_ggm.model)).get_trace(x, **hyper)
    latent = {name for name, site in model_trace.nodes.items()
              if site["type"] == "sample" and not site["is_observed"] and not site_is_subsample(site)
              and site["infer"].get("enumerate") != "parallel"}
    sampled = {name for name, site in poutine.trace(guide).get_trace(x, **hyper).nodes.items()
               if site["type"] == "sample" and not site_is_subsample(site)}
    assert sampled == latent == {"v", "mu"}


def test_the_program_generates_laplace_data_of_the_requested_shape_and_spread():
    pyro.set_rng_seed(0)
    conditioned = poutine.condition(pyp_ggm.model, data={"mu": torch.zeros(3, 2), "v": torch.tensor([0.5, 0.5])})
    trace = poutine.trace(conditioned).get_trace(None, truncation=3, num_data=20000, dim=2, rho=1.0,
                                                 scale=torch.tensor([1.0, 3.0]))
    x = trace.nodes["x"]["value"]
    assert x.shape == (20000, 2)
    assert torch.allclose(x.std(0), torch.tensor([1.0, 3.0]), rtol=0.05)  # scale is the standard deviation
    kurtosis = ((x / x.std(0)) ** 4).mean(0)
    assert torch.allclose(kurtosis, torch.full((2,), 6.0), rtol=0.15)  # the Laplace's, not the Normal's 3
    assert math.isfinite(trace.log_prob_sum().item())


@pytest.mark.filterwarnings("ignore:Singular sample detected")  # the prior's Wishart at nu0 = D; torch redraws
@pytest.mark.parametrize("covariance", ["full", "diag", "spherical"])
def test_a_learned_covariance_is_dp_gmms_program_with_pitman_yor_sticks(covariance):
    """At rho = 2 a learned covariance gives the same log joint as models.dp_gmm's at d = 0, and
    the Pitman-Yor sticks otherwise; at any other rho it is refused."""
    x, mu, v, z = _problem()
    pyro.set_rng_seed(0)
    drawn = poutine.trace(dp_gmm.model).get_trace(x, truncation=K, covariance=covariance)
    precision = drawn.nodes["precision"]["value"]
    data = {"mu": mu.detach(), "v": v, "z": z, "precision": precision}
    common = dict(truncation=K, alpha=1.5, covariance=covariance, prior_mean=0.3, prior_precision=2.0)
    pyp = poutine.trace(poutine.condition(pyp_ggm.model, data=data)).get_trace(x, discount=0.0, scale=0.8, **common)
    dp = poutine.trace(poutine.condition(dp_gmm.model, data=data)).get_trace(x, sigma=0.8, **common)
    assert torch.allclose(pyp.log_prob_sum(), dp.log_prob_sum())
    sticks = poutine.trace(poutine.condition(pyp_ggm.model, data=data)).get_trace(x, discount=0.4, **common)
    assert torch.allclose(sticks.nodes["v"]["fn"].concentration1, torch.full((K - 1,), 0.6, dtype=x.dtype))
    if covariance == "diag":  # at rho != 2, a generalized-Gaussian scale per cluster and feature (site precision)
        learned = poutine.trace(pyp_ggm.model).get_trace(x, truncation=K, covariance=covariance, rho=1.0)
        assert learned.nodes["precision"]["value"].shape == mu.shape
    else:
        with pytest.raises(ValueError, match="rho = 2"):
            pyp_ggm.model(x, truncation=K, covariance=covariance, rho=1.0)
