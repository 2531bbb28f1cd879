"""Coupled nonparametric mixtures through latent Dirichlet processes ([Coupled-DP] eq. (6)-(8)),
truncated so that it can generate data.

S latent DPs H_s ~ DP(alpha_s B) are shared by T groups; group t mixes sub-sampled copies of
them, D_t = sum_s c_ts S_{q_ts}(H_s) with c_t ~ Dir(alpha_1 q_t1, ..., alpha_S q_tS), and every
observation of group t is a draw from D_t. The truncation keeps K atoms in one pool, each owned
by one latent DP ([Coupled-DP] section 4 keeps the same indicator s_k, and moves atoms between DPs):

    alpha_s ~ Gamma(0.1, 0.1)                  s = 1..S          (section 5.1; or fixed)
    s_k     ~ Uniform{1..S}                     k = 1..K          owner of atom k
    w_k     ~ Gamma(alpha_{s_k} / L, 1)         L = K / S         H_s = sum_{s_k = s} w_k delta_phi_k / sum
    phi_k   ~ B                                                   the base measure, below
    c_t     ~ Dir(alpha_1 q_t1, ..., alpha_S q_tS)                eq. (7)
    r_tk    ~ Bernoulli(q_{t s_k})                                atom k is inherited by D_t
    z_ti    ~ D_t:  p(z = k) = c_{t s_k} r_tk w_k / (W_{t s_k} Z_t)   eq. (8), the source summed out
    x_ti    ~ f(phi_{z_ti})

with W_ts = sum_{s_k = s} r_tk w_k (the mass of H_s that D_t inherits) and Z_t = sum of c_ts over
the sources with W_ts > 0: a source none of whose atoms group t inherits drops out and the others
renormalise, and a group that inherits no atom at all falls back to inheriting every atom. With
L Gamma(alpha_s / L) weights a source's normalised weights are Dir(alpha_s / L, ...), which tends to
DP(alpha_s B) as L grows (the normalised-gamma construction), and S_q(H_s) is the normalised
restriction of H_s to its inherited atoms, as in eq. (7).

Two component families: ``"categorical"`` words with B = Dirichlet(beta 1_V) (the coupled topic
model of section 5.1: every word of group t is a sample of D_t), and ``"gaussian"`` with the
conjugate Normal-Gamma base per dimension, lambda_kd ~ Gamma(a0, b0), mu_kd ~ N(m0, 1 / (kappa0
lambda_kd)), x ~ N(mu_k, diag(1 / lambda_k)).

The document level (``documents``): every document d of group t has its own topic proportions,
theta_d ~ DP(b, D_t), and its words' labels are draws from theta_d; D_t then plays the part of the
top-level measure of an HDP (Teh et al. 2006), and the latent DPs couple the groups as before. D_t
is discrete on the K atoms, so the DP is exactly theta_d ~ Dir(b D_t(1), ..., b D_t(K)), and as b
grows theta_d -> D_t: the model without documents.

Sites: ``alpha``, ``source``, ``weight``, ``phi`` (categorical) or ``precision`` and ``mean``
(gaussian), ``coeffs``, ``inherit``, (``theta``), ``z``, ``x``. With ``data=None`` it generates one
observation per entry of ``groups``.
"""

import pyro
import pyro.distributions as dist
import torch


def inherited_mass(inherit, weights, source, num_sources):
    """(owner (..., K, S), effective inheritance r~ (..., T, K), W_ts (..., T, S)): the one-hot
    owners, the inheritance after the fall-back (a group that inherits nothing takes every
    atom), and the mass of each latent DP that each group inherits. Leading batch dimensions of
    ``inherit`` and ``source`` (candidate states scored at once) carry through."""
    owner = torch.nn.functional.one_hot(source, num_sources).to(weights.dtype)
    nothing = ~inherit.bool().any(-1, keepdim=True)
    effective = torch.where(nothing, torch.ones_like(inherit), inherit)
    return owner, effective, (effective * weights) @ owner


def mixing_weights(coeffs, inherit, weights, source, num_sources):
    """D_t's weights over the K atoms, (..., T, K): c_{t s_k} r_tk w_k / (W_{t s_k} Z_t), with the
    fall-backs of the module docstring."""
    owner, effective, mass = inherited_mass(inherit, weights, source, num_sources)
    active = coeffs * (mass > 0)
    share = active / active.sum(-1, keepdim=True)  # c_ts / Z_t on the active sources
    to_atoms = owner.transpose(-1, -2)
    mass_of_owner = mass @ to_atoms  # W_{t s_k}, (..., T, K)
    kept = effective * weights
    within = kept / torch.where(mass_of_owner > 0, mass_of_owner, torch.ones_like(mass_of_owner))  # in [0, 1]
    return within * (share @ to_atoms)


