"""Gaussian components with a diagonal covariance each (``"diag"``), or one variance per cluster
shared by its features (``"spherical"``), under Normal-Gamma priors:

    tau_kd ~ Gamma(nu0 / 2, nu0 sigma0_d^2 / 2)        (E[tau_kd] = 1 / sigma0_d^2)
    mu_kd | tau_kd ~ N(m0_d, 1 / (kappa0 tau_kd))
    x_nd | z_n = k ~ N(mu_kd, 1 / tau_kd)

and for ``"spherical"`` one tau_k ~ Gamma(nu0 D / 2, nu0 D sigma0^2 / 2) for all features, sigma0^2
the mean of the sigma0_d^2 (``models.dp_gmm``). The one-dimensional Normal-Wishart of
``families.normal_wishart``, once per feature (or pooled over features): with rows centred on m0,

    kappa_k = kappa0 + N_k     w_k = S_k     nu_k = nu0 + N_k     Psi_kd = nu0 sigma0_d^2 + Q_kd

(Q_kd = sum_n r_nk x_nd^2), the factor's shape a_k = nu_k / 2 (nu_k D / 2 pooled) and rate
b_kd = (Psi_kd - w_kd^2 / kappa_k) / 2 (summed over d pooled), and

    E ln N(x | mu_k, diag(1 / tau_k)) = ln N(x | m_k, diag(b_k / a_k)) + D/2 (psi(a_k) - ln a_k)
                                        - D / (2 kappa_k).
"""

import math

import pyro
import pyro.distributions as dist
import torch

from bnpzoo.families.base import ComponentPrior, ConjugateFamily
from bnpzoo.ops import diagonal_gaussian_log_density


def gamma_kl(a, b, a0, b0):
    """KL(Gamma(a, b) || Gamma(a0, b0)), shapes a and rates b."""
    return ((a - a0) * torch.digamma(a) - torch.lgamma(a) + torch.lgamma(a0) + a0 * (b.log() - b0.log())
            + a * (b0 - b) / b)


