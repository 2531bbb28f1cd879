"""Batch and online mean-field VI for the HDP mixture of generalized Dirichlet distributions with
feature selection ([HDP-GD] Algorithms 1 and 2). [HDP-GD] omits its appendix (eq. (33)-(88));
what follows is our derivation, with its equation numbers where it has them.

Notation. Observation n of group j = g(n), its transformed coordinates x_nl (eq. (11)), and
lx = ln x, l1x = ln(1 - x). The factors of eq. (22)-(26):

    q(Z_n = t) = rho_nt        q(W_jt = k) = theta_jtk        q(phi_nl = 1) = f_nl
    q(pi'_jt) = Beta(a_jt, b_jt)    q(psi'_k) = Beta(c_k, d_k)    q(eps_l) = Dir(xi*_l1, xi*_l2)
    q(alpha_kl) = Gamma(u~, v~)     q(beta_kl) = Gamma(g~, h~)    (and u~', v~', g~', h~' for the background)

Expectations: E ln pi_jt = E ln pi'_jt + sum_{s<t} E ln(1 - pi'_js) with E ln pi' = psi(a) - psi(a + b)
(likewise E ln psi_k); E ln eps_l1 = psi(xi*_l1) - psi(xi*_l1 + xi*_l2); a0 = u~ / v~, b0 = g~ / h~;
R~ the approximation of E[ln Gamma(a + b) - ln Gamma(a) - ln Gamma(b)] (``inference.hdp_gd.beta_normaliser``).
A component's expected log density of feature l, and the background's:

    A_nkl = R~_kl + (a0_kl - 1) lx_nl + (b0_kl - 1) l1x_nl        B_nl = R~'_l + (a0'_l - 1) lx_nl + (b0'_l - 1) l1x_nl

and an observation's expected log likelihood under atom k, weighting each feature by its relevance,
L_nk = sum_l f_nl A_nkl = [f R~^T + (f lx)(a0 - 1)^T + (f l1x)(b0 - 1)^T]_nk: three matrix
products, never N x K x D.

The bound (eq. (19)), with r_nk = sum_t rho_nt theta_{g(n) t k} (Z and W are independent under q):

    L = sum_nk r_nk L_nk + sum_nl (1 - f_nl) B_nl
      + sum_nl [f_nl E ln eps_l1 + (1 - f_nl) E ln eps_l2] + H[q(phi)]
      + sum_nt rho_nt E ln pi_{g(n) t} + H[q(Z)] + sum_jtk theta_jtk E ln psi_k + H[q(W)]
      - KL(q(pi') | p) - KL(q(psi') | p) - KL(q(eps) | p) - KL(q(alpha), q(beta), q(alpha'), q(beta') | p)

Coordinate updates, each the exact maximiser of L in its factor (the Gamma factors excepted):

    ln rho_nt   = E ln pi_jt + sum_k theta_jtk L_nk + const                     (eq. (59))
    ln theta_jtk = E ln psi_k + sum_{n in j} rho_nt L_nk + const                  (eq. (62), batch)
    logit f_nl  = E ln eps_l1 - E ln eps_l2 + sum_k r_nk A_nkl - B_nl          (eq. (29)-(31))
    a_jt = 1 + sum_{n in j} rho_nt,          b_jt = lambda + sum_{n in j} sum_{s>t} rho_ns
    c_k  = 1 + sum_jt theta_jtk,             d_k  = gamma + sum_jt sum_{s>k} theta_jts
    xi*_l1 = xi1 + sum_n f_nl,               xi*_l2 = xi2 + sum_n (1 - f_nl)
    u~, v~, g~, h~ from ``inference.hdp_gd.beta_normaliser`` with weights w_n = r_nk f_nl (components) and
    1 - f_nl (background): the sufficient statistics r^T f, r^T (f lx), r^T (f l1x): K x D products.

The Gamma update is a fixed point, not a maximiser: batch VI keeps it only when the part of the
bound that depends on the Gamma factors (computable from those K x D statistics alone) does not
fall, and otherwise halves the step in the natural parameters, so that every iteration raises the
bound. Online VI (Algorithm 2) takes, for minibatch r, the same optimum computed from the
minibatch with statistics scaled up to the data (N_j / |B_j| for group j's factors, N / |B| for
the global ones) and moves every factor's natural parameters a step zeta_r = (eta0 + r)^(-kappa)
towards it (eq. (32): sum zeta = inf, sum zeta^2 < inf for 0.5 < kappa <= 1), the natural-gradient
step of Hoffman et al. (2013) that [HDP-GD] follows through its ref. [19]; q(W) moves in log space.

Merge moves (not in [HDP-GD]; after Hughes & Sudderth 2013, and for online VI Bryant & Sudderth
2012). Coordinate ascent keeps an atom that the K-means start split in two: each half explains
its rows almost as well as the whole would. A merge of atom j into k moves q(W)'s mass
theta_{..j} to k and adds j's Gamma factors' data parts to k's (their targets are sums over rows:
shape - prior shape and rate - prior rate add), j's returning to the prior; it is kept only when
the bound, with the rows' local factors refitted once, rises. Candidates: the pairs whose rows
lose least expected log likelihood when scored by the other atom, (r^T L)_jj - (r^T L)_jk. Batch
VI tries them whenever the bound has converged and goes on while one is kept (each kept merge
raises the bound, so the trace never falls); online VI judges them on a minibatch, its rows' terms
scaled by N / |B|.

The start (Algorithm 1, step 3): K-means on logit x (where Beta coordinates are closest to
Gaussian; on digits proportions NMI 0.58 against 0.41 from K-means on x, the bound higher too, and
equal on data drawn from the model) gives hard clusters, sorted by size; their moments
give the Beta parameters (the method of moments, a0 = m s, b0 = (1 - m) s, s = m (1 - m) / var - 1)
and each group's T atoms point at its T most frequent clusters.
"""

