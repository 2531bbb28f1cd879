"""Dirichlet- (or Pitman-Yor-) process mixture of Bernoulli distributions over binary features,
truncated at K clusters:

    v_k   ~ Beta(1 - d, alpha + k d)                 k = 1..K-1, v_K = 1   (stick-breaking)
    pi_k  = v_k prod_{l<k} (1 - v_l)                                         (log space)
    mu_kd ~ Beta(kappa0 m0_d, kappa0 (1 - m0_d))     k = 1..K, per feature
    z_n   ~ Categorical(pi)                                                 (enumerated)
    x_nd  ~ Bernoulli(mu_{z_n d})

Sites ``v``, ``mu`` (K x D probabilities), ``z``, ``x`` under the plate ``"data"``; the conjugate
family is ``bnpzoo.families.BetaBernoulliFamily``. With ``data=None`` the program generates
``num_data`` observations of dimension ``dim``.
"""

import pyro
import pyro.distributions as dist

from bnpzoo.models.assigned import AssignedBernoulli
from bnpzoo.models.stick_breaking import feature_vectors, stick_weights


def model(
    data=None,
    *,
    truncation: int = 20,
    alpha: float = 1.0,
    discount: float = 0.0,
    prior_mean=0.5,
    prior_precision: float = 2.0,
    subsample_size: int | None = None,
    num_data: int | None = None,
    dim: int | None = None,
):
    """The generative program: alpha, discount d, prior_mean m0 (each probability's prior mean),
    prior_precision kappa0 (its pseudo-samples), truncation K."""
    n, (m0,) = feature_vectors(data, num_data, dim, prior_mean)
    log_weights = stick_weights(truncation, alpha, discount, like=m0)  # the site v
    with pyro.plate("clusters", truncation, dim=-1):
        mu = pyro.sample("mu", dist.Beta(prior_precision * m0, prior_precision * (1 - m0)).to_event(1))

    with pyro.plate("data", n, subsample_size=subsample_size, dim=-1) as idx:
        z = pyro.sample("z", dist.Categorical(logits=log_weights), infer={"enumerate": "parallel"})
        obs = data[idx] if data is not None else None
        return pyro.sample("x", AssignedBernoulli(mu, z), obs=obs)
