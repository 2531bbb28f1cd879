"""Guides for the stick-breaking mixtures whose latent sites are ``v`` (sticks) and ``mu`` (means):
``models.dp_gmm``, ``models.pyp_ggm``, and programs copied from them with another likelihood.

``map_guide``: Delta sites, the MAP estimate of each variational log-posterior ([DPM-SGA] eq. (5):
E[theta] <- argmax ln q(theta)). The sticks' Delta carries the log-Jacobian of the logit
coordinate in which they are optimised, so the objective is the density of u = logit v (see
``inference.sticks``: its maximiser exists for every alpha and discount). ``mean_field_guide``:
q(v_k) = Beta(c1_k, c0_k) and q(mu_k) = N(m_k, diag(s_k^2)), the factorisation of [DPM-SGA]
eq. (3). Both are factories that take initial values (K-means means and sticks) and return a
guide with the model's signature. ``natural_guide``: the same mean-field family stored in natural
parameters for natural-gradient SVI of a Gaussian mixture (``inference.conjugate``).
``select_clusters`` reorders and prunes a fitted guide's clusters.
"""

import pyro
import pyro.distributions as dist
import torch
from torch.distributions import constraints

from bnpzoo.ops import clamp_probs, conjugate_sticks, stick_breaking_log_weights, weights_to_sticks

# natural_guide's parameters, by the keys of inference.conjugate.natural_estimate
NATURAL = {"precision": "q_mu_precision", "weighted": "q_mu_weighted", "c1": "q_v_c1", "c0": "q_v_c0"}


def map_guide(init_means: torch.Tensor, init_sticks: torch.Tensor):
    """Point estimates: ``mu_map`` (K x D) and ``v_map`` (K - 1, in (0, 1))."""

    def guide(data=None, *, truncation, subsample_size=None, **hyper):
        mu = pyro.param("mu_map", init_means.clone())
        v = pyro.param("v_map", clamp_probs(init_sticks.clone()), constraint=constraints.unit_interval)
        with pyro.plate("sticks", truncation - 1, dim=-1):
            # ln q = -ln |dv/du|: the bound becomes the density of u = logit v
            pyro.sample("v", dist.Delta(v, log_density=-(v.log() + torch.log1p(-v))))
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


def natural_guide(init_means, init_counts, *, std, alpha, discount=0.0, prior_precision):
    """q(mu_k) = N(w_k / tau_k, diag(std^2) / tau_k), q(v_k) = Beta(c1_k, c0_k), started at the
    conjugate optimum for ``init_counts`` samples at ``init_means``. tau_k = lambda0 + N_k counts
    pseudo-samples and w_k = lambda0 m0 + S_k sums them: the natural parameters of the Gaussian
    factor with the per-feature variance std^2 divided out. The parameters are unconstrained on
    purpose: natural-gradient SVI moves them by convex combinations, which stay in the domain."""
    precision = prior_precision + init_counts
    c1, c0 = conjugate_sticks(init_counts, alpha, discount)
    init = {"precision": precision, "weighted": precision[:, None] * init_means, "c1": c1, "c0": c0}

    def guide(data=None, *, truncation, subsample_size=None, **hyper):
        q = {key: pyro.param(name, init[key].clone()) for key, name in NATURAL.items()}
        with pyro.plate("sticks", truncation - 1, dim=-1):
            pyro.sample("v", dist.Beta(q["c1"], q["c0"]))
        with pyro.plate("clusters", truncation, dim=-1):
            loc = q["weighted"] / q["precision"][:, None]
            pyro.sample("mu", dist.Normal(loc, std * q["precision"].rsqrt()[:, None]).to_event(1))

    return guide


def point_estimates(kind: str, std=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(means, sticks, mean scales or None) from the param store after fitting ``kind``
    in {"map", "mean-field", "natural"} (the natural guide's scales need ``std``)."""
    store = pyro.get_param_store()
    if kind == "map":
        return store["mu_map"].detach(), store["v_map"].detach(), None
    if kind == "natural":
        q = {key: store[name].detach() for key, name in NATURAL.items()}
        scale = std * q["precision"].rsqrt()[:, None].expand_as(q["weighted"])
        return q["weighted"] / q["precision"][:, None], q["c1"] / (q["c1"] + q["c0"]), scale
    c1, c0 = store["v_conc1"].detach(), store["v_conc0"].detach()
    return store["mu_loc"].detach(), c1 / (c1 + c0), store["mu_scale"].detach()


def select_clusters(kind: str, keep: torch.Tensor, *, alpha, discount=0.0, prior_precision) -> list:
    """Keep clusters ``keep`` (indices, in their new order) of a ``map`` or ``natural`` guide
    ([PYPM-sVMM] V.D). The map guide keeps its learned weights, renormalised; the natural guide
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
        c1, c0 = conjugate_sticks((precision - prior_precision).clamp_min(0), alpha, discount)
        new = {NATURAL["precision"]: precision, NATURAL["weighted"]: store[NATURAL["weighted"]].detach()[keep],
               NATURAL["c1"]: c1, NATURAL["c0"]: c0}
    else:
        raise ValueError(f"cluster selection is defined for the map and natural guides, not {kind!r}")
    moved = []
    for name, value in new.items():
        old = store[name].unconstrained()
        store[name] = value
        rows = keep if value.shape[0] == keep.numel() else keep[:-1].clamp_max(old.shape[0] - 1)
        moved.append((old, store[name].unconstrained(), rows))
    return moved