import math
from dataclasses import dataclass, fields

import torch
from torch.distributions import Beta, Dirichlet, Gamma, kl_divergence

from bnpzoo.inference.hdp_gd.beta_normaliser import expected_log_normaliser, shape_slopes
from bnpzoo.inference.conjugate import expected_log_weights
from bnpzoo.inference.kmeans import kmeans
from bnpzoo.ops import conjugate_sticks, softmax_, squared_distances

GUARD_HALVINGS = 8  # step halvings tried before a Gamma update is refused
KMEANS_ROWS_PER_ATOM = 100  # the start's K-means sees at most this many rows per global atom


@dataclass
class Prior:
    gamma: float  # global concentration, eq. (5)
    lam: float  # group concentration, eq. (9)
    xi: tuple  # saliency Dirichlet (xi1, xi2), eq. (15)
    shape: float  # Gamma (shape, rate) of every Beta parameter, eq. (17)-(18)
    rate: float


@dataclass
class Globals:
    """The factors that outlive an observation; pairs (shape, rate) or (a, b) in the last dim."""

    theta: torch.Tensor  # (M, T, K) q(W)
    group_sticks: torch.Tensor  # (M, T - 1, 2) q(pi')
    global_sticks: torch.Tensor  # (K - 1, 2) q(psi')
    saliency: torch.Tensor  # (D, 2) q(eps)
    alpha: torch.Tensor  # (K, D, 2) q(alpha)
    beta: torch.Tensor  # (K, D, 2) q(beta)
    alpha_bg: torch.Tensor  # (D, 2) q(alpha')
    beta_bg: torch.Tensor  # (D, 2) q(beta')

    def replace(self, **changes) -> "Globals":
        return Globals(**{f.name: changes.get(f.name, getattr(self, f.name)) for f in fields(self)})


