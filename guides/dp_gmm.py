"""Guides for ``bnpzoo.models.dp_gmm``: latent sites ``v`` (sticks) and ``mu`` (means).

``map_guide``: Delta sites, the MAP estimate of each variational log-posterior (seed 002 eq. (5):
E[theta] <- argmax ln q(theta)). ``mean_field_guide``: q(v_k) = Beta(c1_k, c0_k) and
q(mu_k) = N(m_k, diag(s_k^2)), the factorisation of seed 002 eq. (3). Both are factories that
take initial values (K-means means and sticks) and return a guide with the model's signature.
``natural_guide``: the same mean-field family stored in natural parameters for natural-gradient
SVI (``inference.conjugate``). ``select_clusters`` reorders and prunes a fitted guide's clusters.
"""

import pyro
import pyro.distributions as dist
import torch
from torch.distributions import constraints

from bnpzoo.ops import clamp_probs, stick_breaking_log_weights, tail_sums, weights_to_sticks

# natural_guide's parameters, by the keys of inference.conjugate.natural_estimate
NATURAL = {"precision": "q_mu_precision", "weighted": "q_mu_weighted", "c1": "q_v_c1", "c0": "q_v_c0"}


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


def natural_guide(init_means: torch.Tensor, init_counts: torch.Tensor, *, sigma, alpha, prior_mean, prior_precision):
    """q(mu_k) = N(w_k / tau_k, tau_k^-1 I), q(v_k) = Beta(c1_k, c0_k), started at the conjugate
    optimum for ``init_counts`` samples at ``init_means``. The parameters are unconstrained on
    purpose: natural-gradient SVI moves them by convex combinations, which stay in the domain."""
    var = sigma**2
    precision = (prior_precision + init_counts) / var
    init = {"precision": precision, "weighted": precision[:, None] * init_means,
            "c1": 1 + init_counts[:-1], "c0": alpha + tail_sums(init_counts)[:-1]}

    def guide(data=None, *, truncation, subsample_size=None, **hyper):
        q = {key: pyro.param(name, init[key].clone()) for key, name in NATURAL.items()}
        with pyro.plate("sticks", truncation - 1, dim=-1):
            pyro.sample("v", dist.Beta(q["c1"], q["c0"]))
        with pyro.plate("clusters", truncation, dim=-1):
            loc = q["weighted"] / q["precision"][:, None]
            scale = q["precision"].rsqrt()[:, None].expand_as(loc)
            pyro.sample("mu", dist.Normal(loc, scale).to_event(1))

    return guide


def point_estimates(kind: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(means, sticks, mean scales or None) from the param store after fitting ``kind``
    in {"map", "mean-field", "natural"}."""
    store = pyro.get_param_store()
    if kind == "map":
        return store["mu_map"].detach(), store["v_map"].detach(), None
    if kind == "natural":
        q = {key: store[name].detach() for key, name in NATURAL.items()}
        scale = q["precision"].rsqrt()[:, None].expand_as(q["weighted"])
        return q["weighted"] / q["precision"][:, None], q["c1"] / (q["c1"] + q["c0"]), scale
    c1, c0 = store["v_conc1"].detach(), store["v_conc0"].detach()
    return store["mu_loc"].detach(), c1 / (c1 + c0), store["mu_scale"].detach()


def select_clusters(kind: str, keep: torch.Tensor, *, sigma, alpha, prior_precision) -> list:
    """Keep clusters ``keep`` (indices, in their new order) of a ``map`` or ``natural`` guide
    (seed 004 V.D). The map guide keeps its learned weights, renormalised; the natural guide
    recomputes its sticks' Beta factors from the counts its mean factors hold, in the new order.
    Returns (old unconstrained tensor, new one, rows kept) per parameter, for the optimizer state.
    """
    store = pyro.get_param_store()
    if kind == "map":
        v, mu = store["v_map"].detach(), store["mu_map"].detach()
        weights = stick_breaking_log_weights(v).exp()[keep]
        new = {"mu_map": mu[keep], "v_map": clamp_probs(weights_to_sticks(weights / weights.sum()))}
    elif kind == "natural":
        precision = store[NATURAL["precision"]].detach()[keep]
        counts = (precision * sigma**2 - prior_precision).clamp_min(0)
        new = {NATURAL["precision"]: precision, NATURAL["weighted"]: store[NATURAL["weighted"]].detach()[keep],
               NATURAL["c1"]: 1 + counts[:-1], NATURAL["c0"]: alpha + tail_sums(counts)[:-1]}
    else:
        raise ValueError(f"cluster selection is defined for the map and natural guides, not {kind!r}")
    moved = []
    for name, value in new.items():
        old = store[name].unconstrained()
        store[name] = value
        rows = keep if value.shape[0] == keep.numel() else keep[:-1].clamp_max(old.shape[0] - 1)
        moved.append((old, store[name].unconstrained(), rows))
    return moved
