"""GeneralizedGaussian ([PYPM-sVMM] eq. (2)): a proper density, exact samples, the named special cases."""

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from bnpzoo.distributions import GeneralizedGaussian

RHOS = [0.7, 1.0, 1.5, 2.0, 4.0]


def _ggd(loc, scale, rho):
    t = lambda v: torch.tensor(v, dtype=torch.float64)
    return GeneralizedGaussian(t(loc), t(scale), t(rho))


def _integral(f, loc, upper=np.inf):
    """The integral of f over (-inf, upper), split at the cusp ``loc``."""
    if upper <= loc:
        return integrate.quad(f, -np.inf, upper, limit=200)[0]
    return integrate.quad(f, -np.inf, loc, limit=200)[0] + integrate.quad(f, loc, upper, limit=200)[0]


@pytest.mark.parametrize("rho", RHOS)
def test_density_integrates_to_one_with_the_stated_mean_and_variance(rho):
    d = _ggd(0.3, 1.7, rho)
    density = lambda x: float(d.log_prob(torch.tensor(x, dtype=torch.float64)).exp())
    mass = _integral(density, 0.3)
    mean = _integral(lambda x: x * density(x), 0.3)
    var = _integral(lambda x: (x - 0.3) ** 2 * density(x), 0.3)
    assert mass == pytest.approx(1.0, abs=1e-7)
    assert mean == pytest.approx(0.3, abs=1e-7)
    assert var == pytest.approx(float(d.variance), rel=1e-6)


@pytest.mark.parametrize("rho", RHOS)
def test_samples_pass_a_kolmogorov_smirnov_test_against_the_cdf(rho):
    torch.manual_seed(int(rho * 10))
    d = _ggd(-1.0, 0.6, rho)
    samples = d.sample((20000,))
    cdf = lambda x: d.cdf(torch.as_tensor(x, dtype=torch.float64)).numpy()
    assert stats.kstest(samples.numpy(), cdf).pvalue > 1e-3
    # the CDF is the integral of the density
    density = lambda x: float(d.log_prob(torch.tensor(x, dtype=torch.float64)).exp())
    assert float(d.cdf(torch.tensor(-0.2, dtype=torch.float64))) == pytest.approx(_integral(density, -1.0, -0.2),
                                                                                  abs=1e-8)


def test_rho_2_is_the_normal_and_rho_1_the_laplace():
    x = torch.linspace(-5, 5, 41, dtype=torch.float64)
    sigma = 1.3
    normal = torch.distributions.Normal(0.4, sigma).log_prob(x)
    assert torch.allclose(_ggd(0.4, sigma * 2**0.5, 2.0).log_prob(x), normal)
    laplace = torch.distributions.Laplace(0.4, sigma).log_prob(x)
    assert torch.allclose(_ggd(0.4, sigma, 1.0).log_prob(x), laplace)


def test_batches_broadcast_and_bad_parameters_are_refused():
    d = GeneralizedGaussian(torch.zeros(3, 1), torch.ones(2), torch.tensor(1.5))
    assert d.batch_shape == (3, 2) and d.sample((5,)).shape == (5, 3, 2)
    assert d.expand((4, 3, 2)).log_prob(torch.zeros(4, 3, 2)).shape == (4, 3, 2)
    with pytest.raises(ValueError, match="scale"):
        GeneralizedGaussian(0.0, -1.0, 2.0, validate_args=True)
    with pytest.raises(ValueError, match="rho"):
        GeneralizedGaussian(0.0, 1.0, 0.0, validate_args=True)