@dataclass
class Observations:
    """x sorted by group, with ln x, ln(1 - x), the rows per group and each group's rows as a slice."""

    x: torch.Tensor
    lx: torch.Tensor
    l1x: torch.Tensor
    groups: torch.Tensor
    sizes: torch.Tensor  # (M,) rows per group, in x's dtype
    slices: list  # (group, slice) for every group that has rows

    @classmethod
    def of(cls, x: torch.Tensor, groups: torch.Tensor, n_groups: int) -> "Observations":
        """``x`` and ``groups`` must already be sorted by group."""
        counts = torch.bincount(groups, minlength=n_groups)
        ends = [0, *counts.cumsum(0).tolist()]  # one host sync: the loops over groups need the slices
        slices = [(j, slice(ends[j], ends[j + 1])) for j in range(n_groups) if ends[j + 1] > ends[j]]
        return cls(x, x.log(), torch.log1p(-x), groups, counts.to(x.dtype), slices)

    def rows(self, index) -> "Observations":
        """A subset of rows (kept in group order when ``index`` is sorted)."""
        return Observations.of(self.x[index], self.groups[index], self.sizes.shape[0])


# -- expectations ------------------------------------------------------------------------------
def _pair(t):
    return t[..., 0], t[..., 1]


def tables(g: Globals) -> dict:
    """R~, a0 - 1, b0 - 1 of the components (K x D) and of the background (D)."""
    out = {}
    for name, a, b in (("", g.alpha, g.beta), ("_bg", g.alpha_bg, g.beta_bg)):
        (ua, va), (ub, vb) = _pair(a), _pair(b)
        out["R" + name] = expected_log_normaliser(ua, va, ub, vb)
        out["a" + name], out["b" + name] = ua / va - 1, ub / vb - 1
    return out


def saliency_mean(g: Globals) -> torch.Tensor:
    """E[eps_l1] per feature."""
    return g.saliency[:, 0] / g.saliency.sum(-1)


def saliency_factor(f: torch.Tensor, prior: Prior, scale: float = 1.0) -> torch.Tensor:
    """q(eps)'s optimum given the relevances f: (xi1 + sum_n f_nl, xi2 + sum_n (1 - f_nl)), sums times scale."""
    return saliency_of_sums(scale * f.sum(0), scale * (1 - f).sum(0), prior)


def saliency_of_sums(relevant: torch.Tensor, irrelevant: torch.Tensor, prior: Prior) -> torch.Tensor:
    """q(eps)'s optimum from the relevances' sums sum_n f_nl and sum_n (1 - f_nl)."""
    return torch.stack([prior.xi[0] + relevant, prior.xi[1] + irrelevant], -1)


def expected_log_saliency(g: Globals) -> tuple[torch.Tensor, torch.Tensor]:
    xi = g.saliency
    total = torch.digamma(xi.sum(-1))
    return torch.digamma(xi[:, 0]) - total, torch.digamma(xi[:, 1]) - total


def component_log_lik(obs: Observations, f: torch.Tensor, tab: dict) -> torch.Tensor:
    """L_nk = sum_l f_nl A_nkl, (N, K): three matrix products."""
    return f @ tab["R"].T + (f * obs.lx) @ tab["a"].T + (f * obs.l1x) @ tab["b"].T


def background_log_lik(obs: Observations, tab: dict) -> torch.Tensor:
    """B_nl, (N, D)."""
    return tab["R_bg"] + tab["a_bg"] * obs.lx + tab["b_bg"] * obs.l1x


def _log(p):
    return p.clamp_min(torch.finfo(p.dtype).tiny).log()


# -- local step ----------------------------------------------------------------------------------
def assign(obs: Observations, lik: torch.Tensor, log_theta: torch.Tensor, log_pi: torch.Tensor):
    """q(Z) for every row (eq. (59)) and r = rho theta, each group with its own atoms.
    ``log_theta`` (M, T, K) and ``log_pi`` (M, T) are indexed by group. Returns (rho, r)."""
    rho = torch.empty(lik.shape[0], log_theta.shape[1], dtype=lik.dtype, device=lik.device)
    r = torch.empty_like(lik)
    for j, rows in obs.slices:
        theta = log_theta[j].exp()
        rho[rows] = lik[rows] @ theta.T + log_pi[j]
        softmax_(rho[rows])
        r[rows] = rho[rows] @ theta
    return rho, r


def relevance(obs: Observations, r: torch.Tensor, tab: dict, log_eps) -> torch.Tensor:
    """q(phi_nl = 1), eq. (29)-(31): a sigmoid of the log-odds of component against background."""
    odds = (r @ tab["R"] + obs.lx * (r @ tab["a"]) + obs.l1x * (r @ tab["b"])
            - background_log_lik(obs, tab) + (log_eps[0] - log_eps[1]))
    return torch.sigmoid(odds)


