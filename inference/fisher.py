"""Per-sample Fisher diagonals of the spherical DP mixture's MAP objective, in closed form.

SGA+F (seed 002 eq. (8), (9), (16)) preconditions by F = (1/M) sum_n (grad l_n)^2, the mean of
squared *per-sample* gradients. With the objective split into per-sample terms

    l_n(theta) = ln sum_k pi_k N(x_n | mu_k, sigma^2 I) + (1/N) [ln p(mu) + ln p(v)]

(sum_n l_n = ln p(x, theta), the bound of the MAP guide with z summed out; with MAP assignments
the sum over k is replaced by the assigned cluster), and r_nk the responsibilities (one-hot for
MAP assignments), the per-sample gradients are

    d l_n / d mu_k = r_nk (x_n - mu_k) / sigma^2 - c_k,        c_k = lambda0 (mu_k - m0) / (N sigma^2)
                                                                       (seed 002 eq. (12), one sample)
    d l_n / d u_j  = r_nj (1 - v_j) - r_n,>j v_j - (a0 - 1) v_j / N   (seed 002 eq. (14) times
                                                                       dv/du = v (1 - v), u = logit v,
                                                                       the unconstrained coordinate
                                                                       Pyro optimises)

Their squares are summed over n without forming the M x K x D tensor of per-sample gradients:

    sum_n (r_nk (x_nd - mu_kd))^2 = (r^2)^T x^2 - 2 mu (r^2)^T x + mu^2 sum_n r_nk^2,

three matrix products. As seed 002 says below eq. (9), "F_theta is a scalar when we assume
diagonal covariance": mu_k's Fisher is one number, the mean over its D coordinates, so that
coordinates on which every sample agrees (a pixel that is always blank) share the curvature of
the others instead of having F = g^2 and a step 1 / g that grows without bound as g -> 0.
``tests/test_fisher.py`` checks both against a Python loop of autograd calls.
"""

from bnpzoo.ops import tail_sums


def spherical_mixture_fisher(x, resp, means, sticks, *, sigma, alpha, prior_mean, prior_precision, n_total):
    """(F_mu of shape K x 1, F_u of shape K - 1) for a minibatch ``x`` (M x D) with
    responsibilities ``resp`` (M x K) under means (K x D) and sticks (K - 1)."""
    m = x.shape[0]
    var = sigma**2
    r2 = resp * resp
    c = prior_precision * (means - prior_mean) / (n_total * var)
    squares = r2.T @ (x * x) - 2 * means * (r2.T @ x) + means**2 * r2.sum(0)[:, None]
    first = resp.T @ x - means * resp.sum(0)[:, None]  # sum_n r_nk (x_n - mu_k)
    fisher_means = ((squares / var**2 - 2 * c * first / var + m * c**2) / m).mean(1, keepdim=True)

    v = sticks
    tails = tail_sums(resp)[:, :-1]  # r_n,>j
    per_sample = resp[:, :-1] * (1 - v) - tails * v - (alpha - 1) * v / n_total
    return fisher_means, (per_sample * per_sample).mean(0)
