"""Closed forms for stick-breaking weights v_k ~ Beta(a_k, b_k) = Beta(1, a0), and cluster pruning.

``counts`` are N_k = sum_n E[z_nk] for the K clusters in stick order; ``sticks`` the K - 1 free
sticks (v_K = 1).
"""

import torch

from bnpzoo.ops import clamp_probs, tail_sums


def stick_gradient(counts: torch.Tensor, sticks: torch.Tensor, alpha: float) -> torch.Tensor:
    """d/dv_k [ln p(z | v) + ln p(v)] for k < K: seed 002 eq. (14),

        sum_n E[z_nk] / v_k - sum_n sum_{j>k} E[z_nj] / (1 - v_k) - (a0 - 1) / (1 - v_k).
    """
    tails = tail_sums(counts)[:-1]
    return counts[:-1] / sticks - (tails + alpha - 1) / (1 - sticks)


def update_sticks(counts: torch.Tensor, alpha: float) -> torch.Tensor:
    """argmax_v of the stick VLP, seed 004 eq. (6)/(21) with a_k = 1, b_k = a0:

        v_k = (N_k + a_k - 1) / (N_k + N_{>k} + a_k + b_k - 2) = N_k / (N_k + N_{>k} + a0 - 1).

    Departure: eq. (6) as printed drops N_k from the denominator; setting eq. (5) to zero puts it
    back (the mode of Beta(N_k + a_k, N_{>k} + b_k)). Clamped into (0, 1) where the mode sits on
    the boundary (a0 < 1 with nothing to the right, or an empty cluster).
    """
    tails = tail_sums(counts)[:-1]
    denom = (counts[:-1] + tails + alpha - 1).clamp_min(torch.finfo(counts.dtype).tiny)
    return clamp_probs(counts[:-1] / denom)


def sort_by_size(counts: torch.Tensor, alpha: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Clusters in decreasing order of N_k (ties keep their order) and all K sticks in that
    order, the last fixed to 1. Returns (order, sticks)."""
    order = torch.argsort(counts, descending=True, stable=True)
    sorted_counts = counts[order]
    return order, torch.cat([update_sticks(sorted_counts, alpha), sorted_counts.new_ones(1)])


def reorder_and_prune(counts: torch.Tensor, alpha: float, threshold: float) -> torch.Tensor:
    """Cluster ordering and pruning of seed 004 section V.D.

    Clusters are put in decreasing order of N_k, their sticks recomputed in that order, and a
    cluster is dropped when its stick falls below ``threshold`` (empty clusters always go).
    Sorted this way a non-empty cluster has v_k >= 1/K, so with hard assignments and a threshold
    below 1/K only empty clusters are ever dropped. Returns the indices of the kept clusters, in
    their new order (at least one cluster is kept).
    """
    order, sticks = sort_by_size(counts, alpha)
    keep = (counts[order] > 0) & (sticks >= threshold)
    keep[0] = True
    return order[keep]
