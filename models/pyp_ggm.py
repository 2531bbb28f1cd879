"""Pitman-Yor process mixture of generalized Gaussians (PYPM), [PYPM-sVMM] section II.A, eq. (1)-(3),
truncated at K clusters:

    v_k  ~ Beta(1 - d, alpha0 + k d)      k = 1..K-1, v_K = 1      eq. (1); d = 0 is the DP
    pi_k = v_k prod_{l<k} (1 - v_l)                                  (log space)
    B_k  ~ N(m0, sd^2 / lambda0)          k = 1..K, per feature    eq. (3)
    z_n  ~ Categorical(pi)                                          (enumerated)
    x_nd ~ GGD(B_{z_n d}, s_d, rho)                                  eq. (2)-(3)

GGD(x | B, s, rho) is proportional to exp(-|(x - B) / s|^rho) (``bnpzoo.distributions``): rho = 2
is the Gaussian, rho = 1 the Laplace distribution. As in the paper, s and rho are fixed for a fit
and only the means B are learned; their posterior is not conjugate unless rho = 2.

Departure: the program takes each feature's standard deviation ``scale`` = sd_d, not s, so that
a scale means the same for every rho (s_d = sd_d sqrt(Gamma(1/rho) / Gamma(3/rho)); the paper's
Gaussian and Laplacian "s = sqrt 2" are sd = 1 and sd = 2), and the prior on B_k has variance
sd^2 / lambda0 instead of 1 / lambda0, which makes the fit independent of the data's units.

At rho = 2 a cluster may learn its spread too: ``covariance`` "full", "diag" or "spherical" is
``models.dp_gmm``'s program with these sticks (a precision per cluster, site ``precision``, and
its conjugate prior; ``scale`` the prior's guess). At 1 <= rho < 2, ``covariance="diag"`` learns a
scale per cluster and feature (``families.learned_scale``, a departure from the paper's fixed s):

    tau_kd ~ Gamma(nu0 / rho, nu0 s0_d^rho / rho)      site ``precision``; s_kd = tau_kd^(-1/rho)
    x_nd ~ GGD(B_{z_n d}, s_{z_n d}, rho)

s0 the GGD shape of the prior's guess of a cluster's standard deviation (``prior_covariance``'s
diagonal, else ``scale``), worth nu0 = ``prior_dof`` rows (default D).

Sites: ``v`` (K-1 sticks), ``mu`` (the K x D means B), ``z`` (enumerated), ``x``; the data plate
is named ``"data"`` and subsamples through ``subsample_size``. With ``data=None`` the program
generates ``num_data`` observations of dimension ``dim``.
"""

import pyro
import pyro.distributions as dist
import torch

from bnpzoo.models.assigned import AssignedGeneralizedGaussian
from bnpzoo.models.dp_gmm import learned_covariance
from bnpzoo.models.stick_breaking import feature_vectors, stick_breaking_prior, stick_weights
from bnpzoo.ops import generalized_gaussian_shape, generalized_gaussian_std


def model(
    data=None,
    *,
    truncation: int = 20,
    alpha: float = 1.0,
    discount: float = 0.0,
    scale=1.0,
    rho: float = 2.0,
    covariance: str = "fixed",
    prior_covariance=None,
    prior_dof: float | None = None,
    prior_mean=0.0,
    prior_precision: float = 1.0,
    subsample_size: int | None = None,
    num_data: int | None = None,
    dim: int | None = None,
):
    """The generative program. alpha is alpha0, discount d, scale each feature's standard
    deviation within a cluster, rho the GGD shape, prior_mean m0, prior_precision lambda0;
    covariance, prior_covariance and prior_dof as ``models.dp_gmm``'s, at rho = 2."""
    n, (sd, m0) = feature_vectors(data, num_data, dim, scale, prior_mean)
    if covariance == "diag" and rho != 2.0:
        return learned_scale(data, n, truncation, alpha, discount, rho, sd, m0, prior_covariance, prior_dof,
                             prior_precision, subsample_size)
    if covariance != "fixed":
        if rho != 2.0:
            raise ValueError(f"a learned covariance needs rho = 2 (the Gaussian), got rho={rho}")
        return learned_covariance(data, n, truncation, alpha, discount, covariance, sd, m0, prior_covariance,
                                  prior_dof, prior_precision, subsample_size)

    # sticks v_k ~ Beta(1 - d, alpha0 + k d), eq. (1), and means B_k ~ N(m0, sd^2 / lambda0): sites v, mu
    log_weights, mu = stick_breaking_prior(truncation, alpha, discount, m0, sd / prior_precision**0.5)

    with pyro.plate("data", n, subsample_size=subsample_size, dim=-1) as idx:
        z = pyro.sample("z", dist.Categorical(logits=log_weights), infer={"enumerate": "parallel"})
        obs = data[idx] if data is not None else None
        return pyro.sample("x", AssignedGeneralizedGaussian(mu, sd, rho, z), obs=obs)


def learned_scale(data, n, truncation, alpha, discount, rho, sd, m0, prior_covariance, prior_dof, prior_precision,
                  subsample_size):
    """The program with a scale per cluster and feature (the module docstring)."""
    sd0 = sd if prior_covariance is None else torch.as_tensor(prior_covariance).to(m0).diagonal().sqrt()
    shape0 = float(m0.shape[0] if prior_dof is None else prior_dof) / rho
    rate0 = shape0 * generalized_gaussian_shape(sd0, rho) ** rho
    log_weights = stick_weights(truncation, alpha, discount, like=m0)  # the site v
    with pyro.plate("clusters", truncation, dim=-1):
        mu = pyro.sample("mu", dist.Normal(m0, sd0 / prior_precision**0.5).to_event(1))
        tau = pyro.sample("precision", dist.Gamma(torch.full_like(rate0, shape0), rate0).to_event(1))
    std = generalized_gaussian_std(tau, rho)

    with pyro.plate("data", n, subsample_size=subsample_size, dim=-1) as idx:
        z = pyro.sample("z", dist.Categorical(logits=log_weights), infer={"enumerate": "parallel"})
        obs = data[idx] if data is not None else None
        return pyro.sample("x", AssignedGeneralizedGaussian(mu, std, rho, z), obs=obs)
