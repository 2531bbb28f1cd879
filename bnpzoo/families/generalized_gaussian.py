"""Generalized Gaussian components with one fixed standard deviation per feature, shared by every
cluster: the papers' model ([DPM-SGA] section 2.1, [PYPM-sVMM] eq. (2)-(3)); only the means are
learned.

    mu_k ~ N(m0, diag(std^2) / kappa0),     x_nd | z_n = k ~ GGD(mu_kd, s_d, rho)

rho = 2 is the Gaussian, rho = 1 the Laplace distribution. At rho = 2 the means' factor is
conjugate, q(mu_k) = N(w_k / tau_k, diag(std^2) / tau_k) with tau_k = kappa0 + N_k and w_k = S_k
(rows centred on m0), and E_q ln f(x | mu_k) = ln f(x | m_k) - D / (2 tau_k): the Occam penalty of
``inference.stick_mixture.mean_factors``. At any other rho the means' posterior is not conjugate (which is why
[PYPM-sVMM] steps them with sVMM): the family then has no closed forms, and the gradient learners
take the Laplace approximation of ``inference.stick_mixture.mean_factors`` with ``location_information``.
"""

import math

import pyro
import pyro.distributions as dist
import torch

from bnpzoo.families.base import ComponentPrior, ConjugateFamily
from bnpzoo.families.contract import Capabilities
from bnpzoo.inference.stick_mixture.mean_factors import means_kl
from bnpzoo.mapped import passes
from bnpzoo.ops import generalized_gaussian_log_density


