"""Closed-form mean-field VI of a stick-breaking mixture of a conjugate component family, for
natural-gradient SVI.

The "SVI: DPM" baseline of [PYPM-sVMM] (Table I, section VII): the conjugate factors

    q(v_k)     = Beta(c1_k, c0_k)                          k < K
    q(theta_k) = the family's factor (``bnpzoo.families``), natural parameters = prior + statistics

and their coordinate-ascent optimum given responsibilities (Blei and Jordan's DP mixture VI, with
Pitman-Yor sticks Beta(a_k, b_k)):

    r_nk   propto exp(E ln pi_k + E_q ln f(x_n | theta_k))
    E ln pi_k = E ln v_k + sum_{l<k} E ln(1 - v_l),  E ln v = psi(c1) - psi(c1 + c0)
    q(theta_k) = family.natural(statistics of r_.k)  (for the fixed-scale Gaussian: tau_k = lambda0 + N_k,
                                                      w_k = S_k, rows centred on m0)
    c1_k   = a_k + N_k,                   c0_k = b_k + sum_{j>k} N_j

SVI ([PYPM-sVMM] eq. (10)) computes the statistics of a minibatch scaled by N/M (the "immediate"
estimate theta_hat) and moves theta to (1 - p_t) theta + p_t theta_hat: natural parameters that are
the prior's plus statistics stay valid under convex combinations.
"""

import torch

from bnpzoo.ops import conjugate_sticks


def expected_log_weights(c1: torch.Tensor, c0: torch.Tensor) -> torch.Tensor:
    """E ln pi_k under Beta(c1, c0) sticks (K - 1 of them in the last dimension, the last stick is
    1): K entries, E ln v_k + sum_{l<k} E ln(1 - v_l)."""
    total = torch.digamma(c1 + c0)
    e_log_v, e_log_rest = torch.digamma(c1) - total, torch.digamma(c0) - total
    zero = e_log_v.new_zeros(e_log_v.shape[:-1] + (1,))
    return torch.cat([e_log_v, zero], -1) + torch.cat([zero, e_log_rest.cumsum(-1)], -1)


def expected_scores(x, family, q, prior, c1, c0):
    """E ln pi_k + E ln f(x_n | theta_k), (M, K): r_nk's log, up to each row's normaliser."""
    log_weights = expected_log_weights(c1, c0).to(x.dtype)
    return family.expected_log_density(x, q, prior, log_weights=log_weights)


def responsibilities(x, family, q, prior, c1, c0):
    """r_nk of the module docstring, (M, K)."""
    return torch.softmax(expected_scores(x, family, q, prior, c1, c0), 1)


def natural_estimate(stats, family, prior, *, scale, alpha, discount=0.0) -> tuple[dict, tuple]:
    """theta_hat from a minibatch's statistics (``family.statistics`` of its responsibilities): the
    optimum of every factor with the statistics scaled by ``scale`` = N / M; (the family's natural
    parameters, (c1, c0) of the sticks)."""
    stats = {name: scale * value for name, value in stats.items()}
    return family.natural(stats, prior), conjugate_sticks(stats["count"], alpha, discount)