def model(
    data=None,
    *,
    groups: torch.Tensor,
    q: torch.Tensor,
    atoms_per_source: int = 20,
    alpha=None,
    alpha_prior=(0.1, 0.1),
    family: str = "categorical",
    vocab_size: int | None = None,
    beta: float = 1.0,
    prior_mean: float = 0.0,
    prior_kappa: float = 1.0,
    prior_shape: float = 1.0,
    prior_rate: float = 1.0,
    dim: int | None = None,
    documents: torch.Tensor | None = None,
    doc_concentration: float | None = 1.0,
    doc_concentration_prior=(1.0, 1.0),
):
    """``groups`` (N,) the group of each observation, ``q`` (T, S) the inheritance probabilities
    q_ts; ``alpha`` None samples alpha_s ~ Gamma(alpha_prior) (section 5.1's Gamma(0.1, 0.1) by
    default), a number or an S-vector fixes it.
    ``data``: (N,) word ids in [0, vocab_size) or (N, dim) reals. ``documents`` (N,): the document
    of each observation (0..D-1, each within one group) adds the document level: theta_d ~
    DP(b D_t) with b = ``doc_concentration`` (None: b ~ Gamma(doc_concentration_prior), shape and
    rate), and z ~ theta_d instead of D_t."""
    opts = dict(dtype=q.dtype, device=q.device)
    if q.ndim != 2 or not bool(((q >= 0) & (q <= 1)).all()) or not bool((q > 0).any(-1).all()):
        raise ValueError("q must be a groups x sources matrix of probabilities with a positive entry in every row")
    num_groups, num_sources = q.shape
    k = num_sources * atoms_per_source
    with pyro.plate("sources", num_sources, dim=-1):
        if alpha is None:
            alpha = pyro.sample("alpha", dist.Gamma(*(torch.tensor(float(v), **opts) for v in alpha_prior)))
        else:
            alpha = torch.as_tensor(alpha, **opts).expand(num_sources)
    with pyro.plate("atoms", k, dim=-1):
        source = pyro.sample("source", dist.Categorical(torch.ones(num_sources, **opts)))
        weights = pyro.sample("weight", dist.Gamma(alpha[source] / atoms_per_source, torch.ones((), **opts)))
        if family == "categorical":
            phi = pyro.sample("phi", dist.Dirichlet(torch.full((vocab_size,), float(beta), **opts)))
        elif family == "gaussian":
            d = data.shape[-1] if data is not None else dim
            shape, rate = torch.tensor(prior_shape, **opts), torch.tensor(prior_rate, **opts)
            precision = pyro.sample("precision", dist.Gamma(shape, rate).expand([d]).to_event(1))
            mean = pyro.sample("mean", dist.Normal(torch.tensor(prior_mean, **opts),
                                                   (prior_kappa * precision).rsqrt()).to_event(1))
        else:
            raise ValueError(f"family must be 'categorical' or 'gaussian', got {family!r}")
    with pyro.plate("groups", num_groups, dim=-2):
        # q_ts = 0 (SNGP's unconnected sources) would be a zero concentration; such a source is
        # never inherited, so it drops out of D_t and a tiny concentration changes nothing observable
        concentration = (alpha * q).clamp_min(torch.finfo(q.dtype).tiny)
        coeffs = pyro.sample("coeffs", dist.Dirichlet(concentration.unsqueeze(-2)))  # (T, 1, S)
        with pyro.plate("atoms_inherited", k, dim=-1):
            inherit = pyro.sample("inherit", dist.Bernoulli(q[:, source]))  # (T, K)
    probs = mixing_weights(coeffs.squeeze(-2), inherit, weights, source, num_sources)
    if documents is not None:  # theta_d ~ DP(b, D_t) = Dir(b D_t) over the K atoms: D_t is discrete
        doc_group = torch.zeros(int(documents.max()) + 1, dtype=groups.dtype, device=groups.device)
        doc_group[documents] = groups
        if doc_concentration is None:
            doc_concentration = pyro.sample("doc_concentration", dist.Gamma(
                *(torch.tensor(float(v), **opts) for v in doc_concentration_prior)))
        with pyro.plate("documents", doc_group.shape[0], dim=-1):
            theta = pyro.sample("theta", dist.Dirichlet((doc_concentration * probs[doc_group]).clamp_min(
                torch.finfo(q.dtype).tiny)))  # unreachable atoms (D_t(k) = 0): a vanishing concentration
        probs, groups = theta, documents
    with pyro.plate("data", groups.shape[0], dim=-1):
        z = pyro.sample("z", dist.Categorical(probs[groups]))
        if family == "categorical":
            return pyro.sample("x", dist.Categorical(phi[z]), obs=data)
        return pyro.sample("x", dist.Normal(mean[z], precision[z].rsqrt()).to_event(1), obs=data)
