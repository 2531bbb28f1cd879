"""Batch variational maximisation-maximisation (the "MM" learner) for a spherical DP mixture.

Seed 002 eq. (5): every variational log-posterior (VLP) is replaced by its MAP,
E[z] <- argmax ln q(z), E[theta] <- argmax ln q(theta), one coordinate at a time:

    step 1  E[z_nk]: argmax_k ln E[pi_k] + ln N(x_n | E[mu_k], sigma^2 I)         eq. (15)
            (or, as an option, soft responsibilities: the softmax of the same scores)
    step 2  clusters reordered by size and dead ones pruned                      seed 004 V.D
    step 3  E[mu_k]: the zero of eq. (12), (sum_n E[z_nk] x_n + lambda0 m0) / (N_k + lambda0)
    step 4  E[v_k]:  the zero of seed 004 eq. (5), see ``sticks.update_sticks``   eq. (6)/(21)

The objective is the log joint at the current point estimates, ln p(x, E[z], E[mu], E[v]) with
hard assignments, and ln p(x, E[mu], E[v]) (z summed out, the EM bound at its maximum) with soft
ones. Each step maximises it in one block given the others, so it never decreases (step 2 is
neutral for a0 = 1, where the stick profile sum_k N_k ln N_k - N ln N does not depend on the
order; an emptied cluster leaves at the prior's mode and is counted there, so the objective of
K clusters stays comparable after pruning). With soft assignments a pruned cluster takes its
(tiny) mass with it; set ``prune_threshold=0`` for an exactly monotone run.
"""

from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm

from bnpzoo.ops import spherical_normal_log_density, stick_breaking_log_weights
from bnpzoo.inference.sticks import reorder_and_prune, update_sticks


@dataclass
class SphericalMixture:
    """Point estimates of a spherical DP mixture: K means and K - 1 free sticks."""

    means: torch.Tensor
    sticks: torch.Tensor
    objective_trace: list[float] = field(default_factory=list)
    n_iter: int = 0
    converged: bool = False


def mean_gradient(x, resp, means, sigma, prior_mean, prior_precision):
    """d/dmu_k [ln p(x | mu, z) + ln p(mu)] summed over the data: seed 002 eq. (12),

        sum_n (x_n - mu_k) E[z_nk] / sigma^2 - lambda0 (mu_k - m0) / sigma^2.
    """
    counts = resp.sum(0)
    return (resp.T @ x - counts[:, None] * means - prior_precision * (means - prior_mean)) / sigma**2


def update_means(x, resp, prior_mean, prior_precision):
    """The zero of eq. (12): (sum_n E[z_nk] x_n + lambda0 m0) / (N_k + lambda0)."""
    counts = resp.sum(0)
    return (resp.T @ x + prior_precision * prior_mean) / (counts[:, None] + prior_precision)


def assignment_scores(x, means, sticks, sigma):
    """ln pi_k + ln N(x_n | mu_k, sigma^2 I), (N, K): the argument of eq. (15)."""
    return stick_breaking_log_weights(sticks) + spherical_normal_log_density(x, means, sigma)


def assign(scores: torch.Tensor, hard: bool) -> torch.Tensor:
    """E[z]: one-hot argmax (eq. (15)) or softmax responsibilities."""
    if hard:
        return torch.nn.functional.one_hot(scores.argmax(1), scores.shape[1]).to(scores.dtype)
    return torch.softmax(scores, 1)


def log_prior(means, sticks, *, sigma, alpha, prior_mean, prior_precision, n_clusters):
    """ln p(mu) + ln p(v) over ``n_clusters``; clusters not in ``means`` sit at the prior's mode."""
    d = means.shape[1]
    var0 = sigma**2 / prior_precision
    at_mode = -0.5 * d * torch.log(2 * torch.pi * var0)  # ln N(m0 | m0, var0 I)
    mu_term = at_mode * n_clusters - ((means - prior_mean) ** 2).sum() / (2 * var0)
    alpha = torch.as_tensor(alpha, dtype=means.dtype, device=means.device)
    # Beta(1, a0): ln a0 + (a0 - 1) ln(1 - v); an absent cluster's stick sits at its mode v = 0
    v_term = (n_clusters - 1) * alpha.log() + (alpha - 1) * torch.log1p(-sticks).sum()
    return mu_term + v_term


def objective(scores, resp, means, sticks, hard, **prior):
    """Hard: ln p(x, z, mu, v); soft: ln p(x, mu, v), as in the module docstring."""
    data_term = (scores * resp).sum() if hard else torch.logsumexp(scores, 1).sum()
    return data_term + log_prior(means, sticks, **prior)


def fit_vmm(
    x: torch.Tensor,
    init_means: torch.Tensor,
    init_labels: torch.Tensor,
    *,
    sigma: torch.Tensor,
    alpha: float = 1.0,
    prior_mean: torch.Tensor,
    prior_precision: float = 20.0,
    hard: bool = True,
    max_iter: int = 100,
    tol: float = 1e-6,
    prune_threshold: float = 1e-3,
    verbose: bool = False,
) -> SphericalMixture:
    """Run the MM iterations from a K-means start (seed 002 Algorithm 1, with MAP in place of SGA).

    Initialisation as in step 3.iv: E[z] = the K-means labels (each sample's nearest K-means
    mean), then E[mu] and E[v].
    Stops when the assignments no longer change (hard), when the relative change of the
    objective falls below ``tol``, or after ``max_iter`` iterations.
    """
    prior = dict(sigma=sigma, alpha=alpha, prior_mean=prior_mean, prior_precision=prior_precision,
                 n_clusters=init_means.shape[0])
    resp = torch.nn.functional.one_hot(init_labels, init_means.shape[0]).to(x.dtype)
    fit = SphericalMixture(means=init_means, sticks=init_means.new_empty(0))
    bar = tqdm(total=max_iter, disable=not verbose, desc="vmm", unit="it")
    for it in range(max_iter + 1):
        # step 2: reorder by size, prune dead clusters
        keep = reorder_and_prune(resp.sum(0), alpha, prune_threshold)
        resp = resp[:, keep]
        # steps 3-4: M-steps for the means and the sticks
        fit.means = update_means(x, resp, prior_mean, prior_precision)
        counts = resp.sum(0)
        fit.sticks = update_sticks(counts, alpha)
        scores = assignment_scores(x, fit.means, fit.sticks, sigma)
        value = objective(scores, resp, fit.means, fit.sticks, hard, **prior).item()
        fit.objective_trace.append(value)
        if it == max_iter:
            break
        # step 1: new assignments (eq. (15))
        new_resp = assign(scores, hard)
        fit.n_iter = it + 1
        bar.update(1)
        bar.set_postfix(k=resp.shape[1], objective=f"{value:.4g}")
        unchanged = hard and torch.equal(new_resp, resp)
        previous = fit.objective_trace[-2] if it else None
        small = previous is not None and abs(value - previous) <= tol * abs(previous)
        resp = new_resp
        if unchanged or small:
            fit.converged = True
            break
    bar.close()
    return fit