class NormalGammaFamily(ConjugateFamily):
    def __init__(self, pooled: bool = False):
        self.pooled = pooled
        self.covariance = "spherical" if pooled else "diag"
        # a pooled variance gains little from halves of a glob of many clusters: a cut shrinks one
        # direction of D (one cluster over 40 true ones in 10-D: 2,328 nats of fit against 2,773 of
        # weights for halves), so births also propose quarters and eighths
        self.birth_pieces = (2, 4, 8) if pooled else (2,)
        self.name = f"{self.covariance} Gaussian"

    def _second_moments(self, xc, w):
        return {"squares": w.T @ (xc * xc)}

    def _label_second_moments(self, xc, index, count):
        return {"squares": xc.new_zeros(count.shape[0], xc.shape[1]).index_add_(0, index, xc * xc)}

    def _prior_variances(self, prior: ComponentPrior) -> torch.Tensor:
        variances = prior.covariance.diagonal()
        return variances.mean().expand_as(variances) if self.pooled else variances

    def natural(self, stats: dict, prior: ComponentPrior) -> dict:
        psi0 = (prior.dof * self._prior_variances(prior)).to(stats["squares"])
        return {"kappa": prior.mean_precision + stats["count"], "weighted": stats["sum"],
                "dof": prior.dof + stats["count"], "psi": psi0 + stats["squares"]}

    def counts(self, q: dict, prior: ComponentPrior) -> torch.Tensor:
        return (q["dof"] - prior.dof).clamp_min(0)

    @staticmethod
    def valid(q: dict) -> torch.Tensor:
        """Which factors are proper, (K,): kappa_k > 0, nu_k > 0 and every rate b_kd > 0."""
        kappa = q["kappa"]
        rates = q["psi"] - q["weighted"] ** 2 / kappa.clamp_min(1e-30)[:, None]
        return (kappa > 0) & (q["dof"] > 0) & (rates > 0).all(1)

    def _gamma(self, q: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """Shapes (K, 1) and rates (K, D), or (K, 1) pooled."""
        rate = 0.5 * (q["psi"] - q["weighted"] ** 2 / q["kappa"][:, None])
        rate = rate.clamp_min(torch.finfo(rate.dtype).tiny * 1e3)
        d = q["weighted"].shape[1]
        if self.pooled:
            return (0.5 * d * q["dof"])[:, None], rate.sum(1, keepdim=True)
        return 0.5 * q["dof"][:, None], rate

    def point(self, q: dict, prior: ComponentPrior) -> dict:
        """The means m_k and the expected precisions a_k / b_k, (K, D)."""
        shape, rate = self._gamma(q)
        means = q["weighted"] / q["kappa"][:, None] + prior.mean.to(rate)
        dtype = prior.mean.dtype
        return {"means": means.to(dtype), "precisions": (shape / rate).expand_as(means).to(dtype)}

    def base_measure_moments(self, q: dict) -> tuple:
        """E[tau_kd] = a_k / b_kd (K, D; pooled, one value a cluster across its features) and E_q[sum_d
        tau_kd (mu_kd - m0_d)^2] = D / kappa_k + sum_d E[tau_kd] m_kd^2 (K,), m_k centred
        (``families.base_measure``)."""
        shape, rate = self._gamma(q)
        m = q["weighted"] / q["kappa"][:, None]
        precisions = (shape / rate).expand_as(m)
        return precisions, m.shape[1] / q["kappa"] + (precisions * m**2).sum(1)

    def sample_factor(self, q: dict, prior: ComponentPrior) -> None:
        """precision ~ Gamma(a_k, b_k) (one per cluster pooled, else per feature), mu_kd ~ N(m_kd,
        1 / (kappa_k tau_kd))."""
        q = {name: value.to(prior.mean.dtype) for name, value in q.items()}
        shape, rate = self._gamma(q)
        mean = q["weighted"] / q["kappa"][:, None] + prior.mean
        if self.pooled:
            tau = pyro.sample("precision", dist.Gamma(shape[:, 0], rate[:, 0]))[:, None].expand_as(mean)
        else:
            tau = pyro.sample("precision", dist.Gamma(shape.expand_as(rate), rate).to_event(1))
        pyro.sample("mu", dist.Normal(mean, (q["kappa"][:, None] * tau).rsqrt()).to_event(1))

    def point_of_sites(self, sites: dict, prior: ComponentPrior) -> dict:
        mean, precision = sites["mu"], sites["precision"]
        precision = precision[:, None].expand_as(mean) if self.pooled else precision
        return {"means": mean.to(prior.mean.dtype), "precisions": precision.to(prior.mean.dtype)}

    def log_density(self, x: torch.Tensor, point: dict) -> torch.Tensor:
        return diagonal_gaussian_log_density(x, point["means"], point["precisions"])

    def correction(self, q: dict) -> torch.Tensor:
        d = q["weighted"].shape[1]
        shape = self._gamma(q)[0][:, 0]
        return 0.5 * d * (torch.digamma(shape) - shape.log()) - d / (2 * q["kappa"])

    def expected_data_term(self, q: dict, stats: dict, prior: ComponentPrior) -> torch.Tensor:
        """sum_n w_nk E_q ln N(x_n | mu_k, diag(1 / tau_k)) from the statistics, (K,): per feature
        N_k (psi(a_k) - ln b_kd - ln 2 pi) / 2 - a_k / (2 b_kd) (Q_kd - 2 S_kd m_kd + N_k m_kd^2), less
        N_k D / (2 kappa_k) (rows and m_k centred)."""
        shape, rate = self._gamma(q)
        d, count = q["weighted"].shape[1], stats["count"]
        m = q["weighted"] / q["kappa"][:, None]
        spread = stats["squares"] - 2 * stats["sum"] * m + count[:, None] * m**2
        log_precision = (torch.digamma(shape) - rate.log()).expand_as(m).sum(1)
        return (0.5 * count * (log_precision - d * math.log(2 * math.pi) - d / q["kappa"])
                - 0.5 * (shape / rate * spread).sum(1))

    def kl(self, q: dict, prior: ComponentPrior) -> torch.Tensor:
        """KL(q(mu_k, tau_k) || p(mu_k, tau_k)) per cluster, (K,): per feature 1/2 (kappa0 / kappa - 1
        - ln(kappa0 / kappa) + kappa0 E[tau] m^2) (m centred), plus the Gammas' KL."""
        shape, rate = self._gamma(q)
        d = q["weighted"].shape[1]
        variances0 = self._prior_variances(prior).to(rate)
        if self.pooled:
            shape0, rate0 = 0.5 * d * prior.dof, 0.5 * d * prior.dof * variances0[:1]
        else:
            shape0, rate0 = 0.5 * prior.dof, 0.5 * prior.dof * variances0
        shape0 = torch.as_tensor(shape0, dtype=rate.dtype, device=rate.device)
        ratio = prior.mean_precision / q["kappa"]
        means = q["weighted"] / q["kappa"][:, None]
        gaussian = 0.5 * d * (ratio - 1 - ratio.log()) + 0.5 * prior.mean_precision * (shape / rate * means**2).sum(1)
        return gaussian + gamma_kl(shape, rate, shape0, rate0).sum(1)

    def precision(self, point: dict) -> torch.Tensor:
        """The program's site ``precision`` at the point estimate: (K, D), or (K,) pooled."""
        return point["precisions"][:, 0] if self.pooled else point["precisions"]

    def covariances(self, point: dict) -> torch.Tensor:
        """1 / E[tau_kd]: (K, D), or (K,) pooled (scikit-learn's ``covariances_``)."""
        return 1 / self.precision(point)

    @staticmethod
    def variances(point: dict) -> torch.Tensor:
        """1 / E[tau_kd] per feature, (K, D)."""
        return 1 / point["precisions"]
