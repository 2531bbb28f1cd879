"""The mean-field guide of ``models.hdp_gd``, [HDP-GD] eq. (22)-(26):

    q(Z_n) = Categorical(rho_n)        q(W_jt) = Categorical(theta_jt)     q(phi_nl) = Bernoulli(f_nl)
    q(eps_l) = Dir(xi*_l)              q(pi'_jt) = Beta(a_jt, b_jt)         q(psi'_k) = Beta(c_k, d_k)
    q(alpha_kl), q(beta_kl), q(alpha'_l), q(beta'_l) = Gamma(shape, rate)

Two uses. Given ``factors`` (the global ones, as ``inference.hdp_gd.updates.Globals`` holds them:
pairs in the last dimension) and ``rho``, ``f`` (the local ones for the rows of ``data``), it is
the q of the closed-form learners, for Pyro to evaluate (``pyro.infer.Trace_ELBO`` checks the
hand-derived bound) and draw from. Without them it learns the global factors as ``pyro.param``s
(positive pairs, a simplex for theta; started from ``start``, a ``Globals``), and leaves ``z`` and
``phi`` to the program, which marks them for enumeration: the ``svi`` learner
(``inference.hdp_gd.svi``) sums them out exactly.
"""

import pyro
import pyro.distributions as dist
import torch
from torch.distributions import constraints

PAIRS = ("global_sticks", "group_sticks", "saliency", "alpha", "beta", "alpha_bg", "beta_bg")
PREFIX = "hdp_gd."  # the learned factors' names in Pyro's param store


class StraightThroughOneHot(dist.OneHotCategorical):
    """q(W_jt) for the svi learner: an exact one-hot draw (so the bound's value is unbiased) whose
    gradient is that of the Gumbel-softmax relaxation at temperature 1 (the straight-through
    estimator, Bengio et al. 2013; Jang et al. 2017): low variance where the score function of
    a draw that every row's likelihood depends on has none to spare, biased where q is flat."""

    has_rsample = True

    def rsample(self, sample_shape=torch.Size()):
        gumbel = -torch.empty(self._extended_shape(sample_shape), dtype=self.logits.dtype,
                              device=self.logits.device).exponential_().log()
        soft = torch.softmax(self.logits + gumbel, -1)
        hard = torch.nn.functional.one_hot(soft.argmax(-1), soft.shape[-1]).to(soft.dtype)
        return hard + (soft - soft.detach())  # exactly hard: x - x is 0 in floating point


def learned_factors(start):
    """The global factors as ``pyro.param``s (``start`` gives their first values; it is read only
    when a parameter is new). Returns a ``Globals``-like object of the current values."""
    values = {name: pyro.param(PREFIX + name, lambda n=name: getattr(start, n).detach().clone(),
                               constraint=constraints.positive) for name in PAIRS}
    values["theta"] = pyro.param(PREFIX + "theta", lambda: start.theta.detach().clone(), constraint=constraints.simplex)
    return start.replace(**values)


def guide(data, groups, *, factors=None, rho=None, f=None, start=None, **_):
    """Draw every latent site of ``models.hdp_gd.model`` from the mean-field factors: ``factors``
    given, or learned from ``start``; ``z`` and ``phi`` only where ``rho`` and ``f`` are given."""
    learned = factors is None
    factors = learned_factors(start) if learned else factors
    groups = torch.as_tensor(groups)
    n_groups, group_truncation, truncation = factors.theta.shape
    d = data.shape[1]
    with pyro.plate("global_sticks", truncation - 1, dim=-1):
        pyro.sample("psi", dist.Beta(factors.global_sticks[:, 0], factors.global_sticks[:, 1]))
    with pyro.plate("groups", n_groups, dim=-2):
        with pyro.plate("group_sticks", group_truncation - 1, dim=-1):
            pyro.sample("pi", dist.Beta(factors.group_sticks[..., 0], factors.group_sticks[..., 1]))
        with pyro.plate("group_atoms", group_truncation, dim=-1):
            pyro.sample("w", (StraightThroughOneHot if learned else dist.OneHotCategorical)(probs=factors.theta))
    features = pyro.plate("features", d, dim=-1)
    with features:
        pyro.sample("saliency", dist.Beta(factors.saliency[:, 0], factors.saliency[:, 1]))
        pyro.sample("alpha_bg", dist.Gamma(factors.alpha_bg[:, 0], factors.alpha_bg[:, 1]))
        pyro.sample("beta_bg", dist.Gamma(factors.beta_bg[:, 0], factors.beta_bg[:, 1]))
        with pyro.plate("atoms", truncation, dim=-2):
            pyro.sample("alpha", dist.Gamma(factors.alpha[..., 0], factors.alpha[..., 1]))
            pyro.sample("beta", dist.Gamma(factors.beta[..., 0], factors.beta[..., 1]))
    if rho is not None:
        with pyro.plate("data", groups.shape[0], dim=-2):
            pyro.sample("z", dist.Categorical(probs=rho[:, None]))
            with features:
                pyro.sample("phi", dist.Bernoulli(f))
