"""Closed-form mean-field VI of a Gaussian stick-breaking mixture, for natural-gradient SVI.

The "SVI: DPM" baseline of [PYPM-sVMM] (Table I, section VII): the conjugate factors

    q(v_k)  = Beta(c1_k, c0_k)                          k < K
    q(mu_k) = N(w_k / tau_k, diag(std^2) / tau_k)

and their coordinate-ascent optimum given responsibilities (Blei and Jordan's DP mixture VI,
with the fixed variance std^2 of [DPM-SGA], one per feature, and Pitman-Yor sticks
Beta(a_k, b_k)):

    r_nk   propto exp(E ln pi_k + ln N(x_n | m_k, diag(std^2)) - D / (2 tau_k))
    E ln pi_k = E ln v_k + sum_{l<k} E ln(1 - v_l),  E ln v = psi(c1) - psi(c1 + c0)
    tau_k  = lambda0 + N_k,               w_k = lambda0 m0 + S_k
    c1_k   = a_k + N_k,                   c0_k = b_k + sum_{j>k} N_j

(tau_k and w_k are the natural parameters of q(mu_k) with std^2 divided out: a fixed scaling, so
the convex combinations of SVI are unchanged). SVI ([PYPM-sVMM] eq. (10)) computes
N_k = (N/M) sum_n r_nk and S_k = (N/M) sum_n r_nk x_n on a minibatch (the "immediate" estimate
theta_hat) and moves theta to (1 - p_t) theta + p_t theta_hat.
"""

import torch

from bnpzoo.ops import conjugate_sticks, generalized_gaussian_log_density


def expected_log_weights(c1: torch.Tensor, c0: torch.Tensor) -> torch.Tensor:
    """E ln pi_k under Beta(c1, c0) sticks (K - 1 of them in the last dimension, the last stick is
    1): K entries, E ln v_k + sum_{l<k} E ln(1 - v_l)."""
    total = torch.digamma(c1 + c0)
    e_log_v, e_log_rest = torch.digamma(c1) - total, torch.digamma(c0) - total
    zero = e_log_v.new_zeros(e_log_v.shape[:-1] + (1,))
    return torch.cat([e_log_v, zero], -1) + torch.cat([zero, e_log_rest.cumsum(-1)], -1)


def responsibilities(x, precision, weighted, c1, c0, std):
    """r_nk of the module docstring, (M, K)."""
    means = weighted / precision[:, None]
    scores = generalized_gaussian_log_density(x, means, std) - x.shape[1] / (2 * precision)
    return torch.softmax(scores + expected_log_weights(c1, c0), 1)


def natural_estimate(x, resp, *, n_total, alpha, discount=0.0, prior_mean, prior_precision) -> dict:
    """theta_hat from a minibatch: the optimum of every factor with counts scaled by N / M."""
    scale = n_total / x.shape[0]
    counts, sums = scale * resp.sum(0), scale * (resp.T @ x)
    c1, c0 = conjugate_sticks(counts, alpha, discount)
    return {"precision": prior_precision + counts, "weighted": prior_precision * prior_mean + sums, "c1": c1, "c0": c0}
