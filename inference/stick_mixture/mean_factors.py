"""The means' variational factors of the stick-breaking mixtures, and what they add to the bound.

VMM keeps E[mu_k] = argmax ln q(mu_k) ([DPM-SGA] eq. (5)), but the assignment's variational
log-posterior is an expectation under q(mu_k), ln q(z_n = k) = E_q[ln f(x_n | mu_k)] + ln pi_k
([PYPM-sVMM] section II.B), not ln f at the mean (the plug-in of [DPM-SGA] eq. (15) and
[PYPM-sVMM] eq. (20)). With q(mu_k) = N(m_k, diag(tau_k^2)), the optimum given the counts,

    tau_kd^2 = 1 / (N_k I_d + lambda0 / std_d^2)          std_d^2 / (N_k + lambda0) for the Gaussian
    E_q[ln f(x_n | mu_k)] = ln f(x_n | m_k) - 1/2 sum_d I_d tau_kd^2

with I_d the Fisher information of the location (``bnpzoo.families``): exact for Gaussian
components (the conjugate factor) and the second-order (Laplace) approximation for any other
generalized Gaussian. The difference is an Occam penalty of D / (2 (N_k + lambda0)) per sample on
a cluster of N_k: a cluster that K-means split off with few members costs its members more than a
large one, whatever the prior's centre, so pruning no longer needs a prior that pulls every mean
toward the data mean. The means' part of the bound is then -sum_k KL(q(mu_k) || p(mu_k)), the
(D / 2) ln((N_k + lambda0) / lambda0) of a marginal likelihood plus the prior's quadratic; a
pruned cluster sits at its prior and adds 0.

Measured on digits, iris, wine, breast cancer and generated blobs: the plug-in objective at
lambda0 = 1 kept 46 of digits' 50 K-means clusters (NMI 0.62); with the penalty, 16 (NMI 0.71).
"""

import torch


def mean_variances(counts, information, std, prior_precision) -> torch.Tensor:
    """tau_kd^2 of q(mu_k) given the K counts: (K, D); ``information`` and ``std`` hold one value
    per feature."""
    prior_information = prior_precision / torch.as_tensor(std, dtype=counts.dtype, device=counts.device) ** 2
    return 1 / (counts[:, None] * information + prior_information)


def occam_penalty(variances, information) -> torch.Tensor:
    """1/2 sum_d I_d tau_kd^2: ln f at the mean minus its expectation under q(mu_k), (K,)."""
    return 0.5 * (variances * information).sum(1)


def means_kl(means, variances, *, std, prior_mean, prior_precision, per_cluster=False) -> torch.Tensor:
    """sum_k KL(N(m_k, tau_k^2) || N(m0, std^2 / lambda0)) over the K clusters and D features (with
    ``per_cluster``, one sum per cluster, (K,))."""
    prior_var = torch.as_tensor(std, dtype=means.dtype, device=means.device) ** 2 / prior_precision
    ratio = variances / prior_var
    terms = 0.5 * (ratio + (means - prior_mean) ** 2 / prior_var - 1 - ratio.log())
    return terms.sum(1) if per_cluster else terms.sum()
