"""Dirichlet-process mixture of Gaussians with a shared, fixed diagonal variance.

[DPM-SGA] section 2.1, eq. (1)-(2), truncated at K clusters:

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
"""

import pyro
import pyro.distributions as dist

from bnpzoo.models.assigned import AssignedNormal
from bnpzoo.models.stick_breaking import feature_vectors, stick_breaking_prior


def model(
    data=None,
    *,
    truncation: int = 20,
    alpha: float = 1.0,
    sigma=1.0,
    prior_mean=0.0,
    prior_precision: float = 1.0,
    subsample_size: int | None = None,
    num_data: int | None = None,
    dim: int | None = None,
):
    """The generative program; hyperparameters are named after [DPM-SGA]'s symbols.

    alpha is a0, prior_mean m0, prior_precision lambda0 (the prior on each mean is
    N(m0, sigma^2 / lambda0)), truncation K.
    """
    n, (sigma, m0) = feature_vectors(data, num_data, dim, sigma, prior_mean)

    # sticks v_k ~ Beta(1, a0) and means mu_k ~ N(m0, sigma^2 / lambda0): the sites v and mu
    log_weights, mu = stick_breaking_prior(truncation, alpha, 0.0, m0, sigma / prior_precision**0.5)

    with pyro.plate("data", n, subsample_size=subsample_size, dim=-1) as idx:
        z = pyro.sample("z", dist.Categorical(logits=log_weights), infer={"enumerate": "parallel"})
        obs = data[idx] if data is not None else None
        return pyro.sample("x", AssignedNormal(mu, sigma, z), obs=obs)
