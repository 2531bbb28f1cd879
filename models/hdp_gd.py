"""Hierarchical Dirichlet process mixture of generalized Dirichlet distributions with feature
selection, [HDP-GD] section 2, eq. (2)-(18), truncated at K global atoms and T atoms per group:

    psi'_k   ~ Beta(1, gamma)                 k = 1..K-1, psi'_K = 1       eq. (5)
    pi'_jt   ~ Beta(1, lambda)                t = 1..T-1 per group j       eq. (9)
    W_jt     ~ Categorical(psi)               group atom -> global atom     eq. (3)-(4)
    Z_ji     ~ Categorical(pi_j)              observation -> group atom     eq. (7)-(8)
    eps_l1   ~ Beta(xi1, xi2)                 saliency of feature l        eq. (15) (Dir of 2 parts)
    phi_jil  ~ Bernoulli(eps_l1)              feature l relevant for X_ji  eq. (14)
    alpha_kl ~ Gamma(u, v), beta_kl ~ Gamma(g, h)           component k      eq. (17)
    alpha'_l ~ Gamma(u', v'), beta'_l ~ Gamma(g', h')       background       eq. (18)
    X_jil    ~ Beta(alpha_kl, beta_kl) if phi_jil else Beta(alpha'_l, beta'_l),  k = W_{j Z_ji}   eq. (13), (16)

X is the data after the geometric transform of eq. (11) (``bnpzoo.ops.geometric_transform``): a
proportion vector Y ~ GD(alpha_k, beta_k) has independent Beta coordinates X_l, and the
transform's Jacobian does not depend on the parameters, so the program observes X. One Gamma
prior (shape, rate) serves every Beta parameter, components and background alike ([HDP-GD]
leaves them free; we use one pair).

Sites: ``psi`` (K-1 global sticks), ``pi`` (M x (T-1) group sticks), ``w`` (M x T x K, one-hot),
``saliency`` (D), ``alpha``, ``beta`` (K x D), ``alpha_bg``, ``beta_bg`` (D), then per
observation ``z`` (N x 1) under the plate ``"data"`` (dim -2), and ``phi`` and ``x`` (N x D) under
it and ``"features"``. ``groups`` gives each observation's group 0..M-1. With ``data=None`` the
program generates data for ``groups``.
"""

import pyro
import pyro.distributions as dist
import torch

from bnpzoo.ops import stick_breaking_log_weights


def model(
    data=None,
    groups=None,
    *,
    n_groups: int | None = None,
    truncation: int = 30,
    group_truncation: int = 15,
    gamma: float = 1.0,
    lam: float = 1.0,
    xi=(1.0, 1.0),
    parameter_prior=(1.0, 0.01),
    dim: int | None = None,
    subsample_size: int | None = None,
):
    """The generative program. ``truncation`` is K, ``group_truncation`` T, ``gamma`` and ``lam``
    the global and group concentrations, ``xi`` the saliency prior (xi1, xi2), ``parameter_prior``
    the Gamma (shape, rate) of every Beta parameter, ``subsample_size`` the rows of a minibatch
    (the plate draws them and scales their terms by N / size)."""
    groups = torch.as_tensor(groups)
    n_groups = int(groups.max()) + 1 if n_groups is None else n_groups
    d = data.shape[1] if data is not None else dim
    like = data if data is not None else torch.empty(0)
    one = torch.ones((), dtype=like.dtype, device=like.device)
    shape, rate = (one * p for p in parameter_prior)

    # global sticks psi'_k ~ Beta(1, gamma), eq. (5)
    with pyro.plate("global_sticks", truncation - 1, dim=-1):
        psi = pyro.sample("psi", dist.Beta(one, one * gamma))
    log_psi = stick_breaking_log_weights(psi)

    # group sticks pi'_jt ~ Beta(1, lambda), eq. (9); group atoms W_jt ~ psi, eq. (3)
    with pyro.plate("groups", n_groups, dim=-2):
        with pyro.plate("group_sticks", group_truncation - 1, dim=-1):
            pi = pyro.sample("pi", dist.Beta(one, one * lam))
        with pyro.plate("group_atoms", group_truncation, dim=-1):
            w = pyro.sample("w", dist.OneHotCategorical(logits=log_psi))  # (M, T, K), one-hot
    log_pi = stick_breaking_log_weights(pi)

    # saliencies eps_l1 ~ Beta(xi1, xi2), eq. (15); Beta parameters ~ Gamma, eq. (17)-(18)
    features = pyro.plate("features", d, dim=-1)
    with features:
        saliency = pyro.sample("saliency", dist.Beta(one * xi[0], one * xi[1]))
        alpha_bg = pyro.sample("alpha_bg", dist.Gamma(shape, rate))
        beta_bg = pyro.sample("beta_bg", dist.Gamma(shape, rate))
        with pyro.plate("atoms", truncation, dim=-2):
            alpha = pyro.sample("alpha", dist.Gamma(shape, rate))
            beta = pyro.sample("beta", dist.Gamma(shape, rate))

    # rows on dim -2 and features on dim -1, so that the group atom z_n and every relevance phi_nl
    # can be summed out exactly (TraceEnum_ELBO, the "svi" learner): x_nl depends on phi_nl alone
    with pyro.plate("data", groups.shape[0], subsample_size=subsample_size, dim=-2, device=like.device) as rows:
        g = groups[rows, None]
        z = pyro.sample("z", dist.Categorical(logits=log_pi[g]), infer={"enumerate": "parallel"})
        atom = w[g, z]  # (N, 1, K): the global atom of each row's group atom, one-hot
        with features:
            # feature relevance phi_jil ~ Bernoulli(eps_l1), eq. (14); X_jil, eq. (16)
            phi = pyro.sample("phi", dist.Bernoulli(saliency), infer={"enumerate": "parallel"})
            relevant = phi.bool()
            a = torch.where(relevant, (atom @ alpha).squeeze(-2), alpha_bg)  # (N, D), or more with z summed out
            b = torch.where(relevant, (atom @ beta).squeeze(-2), beta_bg)
            return pyro.sample("x", dist.Beta(a, b), obs=None if data is None else data[rows])
