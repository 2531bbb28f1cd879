"""Distributions the zoo's models need that Pyro does not ship."""

import torch
from pyro.distributions import Gamma, TorchDistribution, constraints
from torch.distributions.utils import broadcast_all


class GeneralizedGaussian(TorchDistribution):
    r"""The generalized Gaussian distribution GGD(x | B, s, rho) of [PYPM-sVMM] eq. (2):

        p(x) = rho / (2 s Gamma(1 / rho)) exp(-|(x - B) / s|^rho),    s > 0, rho > 0,

    with mean B and variance s^2 Gamma(3 / rho) / Gamma(1 / rho). rho = 2 is the Gaussian
    N(B, s^2 / 2) and rho = 1 the Laplace distribution with scale s; large rho approaches the
    uniform on [B - s, B + s].

    Sampling: |(x - B) / s|^rho follows Gamma(1 / rho, 1), so x = B + s * sign * G^(1 / rho) with
    G ~ Gamma(1 / rho, 1) and a fair random sign (reparameterised through the Gamma's rsample).
    The CDF is 1/2 + sign(x - B) / 2 * P(1 / rho, |(x - B) / s|^rho), P the regularised lower
    incomplete gamma function.

    :param loc: B, the location (mean).
    :param scale: s, the scale of eq. (2) (not the standard deviation).
    :param rho: the shape; larger is lighter-tailed.
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive, "rho": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, rho, validate_args=None):
        self.loc, self.scale, self.rho = broadcast_all(loc, scale, rho)
        super().__init__(self.loc.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(GeneralizedGaussian, _instance)
        batch_shape = torch.Size(batch_shape)
        new.loc, new.scale, new.rho = (t.expand(batch_shape) for t in (self.loc, self.scale, self.rho))
        super(GeneralizedGaussian, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.loc

    @property
    def variance(self):
        return self.scale.pow(2) * torch.exp(torch.lgamma(3 / self.rho) - torch.lgamma(1 / self.rho))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_norm = torch.log(self.rho / 2) - torch.log(self.scale) - torch.lgamma(1 / self.rho)
        return log_norm - ((value - self.loc).abs() / self.scale).pow(self.rho)

    def cdf(self, value):
        u = (value - self.loc) / self.scale
        return 0.5 + 0.5 * torch.sign(u) * torch.special.gammainc(1 / self.rho, u.abs().pow(self.rho))

    def rsample(self, sample_shape=torch.Size()):
        shape = self._extended_shape(sample_shape)
        magnitude = Gamma(1 / self.rho, torch.ones_like(self.rho)).rsample(sample_shape).pow(1 / self.rho)
        sign = torch.randint(0, 2, shape, device=self.loc.device).to(self.loc.dtype).mul_(2).sub_(1)
        return self.loc + self.scale * sign * magnitude

    def entropy(self):
        return 1 / self.rho - torch.log(self.rho / 2) + torch.log(self.scale) + torch.lgamma(1 / self.rho)