def group_atoms(obs: Observations, rho: torch.Tensor, lik: torch.Tensor, n_groups: int, scale=None) -> torch.Tensor:
    """sum_{n in j} rho_nt L_nk for every group, (M, T, K), each group's sum times scale[j] if given."""
    out = lik.new_zeros(n_groups, rho.shape[1], lik.shape[1])
    for j, rows in obs.slices:
        out[j] = rho[rows].T @ lik[rows] * (1 if scale is None else scale[j])
    return out


def group_counts(obs: Observations, rho: torch.Tensor, n_groups: int, scale=None) -> torch.Tensor:
    """sum_{n in j} rho_nt, (M, T), times scale[j] if given."""
    out = rho.new_zeros(n_groups, rho.shape[1]).index_add_(0, obs.groups, rho)
    return out if scale is None else out * scale[:, None]


def local_step(obs: Observations, g: Globals, tab: dict, *, iters: int, f=None):
    """q(Z) and q(phi) for ``obs`` given the global factors: ``iters`` rounds of rho, r, f.
    Returns (rho, r, f, lik) with lik computed from the f that rho and r saw."""
    log_eps = expected_log_saliency(g)
    if f is None:
        f = saliency_mean(g).expand_as(obs.x).clone()
    log_theta, log_pi = _log(g.theta), expected_log_weights(*_pair(g.group_sticks))
    for _ in range(iters):
        lik = component_log_lik(obs, f, tab)
        rho, r = assign(obs, lik, log_theta, log_pi)
        f = relevance(obs, r, tab, log_eps)
    return rho, r, f, lik


# -- global updates ------------------------------------------------------------------------------
def stick_factors(counts: torch.Tensor, concentration: float) -> torch.Tensor:
    """(a, b) of Beta(1, concentration) sticks given the counts in the last dim."""
    return torch.stack(conjugate_sticks(counts, concentration), -1)


def gamma_statistics(obs: Observations, r: torch.Tensor, f: torch.Tensor, scale: float = 1.0) -> dict:
    """The weights' sums the Gamma factors need: components (K x D) and background (D)."""
    bg = 1 - f
    return {"w": scale * (r.T @ f), "lx": scale * (r.T @ (f * obs.lx)), "l1x": scale * (r.T @ (f * obs.l1x)),
            "w_bg": scale * bg.sum(0), "lx_bg": scale * (bg * obs.lx).sum(0), "l1x_bg": scale * (bg * obs.l1x).sum(0)}


def gamma_targets(g: Globals, stats: dict, prior: Prior) -> dict:
    """The Gamma factors' fixed-point update (``inference.hdp_gd.beta_normaliser``) from the statistics."""
    out = {}
    for name, a, b in (("", g.alpha, g.beta), ("_bg", g.alpha_bg, g.beta_bg)):
        slope_a, slope_b = shape_slopes(*_pair(a), *_pair(b))
        w = stats["w" + name]
        shape_a = (prior.shape + w * slope_a).clamp_min(1e-3)
        shape_b = (prior.shape + w * slope_b).clamp_min(1e-3)
        out["alpha" + name] = torch.stack([shape_a, prior.rate - stats["lx" + name]], -1)
        out["beta" + name] = torch.stack([shape_b, prior.rate - stats["l1x" + name]], -1)
    return out


def _gamma_kl(factor: torch.Tensor, prior: Prior) -> torch.Tensor:
    shape, rate = _pair(factor)
    p = Gamma(torch.full_like(shape, prior.shape), torch.full_like(rate, prior.rate))
    return kl_divergence(Gamma(shape, rate), p).sum()


def gamma_objective(g: Globals, stats: dict, prior: Prior) -> torch.Tensor:
    """The terms of the bound that depend on the Gamma factors, from the statistics alone."""
    tab = tables(g)
    total = 0
    for name in ("", "_bg"):
        total = total + (stats["w" + name] * tab["R" + name] + stats["lx" + name] * tab["a" + name]
                         + stats["l1x" + name] * tab["b" + name]).sum()
    return total - sum(_gamma_kl(getattr(g, name), prior) for name in ("alpha", "beta", "alpha_bg", "beta_bg"))


