"""Gaussian components with a full covariance each, under the Normal-Wishart prior:

    Lambda_k ~ Wishart(nu0, W0),   W0^-1 = nu0 Sigma0       (E[Lambda_k] = Sigma0^-1)
    mu_k | Lambda_k ~ N(m0, (kappa0 Lambda_k)^-1)
    x_n | z_n = k ~ N(mu_k, Lambda_k^-1)

(``models.dp_gmm`` with ``covariance="full"``). Its factor q(mu_k, Lambda_k) = NW(m_k, kappa_k,
W_k, nu_k) has natural parameters (rows centred on m0; Bishop, PRML eq. (10.60)-(10.63))

    kappa_k = kappa0 + N_k        w_k = kappa_k m_k = S_k
    nu_k    = nu0 + N_k           Psi_k = W_k^-1 + kappa_k m_k m_k^T = nu0 Sigma0 + Q_k

with N_k, S_k, Q_k the weighted count, sum and scatter sum_n r_nk x_n x_n^T: linear in the
statistics, so natural-gradient SVI's convex combinations stay valid (Psi - w w^T / kappa > 0 is a
Schur complement: a convex cone). The expected log-density (PRML eq. (10.64)-(10.65)),

    E ln N(x | mu_k, Lambda_k^-1) = ln N(x | m_k, (nu_k W_k)^-1)
        + 1/2 (sum_i psi((nu_k + 1 - i) / 2) + D ln 2 - D ln nu_k) - D / (2 kappa_k),

is the density at the expected precision plus a correction per cluster, through K triangular
factors (``ops.full_gaussian_log_density``: one product a block of rows for all of them). With
C_k C_k^T = W_k^-1 (Cholesky), F_k = sqrt(nu_k) C_k^-T is a triangular square root of nu_k W_k.
"""

import math

import pyro
import pyro.distributions as dist
import torch

from bnpzoo.families.base import ComponentPrior, ConjugateFamily
from bnpzoo.ops import full_gaussian_log_density, weighted_scatter


def _cholesky(matrices: torch.Tensor) -> torch.Tensor:
    """Cholesky factors, with a jitter of 1e-6 of the mean eigenvalue added to the matrices whose
    factorisation fails, and NaN where that fails too (the fit's finite checks then stop it). Both
    factorisations are computed and chosen per matrix, with no host synchronisation: a test of
    ``info`` on the host was 40 % of a full-covariance fit's synchronisations, each of which idles a
    GPU (``benchmarks/reports/gpu.md``)."""
    factor, info = torch.linalg.cholesky_ex(matrices)
    eye = torch.eye(matrices.shape[-1], dtype=matrices.dtype, device=matrices.device)
    scale = matrices.diagonal(dim1=-2, dim2=-1).mean(-1).abs().clamp_min(torch.finfo(matrices.dtype).tiny)
    jittered, still = torch.linalg.cholesky_ex(matrices + 1e-6 * scale[..., None, None] * eye)
    jittered = torch.where(still[..., None, None] > 0, torch.nan, jittered)
    return torch.where(info[..., None, None] > 0, jittered, factor)


def _digamma_sum(dof: torch.Tensor, d: int) -> torch.Tensor:
    """sum_{i=1..D} psi((nu + 1 - i) / 2), (K,)."""
    i = torch.arange(1, d + 1, dtype=dof.dtype, device=dof.device)
    return torch.digamma((dof[:, None] + 1 - i) / 2).sum(1)


