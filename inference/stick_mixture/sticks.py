"""Closed forms for Pitman-Yor stick-breaking weights v_k ~ Beta(a_k, b_k), a_k = 1 - d,
b_k = alpha + k d ([PYPM-sVMM] eq. (1); d = 0 is the DP's Beta(1, alpha)), and cluster pruning.

``counts`` are N_k = sum_n E[z_nk] for the K clusters in stick order; ``sticks`` the K - 1 free
sticks (v_K = 1).

The coordinate of the sticks. VMM replaces E[v_k] by the mode of its variational log-posterior
([PYPM-sVMM] eq. (21)), the mode of q(v_k) = Beta(N_k + a_k, N_{>k} + b_k) in v. That mode does
not exist whenever N_k + a_k < 1 or N_{>k} + b_k < 1: the density is then unbounded at 0 or 1.
This happens for every empty cluster once d > 0 (a_k < 1), and for soft counts below 1 when
alpha < 1; the objective then has no maximum and "coordinate ascent" clamps v at a boundary. We
take the mode in the logit coordinate u = ln(v / (1 - v)) instead, the coordinate in which the
stochastic learners step: the density of u is that of v times |dv/du| = v (1 - v), so

    ln p_u(v) = a ln v + b ln(1 - v) - ln B(a, b)       (bounded for every a, b > 0)
    argmax_u  = (N_k + a_k) / (N_k + N_{>k} + a_k + b_k)

which is exactly the posterior mean E[v_k] of Beta(N_k + a_k, N_{>k} + b_k): the expectation that
VMM's MAP stands in for, available here in closed form. For counts in the hundreds it differs
from eq. (21) by O(1 / N). The MAP guides add the same Jacobian (``guides.stick_mixture``), so
every learner maximises one objective.
"""

import torch

from bnpzoo.ops import clamp_probs, stick_parameters, tail_sums


def _log_beta(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.lgamma(a) + torch.lgamma(b) - torch.lgamma(a + b)


def update_sticks(counts: torch.Tensor, alpha: float, discount: float = 0.0) -> torch.Tensor:
    """The K - 1 sticks that maximise ln p(z | v) + ln p_u(v) given the counts (module docstring):
    v_k = (N_k + a_k) / (N_k + N_{>k} + a_k + b_k), the posterior mean of q(v_k). Batched: the
    clusters are the last dimension."""
    a, b = stick_parameters(counts.shape[-1] - 1, alpha, discount, like=counts)
    head = counts[..., :-1] + a
    return clamp_probs(head / (head + tail_sums(counts)[..., :-1] + b))


def stick_gradient(counts: torch.Tensor, sticks: torch.Tensor, alpha: float, discount: float = 0.0) -> torch.Tensor:
    """d/du_k [ln p(z | v) + ln p_u(v)] for u_k = logit v_k: [DPM-SGA] eq. (14) times dv/du = v (1 - v),
    plus the Jacobian's share,

        (N_k + a_k) (1 - v_k) - (N_{>k} + b_k) v_k.
    """
    a, b = stick_parameters(sticks.shape[0], alpha, discount, like=sticks)
    return (counts[:-1] + a) * (1 - sticks) - (tail_sums(counts)[:-1] + b) * sticks


def stick_log_prior(sticks: torch.Tensor, alpha: float, discount: float = 0.0, *, n_sticks: int) -> torch.Tensor:
    """sum_k ln p_u(v_k) over ``n_sticks`` positions: the free ``sticks`` first, then the positions of
    clusters that pruning removed, each at its prior's mode (v = a_k / (a_k + b_k)), so that the
    objective of a pruned fit stays comparable with the K clusters it started from. Batched: the
    sticks are the last dimension."""
    a, b = stick_parameters(n_sticks, alpha, discount, like=sticks)
    free = sticks.shape[-1]
    v = clamp_probs(sticks)
    held = (a[:free] * v.log() + b[:free] * torch.log1p(-v) - _log_beta(a[:free], b[:free])).sum(-1)
    a, b = a[free:], b[free:]
    mode = a / (a + b)
    absent = (a * mode.log() + b * torch.log1p(-mode) - _log_beta(a, b)).sum()
    return held + absent


def sort_by_size(counts: torch.Tensor, alpha: float, discount: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Clusters in decreasing order of N_k (ties keep their order) and all K sticks in that
    order, the last fixed to 1. Returns (order, sticks)."""
    order = torch.argsort(counts, descending=True, stable=True)
    sorted_counts = counts[order]
    return order, torch.cat([update_sticks(sorted_counts, alpha, discount), sorted_counts.new_ones(1)])


def reorder_and_prune(counts: torch.Tensor, alpha: float, threshold: float, discount: float = 0.0,
                      empty: float = 0.0) -> torch.Tensor:
    """Cluster ordering and pruning of [PYPM-sVMM] section V.D.

    Clusters are put in decreasing order of N_k, their sticks recomputed in that order, and a
    cluster is dropped when its stick falls below ``threshold`` (empty clusters, N_k <= ``empty``,
    always go: the last cluster's stick is near 1 / (1 + alpha) however small its count).
    Returns the indices of the kept clusters, in their new order (at least one is kept).
    """
    order, sticks = sort_by_size(counts, alpha, discount)
    keep = (counts[order] > empty) & (sticks >= threshold)
    keep[0] = True
    return order[keep]


def truncation_tail(n_clusters: int, alpha: float, discount: float = 0.0) -> float:
    """The prior's expected weight left for the last of ``n_clusters`` clusters, E[prod_{k<K} (1 - v_k)]
    = prod_{k<K} (b_k / (a_k + b_k)) (the sticks are independent, v_k ~ Beta(a_k, b_k)): what the
    truncation gives its last cluster of the mass that the untruncated process spreads over the
    clusters beyond it. Near 1 (alpha far above K), the truncated prior asks for one cluster."""
    a, b = stick_parameters(n_clusters - 1, alpha, discount, like=torch.empty(0, dtype=torch.float64))
    return float(torch.log(b / (a + b)).sum().exp())


def expected_clusters(n: int, alpha: float, discount: float = 0.0) -> float:
    """The untruncated prior's expected number of clusters among n samples. The (i + 1)-th sample
    opens a cluster with probability (alpha + d K_i) / (alpha + i), linear in K_i, so the mean
    follows E[K_{i+1}] = E[K_i] (1 + d / (alpha + i)) + alpha / (alpha + i) exactly from E[K_1] = 1
    (for the DP, d = 0: sum_{i<n} alpha / (alpha + i)); unrolled with cumulative sums of logs, for
    every alpha > -d."""
    i = torch.arange(1, n, dtype=torch.float64)
    growth = torch.log1p(discount / (alpha + i))
    after = torch.cat([growth, growth.new_zeros(1)]).flip(0).cumsum(0).flip(0)  # sum_{j >= i}, then 0
    return float(after[0].exp() + (alpha / (alpha + i) * after[1:].exp()).sum())
