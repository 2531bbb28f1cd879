"""Distributions the zoo's models need that Pyro does not ship."""

import torch
from pyro.distributions import Beta, Gamma, TorchDistribution, constraints
from torch.distributions.utils import broadcast_all

from bnpzoo.ops import geometric_transform, inverse_geometric_transform, log_remaining_mass


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



class _OpenSubSimplex(constraints.Constraint):
    """{Y : Y_l > 0, sum_l Y_l < 1}, the support of the generalized Dirichlet (event dim 1)."""

    event_dim = 1

    def check(self, value):
        return (value > 0).all(-1) & (value.sum(-1) < 1)


open_sub_simplex = _OpenSubSimplex()


class GeneralizedDirichlet(TorchDistribution):
    r"""The generalized Dirichlet distribution GD(Y | alpha, beta) of [HDP-GD] eq. (10):

        p(Y) = prod_l Gamma(a_l + b_l) / (Gamma(a_l) Gamma(b_l)) Y_l^(a_l - 1) (1 - sum_{f<=l} Y_f)^(c_l),
        c_l = b_l - a_{l+1} - b_{l+1} (l < D),  c_D = b_D - 1,

    on Y_l > 0, sum_l Y_l < 1. Under the geometric transform of eq. (11)
    (``bnpzoo.ops.geometric_transform``) its coordinates X_l = Y_l / (1 - sum_{f<l} Y_f) are
    independent Beta(a_l, b_l) variables, so ``log_prob`` is the Betas' log density plus the
    transform's log-Jacobian, -sum_{l>=2} ln(1 - sum_{f<l} Y_f); ``sample`` draws the Betas and
    maps them back. The remaining masses are computed from the tail, stable at any D.

    :param concentration1: a, the D first Beta parameters (> 0).
    :param concentration0: b, the D second Beta parameters (> 0).
    """

    arg_constraints = {"concentration1": constraints.independent(constraints.positive, 1),
                       "concentration0": constraints.independent(constraints.positive, 1)}
    support = open_sub_simplex
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        shape = self.concentration1.shape
        super().__init__(shape[:-1], shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(GeneralizedDirichlet, _instance)
        shape = torch.Size(batch_shape) + self.event_shape
        new.concentration1, new.concentration0 = self.concentration1.expand(shape), self.concentration0.expand(shape)
        super(GeneralizedDirichlet, new).__init__(torch.Size(batch_shape), self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def _coordinates(self) -> Beta:
        return Beta(self.concentration1, self.concentration0)

    @property
    def mean(self):
        """E[Y_l] = E[X_l] prod_{f<l} E[1 - X_f] (the X_l are independent)."""
        return inverse_geometric_transform(self._coordinates.mean)[0]

    @property
    def variance(self):
        """E[Y_l^2] - E[Y_l]^2 with E[Y_l^2] = E[X_l^2] prod_{f<l} E[(1 - X_f)^2]."""
        a, b = self.concentration1, self.concentration0
        second = a * (a + 1) / ((a + b) * (a + b + 1))
        rest = (b * (b + 1) / ((a + b) * (a + b + 1))).log().cumsum(-1)
        before = torch.cat([torch.zeros_like(rest[..., :1]), rest[..., :-1]], -1)
        return second * before.exp() - self.mean.pow(2)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        x = geometric_transform(value)
        return self._coordinates.log_prob(x).sum(-1) - log_remaining_mass(value)

    def rsample(self, sample_shape=torch.Size()):
        return inverse_geometric_transform(self._coordinates.rsample(sample_shape))[0]
