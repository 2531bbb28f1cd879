"""Generalized Gaussian components that learn their scale, one per cluster and feature
(``covariance="diag"`` at rho != 2): [PYPM-sVMM] eq. (2)-(3) with the scale s_kd learned where the
paper fixes it. With tau = s^-rho the density is rho tau^(1/rho) / (2 Gamma(1/rho)) exp(-tau |x - mu|^rho):

    tau_kd ~ Gamma(a0, b0)       a0 = nu0 / rho, b0 = a0 s0_d^rho    (E[tau] = s0^-rho; nu0 rows' worth)
    mu_kd  ~ N(m0_d, sigma0_d^2 / kappa0)
    x_nd | z_n = k ~ GGD(mu_kd, tau_kd^(-1/rho), rho)

sigma0 the prior's guess of a cluster's standard deviation (Sigma0's diagonal, the data's covariance
over 4 by default) and s0 its GGD shape (``ops.generalized_gaussian_shape``). At rho = 2 this is the
Gaussian with an independent (not Normal-Gamma) prior; the family serves 1 <= rho <= 2.

The factors q(tau_kd) = Gamma(a, b) and q(mu_kd) = N(m, v). Derivation (``benchmarks/reports/pyp_ggm.md``,
the last sections). For rho <= 2, t^(rho/2) is concave, so by Jensen E_q |x - mu|^rho <= (E_q (x -
mu)^2)^(rho/2) = ((x - m)^2 + v)^(rho/2), and the bound this family maximises takes

    E_q ln f(x | mu, tau) >= ln rho - ln 2 - ln Gamma(1/rho) + (psi(a) - ln b) / rho - (a / b) ((x - m)^2 + v)^(rho/2)

(the assignments' scores, ``expected_log_density``; equality at rho = 2). Its tangent at any c > 0,
|u|^rho <= h u^2 + (1 - rho/2) c^rho with h = (rho/2) c^(rho - 2), is quadratic in mu, so the statistics

    N_k = sum r_nk   W = sum r h   S = sum r h x   Q = sum r h x^2   R = sum r (1 - rho/2) c^rho

(per feature, rows centred on m0) bound sum_n r_nk E_q |x_n - mu|^rho by W (m^2 + v) - 2 S m + Q + R for
every q(mu), with equality where each row's anchor c_nkd = sqrt((x_nd - m_kd)^2 + v_kd) is taken at that q.
The statistics add over rows, batches and clusters (a sum of tangents is a tangent), and given them
each factor has a closed form ([PYPM-sVMM]'s MM principle: a minorant, maximised):

    q(tau): a = a0 + N_k / rho,   b = b0 + W (m^2 + v) - 2 S m + Q + R
    q(mu):  1 / v = 2 (a / b) W + kappa0 / sigma0^2,   m = 2 (a / b) S v

alternated ``ALTERNATIONS`` times from the unweighted start (``_factors``). A batch step, statistics
anchored at the factors that scored the assignments (``statistics(..., factors=q)``), then these
updates, never lowers the bound: the minorant is tight at the old factors and the new ones raise it.
At rho = 1 the mean's update is iteratively reweighted least squares toward the weighted median.
The factors' natural parameters are the statistics themselves (q = ``natural(stats)``, the prior
added where the factors are solved), so a stochastic learner's convex steps average statistics.
"""

import math

import pyro
import pyro.distributions as dist
import torch

from bnpzoo.families.base import ComponentPrior, ConjugateFamily
from bnpzoo.families.contract import Capabilities
from bnpzoo.families.normal_gamma import gamma_kl
from bnpzoo.ops import (generalized_gaussian_shape, generalized_gaussian_std, generalized_gaussian_table,
                        row_blocks)

ALTERNATIONS = 8  # updates of q(tau) then q(mu) per solve: the pair's coupling is through E[tau] alone
KEYS = ("count", "weight", "first", "second", "rest")


