"""Bernoulli components (binary features) under Beta priors:

    mu_kd ~ Beta(kappa0 m0_d, kappa0 (1 - m0_d)),     x_nd | z_n = k ~ Bernoulli(mu_kd)

(``models.bernoulli_mixture``; m0 the data's mean, clamped into [0.01, 0.99], kappa0 pseudo-samples).
The factor q(mu_kd) = Beta(a_kd, b_kd) has natural parameters a = kappa0 m0 + S_k and
b = kappa0 (1 - m0) + N_k - S_k, linear in the count and the sum (rows centred on m0 by the base:
S_k = S_k^c + N_k m0), and

    E ln f(x | mu_k) = sum_d x_d (psi(a_kd) - psi(b_kd)) + psi(b_kd) - psi(a_kd + b_kd)

is linear in x: one matrix product for the N x K table.
"""

import pyro
import pyro.distributions as dist
import torch
from torch.distributions import kl_divergence

from bnpzoo.families.base import ComponentPrior, ConjugateFamily
from bnpzoo.families.contract import Capabilities
from bnpzoo.ops import bernoulli_log_density


def prior_means(mean: torch.Tensor) -> torch.Tensor:
    """m0 clamped into [0.01, 0.99]: a feature that is always 0 or 1 still has a proper prior."""
    return mean.clamp(0.01, 0.99)


class BetaBernoulliFamily(ConjugateFamily):
    name = "Bernoulli"
    covariance = "bernoulli"
    # a probability per feature and no spread beside it: Sigma0 means nothing here
    capabilities = Capabilities(frozenset({"vmm", "natural", "evidence"}), moves=True, spread_prior=False)

    def natural(self, stats: dict, prior: ComponentPrior) -> dict:
        count, m0 = stats["count"][:, None], prior_means(prior.mean).to(stats["sum"])
        ones = stats["sum"] + count * prior.mean.to(stats["sum"])  # S_k = S_k^c + N_k m0
        return {"a": prior.mean_precision * m0 + ones, "b": prior.mean_precision * (1 - m0) + count - ones}

    def counts(self, q: dict, prior: ComponentPrior) -> torch.Tensor:
        return (q["a"] + q["b"])[:, 0] - prior.mean_precision

    @staticmethod
    def valid(q: dict) -> torch.Tensor:
        """Which factors are proper, (K,): every a_kd, b_kd > 0."""
        return ((q["a"] > 0) & (q["b"] > 0)).all(1)

    def point(self, q: dict, prior: ComponentPrior) -> dict:
        return {"means": (q["a"] / (q["a"] + q["b"])).to(prior.mean.dtype)}

    def log_density(self, x: torch.Tensor, point: dict) -> torch.Tensor:
        return bernoulli_log_density(x, point["means"])

    def expected_log_density(self, x, q, prior, point=None, log_weights=0.0) -> torch.Tensor:
        total = torch.digamma(q["a"] + q["b"])
        e_one, e_zero = torch.digamma(q["a"]) - total, torch.digamma(q["b"]) - total
        return x @ (e_one - e_zero).T.to(x.dtype) + (e_zero.sum(1).to(x.dtype) + log_weights)

    def expected_data_term(self, q: dict, stats: dict, prior: ComponentPrior) -> torch.Tensor:
        total = torch.digamma(q["a"] + q["b"])
        count, ones = stats["count"][:, None], stats["sum"] + stats["count"][:, None] * prior.mean.to(stats["sum"])
        return (ones * (torch.digamma(q["a"]) - total) + (count - ones) * (torch.digamma(q["b"]) - total)).sum(1)

    def kl(self, q: dict, prior: ComponentPrior) -> torch.Tensor:
        m0 = prior_means(prior.mean).to(q["a"])
        return kl_divergence(dist.Beta(q["a"], q["b"]), dist.Beta(prior.mean_precision * m0,
                                                                  prior.mean_precision * (1 - m0))).sum(1)

    def sample_factor(self, q: dict, prior: ComponentPrior) -> None:
        pyro.sample("mu", dist.Beta(q["a"].to(prior.mean.dtype), q["b"].to(prior.mean.dtype)).to_event(1))

    @staticmethod
    def point_of_sites(sites: dict, prior: ComponentPrior) -> dict:
        return {"means": sites["mu"].to(prior.mean.dtype)}

    @staticmethod
    def variances(point: dict) -> torch.Tensor:
        """mu_kd (1 - mu_kd), (K, D)."""
        return point["means"] * (1 - point["means"])

    covariances = variances