def guarded_gamma_update(g: Globals, stats: dict, prior: Prior) -> Globals:
    """The Gamma update, halved in its natural parameters until the bound does not fall."""
    before = gamma_objective(g, stats, prior)
    target = gamma_targets(g, stats, prior)
    step = 1.0
    for _ in range(GUARD_HALVINGS):
        moved = g.replace(**{name: (1 - step) * getattr(g, name) + step * value for name, value in target.items()})
        if gamma_objective(moved, stats, prior) >= before:
            return moved
        step /= 2
    return g


# -- the bound -----------------------------------------------------------------------------------
def _entropy(p: torch.Tensor) -> torch.Tensor:
    return -torch.special.xlogy(p, p).sum()


def local_bound(obs: Observations, g: Globals, rho, r, f, lik, tab) -> torch.Tensor:
    """The rows' terms of the bound (module docstring) with their local factors; ``lik`` is L from ``f``."""
    log_eps = expected_log_saliency(g)
    log_pi = expected_log_weights(*_pair(g.group_sticks))
    data = (r * lik).sum() + ((1 - f) * background_log_lik(obs, tab)).sum()
    relevance_terms = (f * log_eps[0] + (1 - f) * log_eps[1]).sum() + _entropy(f) + _entropy(1 - f)
    return data + relevance_terms + (rho * log_pi[obs.groups]).sum() + _entropy(rho)


def global_bound(g: Globals, prior: Prior) -> torch.Tensor:
    """The bound's terms of the global factors: q(W) against psi, and minus the KL divergences."""
    w_terms = (g.theta * expected_log_weights(*_pair(g.global_sticks))).sum() + _entropy(g.theta)
    one, ones = torch.ones_like(g.group_sticks[..., 0]), torch.ones_like(g.global_sticks[:, 0])
    kl = (kl_divergence(Beta(*_pair(g.group_sticks)), Beta(one, one * prior.lam)).sum()
          + kl_divergence(Beta(*_pair(g.global_sticks)), Beta(ones, ones * prior.gamma)).sum()
          + kl_divergence(Dirichlet(g.saliency), Dirichlet(g.saliency.new_tensor(prior.xi).expand_as(g.saliency))).sum()
          + sum(_gamma_kl(getattr(g, name), prior) for name in ("alpha", "beta", "alpha_bg", "beta_bg")))
    return w_terms - kl


