"""Per-sample Fisher diagonals of a Gaussian stick-breaking mixture's MAP objective, in closed form.

SGA+F ([DPM-SGA] eq. (8), (9), (16)) preconditions by F = (1/M) sum_n (grad l_n)^2, the mean of
squared *per-sample* gradients. With the objective split into per-sample terms

    l_n(theta) = ln sum_k pi_k N(x_n | mu_k, diag(std^2)) + (1/N) [ln p(mu) + ln p_u(v)]

(sum_n l_n = ln p(x, theta), the bound of the MAP guide with z summed out, sticks in the logit
coordinate u of ``inference.stick_mixture.sticks``; with MAP assignments the sum over k is replaced by the
assigned cluster), and r_nk the responsibilities (one-hot for MAP assignments), the per-sample
gradients are

    d l_n / d mu_kd = r_nk (x_nd - mu_kd) / std_d^2 - c_kd,   c_kd = lambda0 (mu_kd - m0_d) / (N std_d^2)
                                                                       ([DPM-SGA] eq. (12), one sample)
    d l_n / d u_j   = r_nj (1 - v_j) - r_n,>j v_j + (a_j (1 - v_j) - b_j v_j) / N
                                                                       ([DPM-SGA] eq. (14) times
                                                                       dv/du = v (1 - v), and the
                                                                       prior Beta(a_j, b_j) in u)

Their squares are summed over n without forming the M x K x D tensor of per-sample gradients:

    sum_n (r_nk (x_nd - mu_kd))^2 = (r^2)^T x^2 - 2 mu (r^2)^T x + mu^2 sum_n r_nk^2,

three matrix products. As [DPM-SGA] says below eq. (9), "F_theta is a scalar when we assume
diagonal covariance": mu_k's Fisher is one number, the mean over its D coordinates, so that
coordinates on which every sample agrees (a pixel that is always blank) share the curvature of
the others instead of having F = g^2 and a step 1 / g that grows without bound as g -> 0.
``tests/test_fisher.py`` checks both against a Python loop of autograd calls.
"""

import torch

from bnpzoo.ops import stick_parameters, tail_sums


def gaussian_mixture_fisher(x, resp, means, sticks, *, n_total, **prior):
    """(F_mu of shape K x 1, F_u of shape K - 1) for a minibatch ``x`` (M x D) with
    responsibilities ``resp`` (M x K) under means (K x D) and sticks (K - 1), of ``n_total`` rows;
    ``prior``: std, alpha, discount (default 0), prior_mean and prior_precision (the session's)."""
    std, alpha, discount = prior["std"], prior["alpha"], prior.get("discount", 0.0)
    prior_mean, prior_precision = prior["prior_mean"], prior["prior_precision"]
    m = x.shape[0]
    var = torch.as_tensor(std, dtype=x.dtype, device=x.device) ** 2
    r2 = resp * resp
    c = prior_precision * (means - prior_mean) / (n_total * var)
    squares = r2.T @ (x * x) - 2 * means * (r2.T @ x) + means**2 * r2.sum(0)[:, None]
    first = resp.T @ x - means * resp.sum(0)[:, None]  # sum_n r_nk (x_n - mu_k)
    fisher_means = ((squares / var**2 - 2 * c * first / var + m * c**2) / m).mean(1, keepdim=True)

    v = sticks
    a, b = stick_parameters(v.shape[0], alpha, discount, like=v)
    tails = tail_sums(resp)[:, :-1]  # r_n,>j
    per_sample = resp[:, :-1] * (1 - v) - tails * v + (a * (1 - v) - b * v) / n_total
    return fisher_means, (per_sample * per_sample).mean(0)


def prior_curvature(sticks, *, std, alpha, discount=0.0, prior_precision, n_total):
    """The prior's share of the curvature, per sample, which squared gradients cannot see (they
    square its share of the gradient, O(1 / N^2)): -d2/dmu2 ln p(mu) / N = lambda0 / (N std^2)
    (its mean over the features, as F_mu), and -d2/du2 ln p_u(v) / N = (a + b) v (1 - v) / N."""
    var = torch.as_tensor(std, dtype=sticks.dtype, device=sticks.device) ** 2
    a, b = stick_parameters(sticks.shape[0], alpha, discount, like=sticks)
    return (prior_precision / (n_total * var)).mean(), (a + b) * sticks * (1 - sticks) / n_total
