"""Guides for the stick-breaking mixtures whose latent sites are ``v`` (sticks) and ``mu`` (means):
``models.dp_gmm``, ``models.pyp_ggm``, and programs copied from them with another likelihood.

``map_guide``: Delta sites, the MAP estimate of each variational log-posterior ([DPM-SGA] eq. (5):
E[theta] <- argmax ln q(theta)). The sticks' Delta carries the log-Jacobian of the logit
coordinate in which they are optimised, so the objective is the density of u = logit v (see
``inference.stick_mixture.sticks``: its maximiser exists for every alpha and discount).
``mean_field_guide``: q(v_k) = Beta(c1_k, c0_k) and q(mu_k) = N(m_k, diag(s_k^2)), the factorisation of [DPM-SGA]
eq. (3). Both are factories that take initial values (K-means means and sticks) and return a
guide with the model's signature. ``natural_guide``: Beta sticks and the component family's
conjugate factor (``bnpzoo.families``: the means, and the precisions where the family learns a
spread), stored in natural parameters for natural-gradient SVI (``inference.conjugate``).
``select_clusters`` reorders and prunes a fitted guide's clusters.
"""

import pyro
import pyro.distributions as dist
import torch
from torch.distributions import constraints

from bnpzoo.ops import clamp_probs, conjugate_sticks, stick_breaking_log_weights, weights_to_sticks

STICKS = ("q_v_c1", "q_v_c0")  # natural_guide's stick parameters; its factor's are FACTOR + the family's keys
FACTOR = "q_theta_"


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


def natural_guide(family, prior, init_stats: dict, *, alpha, discount=0.0):
    """q(v_k) = Beta(c1_k, c0_k) and the family's factor q(theta_k) (``family.sample_factor``), with
    natural parameters ``q_theta_<key>`` (the prior's plus statistics, ``family.natural``), started
    at the conjugate optimum for ``init_stats`` (the K-means start's statistics). The parameters are
    unconstrained on purpose: natural-gradient SVI moves them by convex combinations, which stay in
    the domain."""
    init = natural_names(family.natural(init_stats, prior), conjugate_sticks(init_stats["count"], alpha, discount))

    def create_params():
        return {name: pyro.param(name, value.clone()) for name, value in init.items()}

    def guide(data=None, *, truncation, subsample_size=None, **hyper):
        params = create_params()
        factor, (c1, c0) = natural_factors(params)
        with pyro.plate("sticks", truncation - 1, dim=-1):
            pyro.sample("v", dist.Beta(c1, c0))
        with pyro.plate("clusters", truncation, dim=-1):
            family.sample_factor(factor, prior)

    # the learner creates the parameters without the guide's draws, which its loss never uses (a
    # Wishart draw at thousands of degrees of freedom can come out singular)
    guide.create_params = create_params
    return guide


def natural_names(factor: dict, sticks: tuple) -> dict:
    """A natural guide's parameters by name, from the family's natural parameters and (c1, c0)."""
    return {**{FACTOR + key: value for key, value in factor.items()}, **dict(zip(STICKS, sticks))}


def natural_factors(params: dict | None = None) -> tuple[dict, tuple]:
    """(the family's natural parameters, (c1, c0)) of a natural guide's ``params`` by name (default:
    the param store's, detached); the inverse of ``natural_names``."""
    if params is None:
        store = pyro.get_param_store()
        params = {name: store[name].detach() for name in store.keys() if name.startswith(FACTOR) or name in STICKS}
    factor = {name[len(FACTOR):]: value for name, value in params.items() if name.startswith(FACTOR)}
    return factor, tuple(params[name] for name in STICKS)


def point_estimates(kind: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(means, sticks, mean scales or None) from the param store after fitting ``kind`` in {"map",
    "mean-field"} (a natural guide's factors: ``natural_factors``)."""
    store = pyro.get_param_store()
    if kind == "map":
        return store["mu_map"].detach(), store["v_map"].detach(), None
    c1, c0 = store["v_conc1"].detach(), store["v_conc0"].detach()
    return store["mu_loc"].detach(), c1 / (c1 + c0), store["mu_scale"].detach()


def select_clusters(kind: str, keep: torch.Tensor, *, alpha, discount=0.0, family=None, prior=None) -> list:
    """Keep clusters ``keep`` (indices, in their new order) of a ``map`` or ``natural`` guide
    ([PYPM-sVMM] V.D). The map guide keeps its learned weights, renormalised; the natural guide
    (of ``family`` under ``prior``) recomputes its sticks' Beta factors from the counts its
    component factors hold, in the new order. Returns (old unconstrained tensor, new one, rows
    kept) per parameter, for the optimizer state.
    """
    store = pyro.get_param_store()
    if kind == "map":
        v, mu = store["v_map"].detach(), store["mu_map"].detach()
        weights = stick_breaking_log_weights(v).exp()[keep]
        new = {"mu_map": mu[keep], "v_map": clamp_probs(weights_to_sticks(weights / weights.sum()))}
    elif kind == "natural":
        factor = {key: value[keep] for key, value in natural_factors()[0].items()}
        new = natural_names(factor, conjugate_sticks(family.counts(factor, prior), alpha, discount))
    else:
        raise ValueError(f"cluster selection is defined for the map and natural guides, not {kind!r}")
    moved = []
    for name, value in new.items():
        old = store[name].unconstrained()
        store[name] = value
        rows = keep if value.shape[0] == keep.numel() else keep[:-1].clamp_max(old.shape[0] - 1)
        moved.append((old, store[name].unconstrained(), rows))
    return moved
