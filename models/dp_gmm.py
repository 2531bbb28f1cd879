"""Dirichlet-process mixture of spherical Gaussians with a shared, fixed variance.

Seed 002 section 2.1, eq. (1)-(2), truncated at K clusters:

    v_k  ~ Beta(1, a0)                    k = 1..K-1, v_K = 1      (stick-breaking)
    pi_k = v_k prod_{l<k} (1 - v_l)                                  (log space)
    mu_k ~ N(m0, sigma^2 / lambda0 I)     k = 1..K                  (seed 002 eq. (12) prior term)
    z_n  ~ Categorical(pi)                                          (enumerated)
    x_n  ~ N(mu_{z_n}, sigma^2 I)

Sites: ``v`` (K-1 sticks), ``mu`` (K x D means), ``z`` (assignments, marked for parallel
enumeration so SVI with ``TraceEnum_ELBO(max_plate_nesting=1)`` marginalises them), ``x``.
Minibatches come from ``pyro.plate(..., subsample_size=...)``, so Pyro scales the likelihood.
With ``data=None`` the program generates ``num_data`` observations.
"""

import pyro
import pyro.distributions as dist
import torch

from bnpzoo.models.assigned import AssignedSphericalNormal
from bnpzoo.ops import stick_breaking_log_weights


def model(
    data=None,
    *,
    truncation: int = 20,
    alpha: float = 1.0,
    sigma: float = 1.0,
    prior_mean=0.0,
    prior_precision: float = 20.0,
    subsample_size: int | None = None,
    num_data: int | None = None,
    dim: int | None = None,
):
    """The generative program; hyperparameters are named after seed 002's symbols.

    alpha is a0, prior_mean m0, prior_precision lambda0 (the prior on each mean is
    N(m0, sigma^2 / lambda0)), truncation K.
    """
    ref = data if data is not None else torch.as_tensor(prior_mean, dtype=torch.get_default_dtype())
    n = data.shape[0] if data is not None else num_data
    d = data.shape[1] if data is not None else dim
    opts = dict(dtype=ref.dtype, device=ref.device)
    sigma = torch.as_tensor(sigma, **opts)
    m0 = torch.as_tensor(prior_mean, **opts).expand(d)

    with pyro.plate("sticks", truncation - 1, dim=-1):
        v = pyro.sample("v", dist.Beta(torch.ones((), **opts), torch.as_tensor(alpha, **opts)))
    with pyro.plate("clusters", truncation, dim=-1):
        mu = pyro.sample("mu", dist.Normal(m0, sigma / prior_precision**0.5).to_event(1))
    log_weights = stick_breaking_log_weights(v)

    with pyro.plate("data", n, subsample_size=subsample_size, dim=-1) as idx:
        z = pyro.sample("z", dist.Categorical(logits=log_weights), infer={"enumerate": "parallel"})
        obs = data[idx] if data is not None else None
        return pyro.sample("x", AssignedSphericalNormal(mu, sigma, z), obs=obs)
