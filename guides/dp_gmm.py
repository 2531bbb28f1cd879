"""Guides for ``bnpzoo.models.dp_gmm``: latent sites ``v`` (sticks) and ``mu`` (means).

``map_guide``: Delta sites, the MAP estimate of each variational log-posterior (seed 002 eq. (5):
E[theta] <- argmax ln q(theta)). ``mean_field_guide``: q(v_k) = Beta(c1_k, c0_k) and
q(mu_k) = N(m_k, diag(s_k^2)), the factorisation of seed 002 eq. (3). Both are factories that
take initial values (K-means means and sticks) and return a guide with the model's signature.
"""

import pyro
import pyro.distributions as dist
import torch
from torch.distributions import constraints

from bnpzoo.ops import clamp_probs


def map_guide(init_means: torch.Tensor, init_sticks: torch.Tensor):
    """Point estimates: ``mu_map`` (K x D) and ``v_map`` (K - 1, in (0, 1))."""

    def guide(data=None, *, truncation, subsample_size=None, **hyper):
        mu = pyro.param("mu_map", init_means.clone())
        v = pyro.param("v_map", clamp_probs(init_sticks.clone()), constraint=constraints.unit_interval)
        with pyro.plate("sticks", truncation - 1, dim=-1):
            pyro.sample("v", dist.Delta(v))
        with pyro.plate("clusters", truncation, dim=-1):
            pyro.sample("mu", dist.Delta(mu).to_event(1))

    return guide


def mean_field_guide(init_means: torch.Tensor, init_sticks: torch.Tensor, *, init_scale=0.1, concentration=10.0):
    """Beta sticks with mean ``init_sticks`` and ``concentration`` pseudo-counts; Normal means."""

    def guide(data=None, *, truncation, subsample_size=None, **hyper):
        v0 = clamp_probs(init_sticks.clone())
        c1 = pyro.param("v_conc1", v0 * concentration, constraint=constraints.positive)
        c0 = pyro.param("v_conc0", (1 - v0) * concentration, constraint=constraints.positive)
        loc = pyro.param("mu_loc", init_means.clone())
        scale = pyro.param("mu_scale", torch.full_like(init_means, init_scale), constraint=constraints.positive)
        with pyro.plate("sticks", truncation - 1, dim=-1):
            pyro.sample("v", dist.Beta(c1, c0))
        with pyro.plate("clusters", truncation, dim=-1):
            pyro.sample("mu", dist.Normal(loc, scale).to_event(1))

    return guide


def point_estimates(kind: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(means, sticks, mean scales or None) from the param store after fitting ``kind``
    in {"map", "mean-field"}."""
    store = pyro.get_param_store()
    if kind == "map":
        return store["mu_map"].detach(), store["v_map"].detach(), None
    c1, c0 = store["v_conc1"].detach(), store["v_conc0"].detach()
    return store["mu_loc"].detach(), c1 / (c1 + c0), store["mu_scale"].detach()
