"""The prior every stick-breaking mixture program shares: Pitman-Yor sticks and Gaussian means.

    v_k  ~ Beta(1 - d, alpha + k d)       k = 1..K-1, v_K = 1      [PYPM-sVMM] eq. (1); d = 0: the DP
    pi_k = v_k prod_{l<k} (1 - v_l)                                  (log space)
    mu_k ~ N(m0, diag(prior_sd^2))        k = 1..K                  [DPM-SGA] eq. (12), [PYPM-sVMM] eq. (3)

as the sites ``v`` (plate ``"sticks"``) and ``mu`` (plate ``"clusters"``), which the zoo's guides
and learners fit. A program calls it, then draws its data under the plate ``"data"``.
"""

import pyro
import pyro.distributions as dist
import torch

from bnpzoo.ops import stick_breaking_log_weights, stick_parameters


def feature_vectors(data, num_data, dim, *values):
    """N and each of ``values`` (a number or one per feature) as a D-vector on the data's device and
    dtype; with ``data=None`` (generating) N = ``num_data`` and D = ``dim`` in the default dtype."""
    if data is None:
        data = torch.empty(num_data, dim, dtype=torch.get_default_dtype())
    vectors = [torch.as_tensor(v, dtype=data.dtype, device=data.device).expand(data.shape[1]) for v in values]
    return data.shape[0], vectors


def stick_weights(truncation: int, alpha, discount, *, like):
    """Sample the K - 1 sticks (site ``v``, plate ``"sticks"``); returns ln pi."""
    a, b = stick_parameters(truncation - 1, alpha, discount, like=like)
    with pyro.plate("sticks", truncation - 1, dim=-1):
        v = pyro.sample("v", dist.Beta(a, b))
    return stick_breaking_log_weights(v)


def stick_breaking_prior(truncation: int, alpha, discount, prior_mean, prior_sd):
    """Sample the sticks and the K means; returns (ln pi, the K x D means)."""
    log_weights = stick_weights(truncation, alpha, discount, like=prior_sd)
    with pyro.plate("clusters", truncation, dim=-1):
        mu = pyro.sample("mu", dist.Normal(prior_mean, prior_sd).to_event(1))
    return log_weights, mu