# -- merge moves ---------------------------------------------------------------------------------
def merge_candidates(r: torch.Tensor, lik: torch.Tensor, count: int) -> list:
    """Pairs (keep, drop) of atoms in use, the ``count`` whose rows lose least expected log likelihood
    when the smaller atom's rows move to the larger: (r^T L)_jj - (r^T L)_jk per row of j."""
    mass = r.sum(0)
    cross = (r.T @ lik) / mass.clamp_min(1e-12)[:, None]
    loss = cross.diagonal()[:, None] - cross  # loss[j, k]: atom j's rows scored by k instead
    used = mass > 0.5
    allowed = used[:, None] & used[None, :] & (mass[:, None] <= mass[None, :])
    allowed.fill_diagonal_(False)
    loss = torch.where(allowed, loss, torch.full_like(loss, math.inf)).flatten()
    best = loss.argsort()[:count]
    k = r.shape[1]
    return [(i % k, i // k) for i in best[torch.isfinite(loss[best])].tolist()]


def merged(g: Globals, prior: Prior, keep: int, drop: int) -> Globals:
    """Atom ``drop`` merged into ``keep``: q(W) moves its mass to keep; the Gamma factors add their
    natural parameters' data parts (shape - prior shape, rate - prior rate: the targets are sums over
    rows, ``gamma_targets``), and drop's return to the prior; the global sticks follow q(W)."""
    theta = g.theta.clone()
    theta[..., keep] += theta[..., drop]
    theta[..., drop] = 0
    base = g.alpha.new_tensor([prior.shape, prior.rate])
    changes = {}
    for name in ("alpha", "beta"):
        factor = getattr(g, name).clone()
        factor[keep] = factor[keep] + factor[drop] - base
        factor[drop] = base
        changes[name] = factor
    return g.replace(theta=theta, global_sticks=stick_factors(theta.sum((0, 1)), prior.gamma), **changes)


def bound_at(obs: Observations, g: Globals, prior: Prior, f: torch.Tensor, scale: float = 1.0):
    """The bound at g after one round of the rows' local factors from relevances f (q(Z) and q(W)'s
    row terms, then f, then q(Z) again: each step raises it), the rows' terms times ``scale`` (N / |B|
    for a minibatch). Returns (bound, r, L, f)."""
    tab = tables(g)
    _, _, f, _ = local_step(obs, g, tab, iters=1, f=f)
    lik = component_log_lik(obs, f, tab)
    rho, r = assign(obs, lik, _log(g.theta), expected_log_weights(*_pair(g.group_sticks)))
    return local_bound(obs, g, rho, r, f, lik, tab) * scale + global_bound(g, prior), r, lik, f


def merge_moves(obs: Observations, g: Globals, prior: Prior, f: torch.Tensor, *, candidates: int,
                scale: float = 1.0):
    """Bound-checked merges (Hughes & Sudderth 2013; in online VI judged on the minibatch, as Bryant
    & Sudderth 2012): the ``candidates`` most similar pairs are merged in turn, each kept only when
    the bound (``bound_at``; the minibatch's estimate when ``scale`` > 1) rises. Returns (globals, the
    relevances f of the bound kept, merges kept): in batch VI the next iteration, which starts
    from that f, records at least that bound, so the trace still never falls."""
    best, r, lik, best_f = bound_at(obs, g, prior, f, scale)
    touched, kept = set(), 0
    for keep, drop in merge_candidates(r, lik, candidates):
        if keep in touched or drop in touched:
            continue
        trial = merged(g, prior, keep, drop)
        value, _, _, trial_f = bound_at(obs, trial, prior, f, scale)
        if value > best:
            g, best, best_f, kept = trial, value, trial_f, kept + 1
            touched |= {keep, drop}
    return g, best_f, kept


# -- the start -----------------------------------------------------------------------------------
def _moments(x, weights, counts, prior: Prior):
    """Gamma factors concentrated at the method-of-moments Beta parameters of weighted rows."""
    total = counts.clamp_min(1e-6).unsqueeze(-1)
    mean = (weights.T @ x) / total
    var = (weights.T @ (x * x)) / total - mean * mean
    mean = mean.clamp(1e-4, 1 - 1e-4)
    spread = (mean * (1 - mean) / var.clamp_min(1e-8) - 1).clamp(1.0, 1e4)
    strength = torch.clamp(total, min=1.0)  # as confident as the points behind it
    return (torch.stack([mean * spread * strength, strength.expand_as(mean)], -1),
            torch.stack([(1 - mean) * spread * strength, strength.expand_as(mean)], -1))


def initial_globals(obs: Observations, truncation: int, group_truncation: int, prior: Prior, *,
                    n_init: int, seed: int, data_sizes=None) -> Globals:
    """Algorithm 1, step 3: K-means clusters (sorted by size) give the components' Beta
    parameters, all rows the background's, and each group's atoms its most frequent clusters.
    ``obs`` may be a sample of the data, whose rows per group are ``data_sizes``: counts are then
    scaled up to the data, group by group."""
    n_groups = obs.sizes.shape[0]
    data_sizes = obs.sizes if data_sizes is None else data_sizes
    x, z = obs.x, torch.logit(obs.x)
    # K-means on at most KMEANS_ROWS_PER_ATOM * K rows (evenly spaced: every group is represented), then
    # every row to its nearest centre: on 100,000 x 64 the full K-means took half the batch fit
    sample = torch.linspace(0, x.shape[0] - 1, min(x.shape[0], KMEANS_ROWS_PER_ATOM * truncation),
                            device=x.device).long()
    centres, _ = kmeans(z[sample], truncation, n_init=n_init, seed=seed)
    labels = squared_distances(z, centres).argmin(1)
    counts = torch.bincount(labels, minlength=truncation).to(x.dtype)
    rank = torch.empty(truncation, dtype=labels.dtype, device=labels.device)  # new index of each cluster
    rank[torch.argsort(counts, descending=True, stable=True)] = torch.arange(truncation, device=x.device)
    labels = rank[labels]
    onehot = torch.nn.functional.one_hot(labels, truncation).to(x.dtype)
    alpha, beta = _moments(x, onehot, onehot.sum(0), prior)
    alpha_bg, beta_bg = (m[0] for m in _moments(x, x.new_ones(x.shape[0], 1), x.new_ones(1) * x.shape[0], prior))

    per_group = x.new_zeros(n_groups, truncation).index_add_(0, obs.groups, onehot)
    top = torch.argsort(per_group, dim=1, descending=True, stable=True)[:, :group_truncation]
    theta = x.new_full((n_groups, group_truncation, truncation), 1.0 / truncation)
    theta[:, : top.shape[1]] = torch.nn.functional.one_hot(top, truncation).to(x.dtype)
    theta = 0.98 * theta + 0.02 / truncation  # keep every atom reachable
    n = float(data_sizes.sum())
    half = x.new_tensor([prior.xi[0] + n / 2, prior.xi[1] + n / 2]).expand(x.shape[1], 2).clone()
    slot_counts = (per_group * (data_sizes / obs.sizes.clamp_min(1))[:, None]).gather(1, top)
    slot_counts = torch.cat([slot_counts, slot_counts.new_zeros(n_groups, group_truncation - slot_counts.shape[1])], 1)
    return Globals(theta=theta, group_sticks=stick_factors(slot_counts, prior.lam),
                   global_sticks=stick_factors(theta.sum((0, 1)), prior.gamma), saliency=half,
                   alpha=alpha, beta=beta, alpha_bg=alpha_bg, beta_bg=beta_bg)


# -- Algorithm 1: batch VI -----------------------------------------------------------------------
def batch_iteration(obs: Observations, g: Globals, prior: Prior, f: torch.Tensor):
    """One E-step and M-step of Algorithm 1: q(W) from q(Z), then q(Z) again (each exact), then
    q(phi), the sticks, q(eps) and the Gammas, from the rows' relevances ``f`` (``memoized_visit``
    to the only batch). Returns (globals, f, the bound of the state it started from)."""
    new, stats, _ = memoized_visit(obs, g, prior, None, None, g.theta.shape[0], f=f)
    return new, stats["f"], stats["bound"] + global_bound(g, prior)


# -- Algorithm 2: online VI ----------------------------------------------------------------------
def online_step(batch: Observations, g: Globals, prior: Prior, *, n_total: int, group_sizes: torch.Tensor,
                zeta: float, local_iters: int = 3):
    """Algorithm 2 for one minibatch: the local factors, then every global factor a natural-gradient
    step ``zeta`` (zeta_r = (eta0 + r)^(-kappa) for minibatch r, ``decaying_step``; Algorithm 2 step
    7) towards its optimum computed from the minibatch (module docstring). Returns (globals, r and f
    of the minibatch, the bound estimated from it: its rows' terms scaled by N / |B|, the global
    terms once)."""
    tab = tables(g)
    rho, r, f, lik = local_step(batch, g, tab, iters=local_iters)
    n_groups = g.theta.shape[0]
    present = batch.sizes
    scale = torch.where(present > 0, group_sizes / present.clamp_min(1), torch.zeros_like(present))
    seen = present > 0
    log_psi = expected_log_weights(*_pair(g.global_sticks))
    target_theta = torch.log_softmax(group_atoms(batch, rho, lik, n_groups, scale) + log_psi, -1)
    theta = torch.where(seen[:, None, None], torch.softmax((1 - zeta) * _log(g.theta) + zeta * target_theta, -1),
                        g.theta)
    sticks = stick_factors(group_counts(batch, rho, n_groups, scale), prior.lam)
    group_sticks = torch.where(seen[:, None, None], (1 - zeta) * g.group_sticks + zeta * sticks, g.group_sticks)
    n_scale = n_total / batch.x.shape[0]
    saliency = saliency_factor(f, prior, n_scale)
    target = gamma_targets(g, gamma_statistics(batch, r, f, n_scale), prior)
    moved = {name: (1 - zeta) * getattr(g, name) + zeta * value for name, value in target.items()}
    estimate = local_bound(batch, g, rho, r, f, lik, tab) * n_scale + global_bound(g, prior)
    g = g.replace(theta=theta, group_sticks=group_sticks,
                  global_sticks=(1 - zeta) * g.global_sticks + zeta * stick_factors(theta.sum((0, 1)), prior.gamma),
                  saliency=(1 - zeta) * g.saliency + zeta * saliency, **moved)
    return g, r, f, estimate


# -- memoized online VI ------------------------------------------------------------------------
def memoized_visit(batch: Observations, g: Globals, prior: Prior, totals: dict | None, old: dict | None,
                   n_groups: int, f: torch.Tensor | None = None):
    """One visit of memoized VI to a minibatch: Algorithm 1's steps (``batch_iteration``), with each
    global factor computed from the record's totals, the sums over every batch seen (this batch's
    from now, ``old`` its sums from its last visit). Every statistic is a sum over rows, so the
    totals are the data's once every batch has been seen, and a visit to the only batch is
    ``batch_iteration``. Its relevances ``f`` carry over from its last visit (as batch VI's do): f
    restarted at E[eps] and refined with the start's q(W), before q(W) had moved, took the rows'
    relevances from 0.7 to 0.1-0.5 and the fit to a bound 9,000 nats lower on a draw of 1,800 rows.
    Returns (globals, the batch's sums and f, the totals)."""
    tab = tables(g)
    if f is None:
        f = saliency_mean(g).expand_as(batch.x).clone() if old is None else old["f"]
    lik = component_log_lik(batch, f, tab)
    log_pi = expected_log_weights(*_pair(g.group_sticks))
    rho, r = assign(batch, lik, _log(g.theta), log_pi)
    stats = {"rows": batch.sizes, "atoms": group_atoms(batch, rho, lik, n_groups),
             "bound": local_bound(batch, g, rho, r, f, lik, tab)}  # the bound of the state the visit starts from
    totals = _recorded(totals, stats, old)
    seen = (totals["rows"] > 0)[:, None, None]  # groups none of whose rows has been seen keep q(W) and sticks
    theta = torch.where(seen, torch.softmax(totals["atoms"] + expected_log_weights(*_pair(g.global_sticks)), -1),
                        g.theta)
    rho, r = assign(batch, lik, _log(theta), log_pi)
    f = relevance(batch, r, tab, expected_log_saliency(g))
    gamma = gamma_statistics(batch, r, f)
    later = {"slots": group_counts(batch, rho, n_groups), "relevant": f.sum(0), "irrelevant": (1 - f).sum(0), **gamma}
    totals = _recorded(totals, later, old)
    sticks = torch.where(seen, stick_factors(totals["slots"], prior.lam), g.group_sticks)
    g = g.replace(theta=theta, group_sticks=sticks, global_sticks=stick_factors(theta.sum((0, 1)), prior.gamma),
                  saliency=saliency_of_sums(totals["relevant"], totals["irrelevant"], prior))
    g = guarded_gamma_update(g, {name: totals[name] for name in gamma}, prior)
    return g, {**stats, **later, "f": f}, totals


def _recorded(totals: dict | None, stats: dict, old: dict | None) -> dict:
    """``totals`` with the batch's ``stats`` in place of its ``old`` ones (for the names in stats)."""
    out = dict(totals or {})
    for name, value in stats.items():
        out[name] = out.get(name, 0) + value - (0 if old is None else old[name])
    return out


def converged(trace: list, tol: float, n: int) -> bool:
    """The last change of the bound per observation is below ``tol`` (not relative: a relative
    test loosens as N grows)."""
    return len(trace) > 1 and abs(trace[-1] - trace[-2]) <= tol * n and math.isfinite(trace[-1])