class NormalWishartFamily(ConjugateFamily):
    name = "full-covariance Gaussian"
    covariance = "full"

    def _second_moments(self, xc, w):
        """Q_k = sum_n w_nk x_n x_n^T (``ops.weighted_scatter``: one product a block of rows for all
        clusters, never N x K x D at once)."""
        return {"scatter": weighted_scatter(xc, w)}

    def _label_second_moments(self, xc, index, count):
        order = torch.argsort(index, stable=True)
        sizes = count.long().tolist()  # one host sync a block: the rows of each cluster, contiguous
        scatter = xc.new_zeros(len(sizes), xc.shape[1], xc.shape[1])
        for j, rows in enumerate(torch.split(xc[order], sizes)):
            if rows.shape[0]:
                scatter[j] = rows.T @ rows
        return {"scatter": scatter}

    def _own_views(self, rows: torch.Tensor, prior: ComponentPrior):
        """The rows whitened by their own covariance (C^-1 x,
        C C^T their covariance). A cluster that holds two parallel elongated groups is bimodal across
        its long axis, and 2-means cuts there only once the rows are whitened: in per-feature units
        it cuts along the long axis, a split the bound refuses (two groups of 15 rows stayed one
        cluster on 2 of 100 fits). Whitened alone, the cuts of a glob of many round clusters fell
        through them (50 clusters in 10-D from a start of 2: 9 to 15)."""
        if rows.shape[1] == 1:  # the same view as each feature in its own units
            return
        centred = rows - rows.mean(0)
        covariance = centred.T @ centred / max(rows.shape[0] - 1, 1)
        jitter = covariance.diagonal().mean() * 1e-6 + torch.finfo(rows.dtype).tiny
        factor = _cholesky(covariance + jitter * torch.eye(rows.shape[1], dtype=rows.dtype, device=rows.device))
        yield torch.linalg.solve_triangular(factor, rows.T, upper=False).T

    def natural(self, stats: dict, prior: ComponentPrior) -> dict:
        psi0 = (prior.dof * prior.covariance).to(stats["scatter"])
        return {"kappa": prior.mean_precision + stats["count"], "weighted": stats["sum"],
                "dof": prior.dof + stats["count"], "psi": psi0 + stats["scatter"]}

    def counts(self, q: dict, prior: ComponentPrior) -> torch.Tensor:
        return (q["dof"] - prior.dof).clamp_min(0)

    @staticmethod
    def valid(q: dict) -> torch.Tensor:
        """Which factors are proper, (K,): kappa_k > 0, nu_k > D - 1 and W_k^-1 positive definite
        (a learner's step that is not a convex combination can leave the domain)."""
        w, kappa = q["weighted"], q["kappa"]
        inverse_scale = q["psi"] - w[:, :, None] * w[:, None, :] / kappa.clamp_min(1e-30)[:, None, None]
        return (kappa > 0) & (q["dof"] > w.shape[1] - 1) & (torch.linalg.cholesky_ex(inverse_scale).info == 0)

    @staticmethod
    def _inverse_scale_factor(q: dict) -> torch.Tensor:
        """C_k with C_k C_k^T = W_k^-1 = Psi_k - w_k w_k^T / kappa_k."""
        w = q["weighted"]
        return _cholesky(q["psi"] - w[:, :, None] * w[:, None, :] / q["kappa"][:, None, None])

    def point(self, q: dict, prior: ComponentPrior) -> dict:
        """The means m_k and a triangular square root of the expected precision nu_k W_k."""
        c = self._inverse_scale_factor(q)
        eye = torch.eye(c.shape[-1], dtype=c.dtype, device=c.device).expand_as(c)
        factor = torch.linalg.solve_triangular(c, eye, upper=False).transpose(-2, -1) * q["dof"].sqrt()[:, None, None]
        means = q["weighted"] / q["kappa"][:, None] + prior.mean.to(c)
        dtype = prior.mean.dtype
        return {"means": means.to(dtype), "precision_factor": factor.to(dtype)}

    def base_measure_moments(self, q: dict) -> tuple:
        """E[Lambda_k] = nu_k W_k (K, D, D) and E_q[(mu_k - m0)^T Lambda_k (mu_k - m0)] = D / kappa_k + m_k^T
        E[Lambda_k] m_k (K,), m_k centred (``families.base_measure``)."""
        precisions = torch.cholesky_inverse(self._inverse_scale_factor(q)) * q["dof"][:, None, None]
        m = q["weighted"] / q["kappa"][:, None]
        spread = (m[:, None, :] @ precisions @ m[:, :, None])[:, 0, 0]
        return precisions, m.shape[1] / q["kappa"] + spread

    def sample_factor(self, q: dict, prior: ComponentPrior) -> None:
        """precision_k ~ Wishart(nu_k, W_k), mu_k ~ N(m_k, (kappa_k precision_k)^-1), in q's precision
        (float64 from the statistics: torch's Bartlett draws at nu in the thousands are singular in
        float32)."""
        scale = torch.cholesky_inverse(self._inverse_scale_factor(q))
        lam = pyro.sample("precision", dist.Wishart(q["dof"], covariance_matrix=scale))
        mean = q["weighted"] / q["kappa"][:, None] + prior.mean
        pyro.sample("mu", dist.MultivariateNormal(mean, precision_matrix=q["kappa"][:, None, None] * lam))

    def draw(self, q: dict, prior: ComponentPrior) -> dict:
        """Lambda_k ~ Wishart(nu_k, W_k) and mu_k ~ N(m_k, (kappa_k Lambda_k)^-1) with the triangular factor
        of Lambda_k drawn directly (Bartlett, upper-triangular): W_k = U U^T with U = C^-T (C C^T = W_k^-1),
        B upper triangular with B_ii^2 ~ chi2(nu_k - D + i), B_ij ~ N(0, 1) above the diagonal; then
        F = U B has F F^T ~ Wishart(nu_k, W_k) (as P A P, A Bartlett's lower factor and P the reversal,
        is B), and mu_k = m_k + F^-T e / sqrt(kappa_k). No Cholesky of a draw: torch's Wishart warns of
        singular draws at nu in the thousands."""
        c = self._inverse_scale_factor(q)
        k, d = c.shape[0], c.shape[-1]
        eye = torch.eye(d, dtype=c.dtype, device=c.device).expand_as(c)
        upper = torch.linalg.solve_triangular(c, eye, upper=False).transpose(-2, -1)
        dof = q["dof"][:, None] - d + torch.arange(1, d + 1, dtype=c.dtype, device=c.device)
        chi = (2 * torch.distributions.Gamma(dof / 2, torch.ones_like(dof)).sample()).sqrt()
        bartlett = torch.randn(k, d, d, dtype=c.dtype, device=c.device).triu(1) + torch.diag_embed(chi)
        factor = upper @ bartlett
        noise = torch.randn(k, d, 1, dtype=c.dtype, device=c.device)
        shift = torch.linalg.solve_triangular(factor.transpose(-2, -1), noise, upper=False)[..., 0]
        means = q["weighted"] / q["kappa"][:, None] + shift * q["kappa"].rsqrt()[:, None] + prior.mean.to(c)
        dtype = prior.mean.dtype
        return {"means": means.to(dtype), "precision_factor": factor.to(dtype)}

    @staticmethod
    def point_of_sites(sites: dict, prior: ComponentPrior) -> dict:
        """The mean and the precision's Cholesky factor (the precision drawn in float64)."""
        dtype = prior.mean.dtype
        return {"means": sites["mu"].to(dtype), "precision_factor": _cholesky(sites["precision"]).to(dtype)}

    def log_density(self, x: torch.Tensor, point: dict) -> torch.Tensor:
        return full_gaussian_log_density(x, point["means"], point["precision_factor"])

    def correction(self, q: dict) -> torch.Tensor:
        d = q["weighted"].shape[1]
        dof = q["dof"]
        return 0.5 * (_digamma_sum(dof, d) + d * math.log(2) - d * dof.log()) - d / (2 * q["kappa"])

    def expected_data_term(self, q: dict, stats: dict, prior: ComponentPrior) -> torch.Tensor:
        """sum_n w_nk E_q ln N(x_n | mu_k, Lambda_k^-1) from the statistics, (K,): N_k (E ln|Lambda_k| / 2
        - D/2 ln 2 pi - D / (2 kappa_k)) - nu_k/2 tr(W_k M_k), M_k = sum_n w_nk (x_n - m_k)(x_n - m_k)^T
        = Q_k - S_k m_k^T - m_k S_k^T + N_k m_k m_k^T (rows and m_k centred)."""
        c = self._inverse_scale_factor(q)
        d, count, dof = c.shape[-1], stats["count"], q["dof"]
        m, s = q["weighted"] / q["kappa"][:, None], stats["sum"]
        outer, square = s[:, :, None] * m[:, None, :], m[:, :, None] * m[:, None, :]
        spread = stats["scatter"] - outer - outer.transpose(-2, -1) + count[:, None, None] * square
        trace = (torch.cholesky_inverse(c) * spread).sum((-2, -1))
        e_log_det = _digamma_sum(dof, d) + d * math.log(2) - 2 * c.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return count * (0.5 * e_log_det - 0.5 * d * math.log(2 * math.pi) - d / (2 * q["kappa"])) - 0.5 * dof * trace

    def kl(self, q: dict, prior: ComponentPrior) -> torch.Tensor:
        """KL(NW(m_k, kappa_k, W_k, nu_k) || NW(m0, kappa0, W0, nu0)) per cluster, (K,): the Gaussian's part
        1/2 (D (kappa0 / kappa - 1 - ln(kappa0 / kappa)) + kappa0 nu m^T W m) (m centred) and the
        Wishart's, nu/2 ln|W^-1| - nu0/2 ln|W0^-1| - (nu - nu0) D/2 ln 2 - ln Gamma_D(nu/2)
        + ln Gamma_D(nu0/2) + (nu - nu0)/2 E ln|Lambda| - nu D/2 + nu/2 tr(W0^-1 W)."""
        c = self._inverse_scale_factor(q)
        d, dof, kappa, kappa0, dof0 = c.shape[-1], q["dof"], q["kappa"], prior.mean_precision, prior.dof
        b = _cholesky((prior.dof * prior.covariance).to(c))
        log_det = 2 * c.diagonal(dim1=-2, dim2=-1).log().sum(-1)  # ln |W^-1|
        log_det0 = 2 * b.diagonal().log().sum()
        trace = torch.linalg.solve_triangular(c, b.expand_as(c), upper=False).pow(2).sum((-2, -1))
        centred = torch.linalg.solve_triangular(c, (q["weighted"] / kappa[:, None])[:, :, None], upper=False)
        mahalanobis = dof * centred.pow(2).sum((-2, -1))
        e_log_det = _digamma_sum(dof, d) + d * math.log(2) - log_det
        ratio = kappa0 / kappa
        gaussian = 0.5 * (d * (ratio - 1 - ratio.log()) + kappa0 * mahalanobis)
        wishart = (0.5 * dof * log_det - 0.5 * dof0 * log_det0 - 0.5 * (dof - dof0) * d * math.log(2)
                   - torch.mvlgamma(dof / 2, d) + torch.mvlgamma(torch.tensor(dof0 / 2, dtype=c.dtype), d)
                   + 0.5 * (dof - dof0) * e_log_det - 0.5 * dof * d + 0.5 * dof * trace)
        return gaussian + wishart

    @staticmethod
    def precision(point: dict) -> torch.Tensor:
        """The program's site ``precision`` at the point estimate, nu_k W_k, (K, D, D)."""
        f = point["precision_factor"]
        return f @ f.transpose(-2, -1)

    @staticmethod
    def covariances(point: dict) -> torch.Tensor:
        """(nu_k W_k)^-1, (K, D, D): the covariance at the expected precision (scikit-learn's
        ``covariances_``)."""
        f = point["precision_factor"]
        return torch.linalg.inv(f @ f.transpose(-2, -1))

    def variances(self, point: dict) -> torch.Tensor:
        """The diagonal of ``covariances``, (K, D)."""
        return self.covariances(point).diagonal(dim1=-2, dim2=-1)