class GeneralizedGaussianFamily(ConjugateFamily):
    """x_d ~ GGD(mu_d, s_d, rho) with standard deviation ``std_d`` per feature."""

    covariance = "fixed"

    def __init__(self, rho: float = 2.0):
        self.rho = float(rho)
        # conjugate at rho = 2 only; one fixed scale: a pruning phase closes surplus clusters, and
        # Sigma0 is the component covariance itself (``families.contract``)
        self.capabilities = Capabilities(frozenset({"vmm", "natural", "fisher", "evidence"}) if self.rho == 2.0
                                         else frozenset())

    @property
    def pruning_precision(self) -> float:
        """The default prior precision of the learners' pruning phase (``inference.stick_mixture.vmm``): 20 for the
        Gaussian, 100 for the Laplace, log-linear in rho between them, 20 above 2. A mean under a
        heavier-tailed likelihood is median-like: it answers the prior's pull less, so the phase
        needs a stronger prior to empty the clusters K-means split off. Measured with sVMM on
        digits, wine, iris, breast cancer and generated blobs (``benchmarks/reports/pyp_ggm.md``):
        for the Laplace, 20 left 38 of digits' 50 clusters (NMI 0.59), 100 left 16 (NMI 0.70)."""
        return 20.0 * 5.0 ** min(max(2.0 - self.rho, 0.0), 1.0)

    @property
    def name(self) -> str:
        return {2.0: "gaussian", 1.0: "laplace"}.get(self.rho, f"generalized Gaussian (rho={self.rho:g})")

    def log_density(self, x: torch.Tensor, point: dict) -> torch.Tensor:
        return generalized_gaussian_log_density(x, point["means"], point["std"], self.rho)

    @staticmethod
    def variances(point: dict) -> torch.Tensor:
        """std_d^2 for every cluster, (K, D) (also scikit-learn's "diag" ``covariances_``)."""
        return (point["std"] ** 2).expand_as(point["means"]).clone()

    covariances = variances

    def mean_scale(self, point: dict, counts: torch.Tensor, prior_precision: float) -> torch.Tensor:
        """The Laplace approximation at the point estimate, precision N_k I + lambda0 / std^2 per
        feature, I the location's information (for the Gaussian, the conjugate factor's
        N(mean_k, std^2 / (N_k + lambda0)))."""
        std = point["std"]
        information = self.location_information(std).to(point["means"]) * torch.ones_like(point["means"])
        return (counts[:, None] * information + prior_precision / std**2).rsqrt()

    def split_views(self, rows: torch.Tensor, prior: ComponentPrior):
        """In units of the component scale: a split divides a cluster where the model measures distance."""
        yield rows / prior.std

    def location_information(self, std) -> torch.Tensor:
        """Fisher information of a component's location per feature, rho^2 Gamma(2 - 1/rho) /
        (s^2 Gamma(1/rho)) (1 / std^2 for the Gaussian, 2 / std^2 for the Laplace)."""
        rho = self.rho
        per_variance = rho**2 * math.exp(math.lgamma(2 - 1 / rho) + math.lgamma(3 / rho) - 2 * math.lgamma(1 / rho))
        return per_variance / torch.as_tensor(std) ** 2

    # -- the conjugate closed forms (rho = 2) ------------------------------------------------
    def natural(self, stats: dict, prior: ComponentPrior) -> dict:
        return {"precision": prior.mean_precision + stats["count"], "weighted": stats["sum"]}

    def counts(self, q: dict, prior: ComponentPrior) -> torch.Tensor:
        return (q["precision"] - prior.mean_precision).clamp_min(0)

    @staticmethod
    def valid(q: dict) -> torch.Tensor:
        """Which factors are proper, (K,): tau_k > 0."""
        return q["precision"] > 0

    def point(self, q: dict, prior: ComponentPrior) -> dict:
        means = q["weighted"] / q["precision"][:, None] + prior.mean.to(q["weighted"])
        return {"means": means.to(prior.mean.dtype), "std": prior.std}

    def sample_factor(self, q: dict, prior: ComponentPrior) -> None:
        """mu_k ~ N(m_k, diag(std^2) / tau_k)."""
        q = {name: value.to(prior.mean.dtype) for name, value in q.items()}
        mean = q["weighted"] / q["precision"][:, None] + prior.mean
        pyro.sample("mu", dist.Normal(mean, prior.std * q["precision"].rsqrt()[:, None]).to_event(1))

    @staticmethod
    def point_of_sites(sites: dict, prior: ComponentPrior) -> dict:
        return {"means": sites["mu"].to(prior.mean.dtype), "std": prior.std}

    def correction(self, q: dict) -> torch.Tensor:
        return -q["weighted"].shape[1] / (2 * q["precision"])

    def expected_data_term(self, q: dict, stats: dict, prior: ComponentPrior) -> torch.Tensor:
        """sum_n w_nk E_q ln N(x_n | mu_k, diag(std^2)) from the statistics, (K,), less the rows' own
        terms (the normaliser and -|x_n - m0|^2 / (2 std^2), summed over the rows: the same for any
        assignment of them, so that differences between assignments, which merges and births
        score, are exact): per feature (S_kd m_kd - N_k m_kd^2 / 2) / std_d^2, less N_k D / (2 tau_k)
        (rows and m_k centred)."""
        std = prior.std.to(q["weighted"])
        m = q["weighted"] / q["precision"][:, None]
        count = stats["count"]
        return (((stats["sum"] * m - 0.5 * count[:, None] * m**2) / std**2).sum(1)
                - count * m.shape[1] / (2 * q["precision"]))

    def rows_term(self, x: torch.Tensor, prior: ComponentPrior) -> float:
        """sum_n ln N(x_n | m0, diag(std^2)): the rows' own terms of ``expected_data_term``."""
        std = prior.std.double()
        squares = sum((((x[rows] - prior.mean).double() / std) ** 2).sum() for rows in passes(x, x.shape[1]))
        return float(-0.5 * squares - x.shape[0] * (0.5 * x.shape[1] * math.log(2 * math.pi) + std.log().sum()))

    def kl(self, q: dict, prior: ComponentPrior) -> torch.Tensor:
        std = prior.std.to(q["weighted"])
        return means_kl(q["weighted"] / q["precision"][:, None], std**2 / q["precision"][:, None], std=std,
                        prior_mean=0.0, prior_precision=prior.mean_precision, per_cluster=True)