class LearnedScaleFamily(ConjugateFamily):
    """x_d ~ GGD(mu_kd, s_kd, rho) with s_kd learned (the module docstring), 1 <= rho <= 2."""

    covariance = "diag"
    # no "evidence": a cluster's marginal likelihood has no closed form at rho != 2 (no collapsed sampler).
    # MAP assignments: a stochastic learner's record holds tangents anchored where each batch was scored,
    # so the rest of a cluster less the pieces of a soft division is no statistic of rows (svmm with
    # responsibilities opened no cluster: 3 for 8, NMI 0.46); vmm too, where they did as well or better
    # (``benchmarks/reports/pyp_ggm.md``)
    capabilities = Capabilities(frozenset({"vmm", "natural"}), moves=True, spread_prior=True, soft=False)

    def __init__(self, rho: float = 1.0):
        if not 1.0 <= rho <= 2.0:
            raise ValueError(f"a learned generalized-Gaussian scale needs 1 <= rho <= 2 (its bound is a tangent of "
                             f"|u|^rho), got rho={rho}")
        self.rho = float(rho)
        self.name = {1.0: "laplace"}.get(self.rho, f"generalized Gaussian (rho={self.rho:g})") + ", learned scale"
        self.log_norm = math.log(self.rho / 2) - math.lgamma(1 / self.rho)  # ln rho - ln 2 - ln Gamma(1/rho)

    # -- the prior ---------------------------------------------------------------------------
    def _gamma_prior(self, prior: ComponentPrior, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(a0, b0) per feature, (D,)."""
        shape0 = prior.dof / self.rho
        s0 = generalized_gaussian_shape(prior.std.to(like), self.rho)
        return torch.full_like(s0, shape0), shape0 * s0**self.rho

    @staticmethod
    def _mean_prior_precision(prior: ComponentPrior, like: torch.Tensor) -> torch.Tensor:
        return prior.mean_precision / prior.std.to(like) ** 2

    # -- statistics ----------------------------------------------------------------------------
    def _anchors(self, xc: torch.Tensor, means: torch.Tensor, variances: torch.Tensor) -> dict:
        """A row's tangent terms h and (1 - rho/2) c^rho at anchors c = sqrt((x - m)^2 + v) (broadcast)."""
        c2 = (xc - means) ** 2 + variances
        return {"h": 0.5 * self.rho * c2 ** (0.5 * self.rho - 1), "rest": (1 - 0.5 * self.rho) * c2 ** (0.5 * self.rho)}

    def _own_anchors(self, count, total, prior):
        """Anchors where no factors scored the rows: each cluster's shrunk mean of its rows, and the
        variance of a mean of its rows at the prior's spread (any c > 0 gives a valid tangent)."""
        precision = count + prior.mean_precision
        return total / precision[:, None], prior.std.to(total) ** 2 / precision[:, None]

    def statistics(self, x, weights, prior, factors=None) -> dict:
        """The statistics (module docstring) of weights (N, K), anchored at ``factors`` (the q that
        scored them) or at the rows' own means; float64, in blocks of rows (no N x K x D tensor)."""
        xc = (x - prior.mean).double()
        w = weights.double()
        k, d = w.shape[1], xc.shape[1]
        if factors is None:
            means, variances = self._own_anchors(w.sum(0), w.T @ xc, prior)
        else:
            means, variances = self._factors(factors, prior)[:2]
        stats = {name: xc.new_zeros(k, d) for name in KEYS[1:]}
        for rows in row_blocks(xc.shape[0], k * d):
            block, r = xc[rows, None, :], w[rows, :, None]
            terms = self._anchors(block, means, variances)
            rh = r * terms["h"]
            stats["weight"] += rh.sum(0)
            stats["first"] += (rh * block).sum(0)
            stats["second"] += (rh * block**2).sum(0)
            stats["rest"] += (r * terms["rest"]).sum(0)
        return {"count": w.sum(0), **stats}

    def label_statistics(self, x, labels, k, prior, factors=None) -> dict:
        """``statistics`` of one-hot weights from ``labels`` (-1: in no cluster), by index sums."""
        xc = (x - prior.mean).double()
        index = labels % (k + 1)  # entry k collects the -1s
        count = torch.bincount(index, minlength=k + 1).double()
        total = xc.new_zeros(k + 1, xc.shape[1]).index_add_(0, index, xc)
        if factors is None:
            means, variances = self._own_anchors(count[:k], total[:k], prior)
        else:
            means, variances = self._factors(factors, prior)[:2]
        pad = means.new_zeros(1, means.shape[1])
        terms = self._anchors(xc, torch.cat([means, pad])[index], torch.cat([variances, pad + 1])[index])
        sums = {"weight": terms["h"], "first": terms["h"] * xc, "second": terms["h"] * xc**2, "rest": terms["rest"]}
        stats = {name: xc.new_zeros(k + 1, xc.shape[1]).index_add_(0, index, value)[:k] for name, value in sums.items()}
        return {"count": count[:k], **stats}

    # -- the factors ---------------------------------------------------------------------------
    def natural(self, stats: dict, prior: ComponentPrior) -> dict:
        return {name: stats[name] for name in KEYS}

    def counts(self, q: dict, prior: ComponentPrior) -> torch.Tensor:
        return q["count"].clamp_min(0)

    @staticmethod
    def valid(q: dict) -> torch.Tensor:
        """Proper statistics, (K,): N_k >= 0, W >= 0, and a tangent W m^2 - 2 S m + Q + R >= 0 at every m."""
        rest = q["second"] + q["rest"]
        quadratic = q["weight"] * rest - q["first"] ** 2 >= -1e-9 * (q["weight"] * rest).abs()
        return (q["count"] >= 0) & ((q["weight"] >= 0) & (rest >= 0) & quadratic).all(1)

    @staticmethod
    def _tangent(stats: dict, m: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """W (m^2 + v) - 2 S m + Q + R: the bound on sum_n r E_q |x_n - mu|^rho, (K, D)."""
        return stats["weight"] * (m**2 + v) - 2 * stats["first"] * m + stats["second"] + stats["rest"]

    def _factors(self, q: dict, prior: ComponentPrior):
        """(m, v, a, b), each (K, D), m centred on m0: the closed forms alternated (module docstring)."""
        shape0, rate0 = self._gamma_prior(prior, q["weight"])
        precision0 = self._mean_prior_precision(prior, q["weight"])
        weight = q["weight"].clamp_min(0)
        shape = shape0 + q["count"].clamp_min(0)[:, None] / self.rho
        m = q["first"] / (weight + precision0)
        v = 1 / (weight + precision0)
        for _ in range(ALTERNATIONS):
            rate = rate0 + self._tangent(q, m, v).clamp_min(0)
            v = 1 / (2 * shape / rate * weight + precision0)
            m = 2 * shape / rate * q["first"] * v
        rate = rate0 + self._tangent(q, m, v).clamp_min(0)
        return m, v, shape, rate

    def point(self, q: dict, prior: ComponentPrior) -> dict:
        """The means m_k and the standard deviations at E[tau] (``scales``, (K, D))."""
        m, _, shape, rate = self._factors(q, prior)
        dtype = prior.mean.dtype
        scales = generalized_gaussian_std(shape / rate, self.rho)
        return {"means": (m + prior.mean.to(m)).to(dtype), "scales": scales.to(dtype)}

    def sample_factor(self, q: dict, prior: ComponentPrior) -> None:
        """precision ~ Gamma(a, b) (the program's tau), mu_kd ~ N(m_kd, v_kd)."""
        m, v, shape, rate = (value.to(prior.mean.dtype) for value in self._factors(q, prior))
        pyro.sample("precision", dist.Gamma(shape, rate).to_event(1))
        pyro.sample("mu", dist.Normal(m + prior.mean, v.sqrt()).to_event(1))

    def point_of_sites(self, sites: dict, prior: ComponentPrior) -> dict:
        dtype = prior.mean.dtype
        scales = generalized_gaussian_std(sites["precision"], self.rho)
        return {"means": sites["mu"].to(dtype), "scales": scales.to(dtype)}

    def precision(self, point: dict) -> torch.Tensor:
        """The program's site ``precision`` (tau) at the point estimate, (K, D)."""
        return (point["scales"] * generalized_gaussian_shape(1.0, self.rho)) ** -self.rho

    # -- densities and the bound -------------------------------------------------------------------
    def log_density(self, x: torch.Tensor, point: dict) -> torch.Tensor:
        return generalized_gaussian_table(x, point["means"], point["scales"], self.rho)

    def expected_log_density(self, x, q, prior, point=None, log_weights=0.0) -> torch.Tensor:
        """ln pi_k + the bound on E_q ln f(x_n | mu_k, tau_k) (module docstring), (N, K)."""
        m, v, shape, rate = self._factors(q, prior)
        # the table at E[tau], plus E[ln tau] - ln E[tau] per feature
        std = generalized_gaussian_std(shape / rate, self.rho).to(x.dtype)
        table = generalized_gaussian_table(x, m.to(x.dtype) + prior.mean, std, self.rho, smoothing=v.to(x.dtype))
        return table + ((torch.digamma(shape) - shape.log()).sum(1) / self.rho).to(x.dtype) + log_weights

    def expected_data_term(self, q: dict, stats: dict, prior: ComponentPrior) -> torch.Tensor:
        """sum_n w_nk (the bound on E_q ln f(x_n | mu_k, tau_k)) from the statistics, (K,)."""
        return self.data_term(stats, self._factors(q, prior))

    def data_term(self, stats: dict, factors: tuple) -> torch.Tensor:
        """``expected_data_term`` at factors (m, v, a, b): per feature N_k (ln rho - ln 2 - ln Gamma(1/rho)
        + (psi(a) - ln b) / rho) - (a / b) (the tangent at m, v)."""
        m, v, shape, rate = factors
        per_row = self.log_norm + (torch.digamma(shape) - rate.log()) / self.rho
        return (stats["count"][:, None] * per_row - shape / rate * self._tangent(stats, m, v)).sum(1)

    def kl(self, q: dict, prior: ComponentPrior) -> torch.Tensor:
        return self.factors_kl(self._factors(q, prior), prior)

    def factors_kl(self, factors: tuple, prior: ComponentPrior) -> torch.Tensor:
        """KL(q(mu_k) q(tau_k) || p(mu_k) p(tau_k)) per cluster at factors (m, v, a, b), (K,)."""
        m, v, shape, rate = factors
        shape0, rate0 = self._gamma_prior(prior, m)
        precision0 = self._mean_prior_precision(prior, m)
        ratio = precision0 * v
        gaussian = 0.5 * (ratio - 1 - ratio.log() + precision0 * m**2)
        return (gaussian + gamma_kl(shape, rate, shape0, rate0)).sum(1)

    @staticmethod
    def variances(point: dict) -> torch.Tensor:
        """std_kd^2, (K, D) (scikit-learn's "diag" ``covariances_``)."""
        return point["scales"] ** 2

    covariances = variances
