"""Dirichlet-process mixture of Gaussians, each cluster with its own covariance, or all with one
fixed diagonal variance (the paper's model).

``covariance="fixed"``: [DPM-SGA] section 2.1, eq. (1)-(2), truncated at K clusters:

    v_k  ~ Beta(1, a0)                    k = 1..K-1, v_K = 1      (stick-breaking)
    pi_k = v_k prod_{l<k} (1 - v_l)                                  (log space)
    mu_k ~ N(m0, sigma^2 / lambda0)       k = 1..K, per feature    ([DPM-SGA] eq. (12) prior term)
    z_n  ~ Categorical(pi)                                          (enumerated)
    x_n  ~ N(mu_{z_n}, diag(sigma^2))

sigma is one number (the paper's spherical components) or one per feature (features in
different units). Sites: ``v`` (K-1 sticks), ``mu`` (K x D means), ``z`` (assignments, marked for
parallel enumeration so SVI with ``TraceEnum_ELBO(max_plate_nesting=1)`` marginalises them),
``x``. Minibatches come from ``pyro.plate(..., subsample_size=...)``, so Pyro scales the
likelihood. With ``data=None`` the program generates ``num_data`` observations.

This is the Pitman-Yor generalized-Gaussian mixture (``models.pyp_ggm``) at d = 0, rho = 2.

The learned covariances (``bnpzoo.families``) replace the fixed sigma with a precision per
cluster, ``precision``, and its conjugate prior; sigma is then the prior's guess of a cluster's
standard deviation (Sigma0 = diag(sigma^2), or ``prior_covariance``), worth nu0 =
``prior_dof`` samples (default D):

    "full"       Lambda_k ~ Wishart(nu0, (nu0 Sigma0)^-1),  mu_k ~ N(m0, (lambda0 Lambda_k)^-1)
    "diag"       tau_kd ~ Gamma(nu0 / 2, nu0 sigma_d^2 / 2), mu_kd ~ N(m0_d, 1 / (lambda0 tau_kd))
    "spherical"  tau_k ~ Gamma(nu0 D / 2, nu0 D s^2 / 2),    mu_kd ~ N(m0_d, 1 / (lambda0 tau_k))
                 (s^2 the mean of the sigma_d^2)
    x_n ~ N(mu_{z_n}, Lambda_{z_n}^-1)
"""

import pyro
import pyro.distributions as dist
import torch

from bnpzoo.models.assigned import AssignedGaussian, AssignedNormal
from bnpzoo.models.stick_breaking import feature_vectors, stick_breaking_prior, stick_weights


def model(
    data=None,
    *,
    truncation: int = 20,
    alpha: float = 1.0,
    covariance: str = "fixed",
    sigma=1.0,
    prior_covariance=None,
    prior_dof: float | None = None,
    prior_mean=0.0,
    prior_precision: float = 1.0,
    subsample_size: int | None = None,
    num_data: int | None = None,
    dim: int | None = None,
):
    """The generative program; hyperparameters are named after [DPM-SGA]'s symbols.

    alpha is a0, prior_mean m0, prior_precision lambda0 (the prior on each mean is
    N(m0, sigma^2 / lambda0)), truncation K; covariance, prior_covariance and prior_dof as in the
    module docstring.
    """
    n, (sigma, m0) = feature_vectors(data, num_data, dim, sigma, prior_mean)
    if covariance != "fixed":
        return learned_covariance(data, n, truncation, alpha, 0.0, covariance, sigma, m0, prior_covariance,
                                  prior_dof, prior_precision, subsample_size)

    # sticks v_k ~ Beta(1, a0) and means mu_k ~ N(m0, sigma^2 / lambda0): the sites v and mu
    log_weights, mu = stick_breaking_prior(truncation, alpha, 0.0, m0, sigma / prior_precision**0.5)

    with pyro.plate("data", n, subsample_size=subsample_size, dim=-1) as idx:
        z = pyro.sample("z", dist.Categorical(logits=log_weights), infer={"enumerate": "parallel"})
        obs = data[idx] if data is not None else None
        return pyro.sample("x", AssignedNormal(mu, sigma, z), obs=obs)


def learned_covariance(data, n, truncation, alpha, discount, covariance, sigma, m0, prior_covariance, prior_dof,
                       prior_precision, subsample_size):
    """The program with a precision per cluster (the module docstring), and Pitman-Yor sticks of
    ``discount`` d (``models.pyp_ggm`` at rho = 2)."""
    d = m0.shape[0]
    cov0 = torch.diag(sigma**2) if prior_covariance is None else torch.as_tensor(prior_covariance).to(m0)
    nu0 = float(d if prior_dof is None else prior_dof)
    log_weights = stick_weights(truncation, alpha, discount, like=m0)  # the site v
    with pyro.plate("clusters", truncation, dim=-1):
        if covariance == "full":
            scale = torch.linalg.inv(nu0 * cov0)  # W0: E[Lambda_k] = nu0 W0 = Sigma0^-1
            lam = pyro.sample("precision", dist.Wishart(torch.tensor(nu0).to(m0), covariance_matrix=scale))
            mu = pyro.sample("mu", dist.MultivariateNormal(m0, precision_matrix=prior_precision * lam))
        else:
            variances = cov0.diagonal()
            if covariance == "spherical":
                tau = pyro.sample("precision", dist.Gamma(nu0 * d / 2, nu0 * d * variances.mean() / 2))
                lam = tau[..., None].expand(tau.shape + (d,))
            else:
                lam = pyro.sample("precision", dist.Gamma(nu0 / 2, nu0 * variances / 2).to_event(1))
            mu = pyro.sample("mu", dist.Normal(m0, (prior_precision * lam).rsqrt()).to_event(1))

    with pyro.plate("data", n, subsample_size=subsample_size, dim=-1) as idx:
        z = pyro.sample("z", dist.Categorical(logits=log_weights), infer={"enumerate": "parallel"})
        obs = data[idx] if data is not None else None
        return pyro.sample("x", AssignedGaussian(mu, lam, z), obs=obs)
