"""The mean-field guide of ``models.hdp_gd``, [HDP-GD] eq. (22)-(26):

    q(Z_n) = Categorical(rho_n)        q(W_jt) = Categorical(theta_jt)     q(phi_nl) = Bernoulli(f_nl)
    q(eps_l) = Dir(xi*_l)              q(pi'_jt) = Beta(a_jt, b_jt)         q(psi'_k) = Beta(c_k, d_k)
    q(alpha_kl), q(beta_kl), q(alpha'_l), q(beta'_l) = Gamma(shape, rate)

Its parameters are given, not learned here: ``factors`` holds the global ones as
``inference.hdp_gd.Globals`` does (pairs in the last dimension), ``rho`` and ``f`` the local ones
for the rows of ``data``. The closed-form learners own them; the guide lets Pyro evaluate the
same q (``pyro.infer.Trace_ELBO`` checks the hand-derived bound) and draw from it.
"""

import pyro
import pyro.distributions as dist
import torch


def guide(data, groups, *, factors, rho, f, **_):
    """Draw every latent site of ``models.hdp_gd.model`` from the mean-field factors."""
    groups = torch.as_tensor(groups)
    n_groups, group_truncation, truncation = factors.theta.shape
    d = data.shape[1]
    with pyro.plate("global_sticks", truncation - 1, dim=-1):
        pyro.sample("psi", dist.Beta(factors.global_sticks[:, 0], factors.global_sticks[:, 1]))
    with pyro.plate("groups", n_groups, dim=-2):
        with pyro.plate("group_sticks", group_truncation - 1, dim=-1):
            pyro.sample("pi", dist.Beta(factors.group_sticks[..., 0], factors.group_sticks[..., 1]))
        with pyro.plate("group_atoms", group_truncation, dim=-1):
            pyro.sample("w", dist.Categorical(probs=factors.theta))
    with pyro.plate("features", d, dim=-1):
        pyro.sample("saliency", dist.Beta(factors.saliency[:, 0], factors.saliency[:, 1]))
        pyro.sample("alpha_bg", dist.Gamma(factors.alpha_bg[:, 0], factors.alpha_bg[:, 1]))
        pyro.sample("beta_bg", dist.Gamma(factors.beta_bg[:, 0], factors.beta_bg[:, 1]))
        with pyro.plate("atoms", truncation, dim=-2):
            pyro.sample("alpha", dist.Gamma(factors.alpha[..., 0], factors.alpha[..., 1]))
            pyro.sample("beta", dist.Gamma(factors.beta[..., 0], factors.beta[..., 1]))
    with pyro.plate("data", groups.shape[0], dim=-1):
        pyro.sample("z", dist.Categorical(probs=rho))
        pyro.sample("phi", dist.Bernoulli(f).to_event(1))
