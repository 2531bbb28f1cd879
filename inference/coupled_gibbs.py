"""Blocked Gibbs sampler for the truncated coupled latent-DP model (``models.coupled_dp``), after
seed 003 section 4: pure ``init`` / ``sweep`` functions in torch over a ``GibbsState``.

One sweep, every step an exact draw from its full conditional in the truncated model (so the
sampler's stationary law is that model's posterior, which ``tests/test_coupled_gibbs.py``
checks with Geweke's joint-distribution test):

    step 1  labels z_ti (eq. (10)-(11)): given the weights and inheritance, tokens are
            independent, p(z_ti = k) propto D_t(k) f(x_ti; phi_k): one (N, K) table, one draw per
            token. Choosing the source u_ti is implicit: u_ti = s_{z_ti}.
    step 2  inheritance r_tk (eq. (12)): for each atom k in turn and every group at once, the
            odds q_{t s_k} p(z_t | r_tk = 1) : (1 - q_{t s_k}) p(z_t | r_tk = 0), with p(z_t | r_t)
            = prod_k D_t(k)^{m_tk}: an atom that holds a token of group t is kept for sure, an
            unused one is kept less often the more mass it would take from the others.
    step 3  combination coefficients c_t (eq. (13)): only c_t restricted to the active sources A_t
            (W_ts > 0), renormalised, meets the data; by the Dirichlet's aggregation property
            c_{A}/Z ~ Dir(alpha q_A + n_tA), Z = sum_A c ~ Beta(sum_A alpha q, sum_{A^c} alpha q)
            and c_{A^c}/(1 - Z) ~ Dir(alpha q_{A^c}), independently.
    step 4  atom parameters phi_k from their conjugate posteriors (Dirichlet, or Normal-Gamma).
    step 5  owners s_k (eq. (14)), blocked with the atom's inheritance: for each atom in turn,
            every candidate source j is scored by the prior of w_k under Gamma(alpha_j / L, 1)
            and prod_t sum_{r in 0, 1} q_tj^r (1 - q_tj)^{1 - r} p(z_t | s_k = j, r_tk = r)
            (seed 003's eq. (14) with the labels' likelihood, which the truncated model adds, and
            r_.k summed out); then r_.k is drawn given the new owner as in step 2.
    step 6  weights w_k: p(z_t | w) has the normalisers W_ts^{-n_ts}; with auxiliaries
            V_ts ~ Gamma(n_ts, W_ts) (W^{-n} = int V^{n-1} e^{-V W} dV / Gamma(n)),
            w_k | V ~ Gamma(alpha_{s_k} / L + m_k, 1 + sum_t r_tk V_{t s_k}).
    step 7  concentrations alpha_s under Gamma(0.1, 0.1) (section 5.1): a random-walk Metropolis
            step on ln alpha_s, one source at a time (the Dirichlet of c_t couples them).

Sources with q_ts = 0 are never inherited by group t; c_ts is then 0 and the Dirichlet densities
run over the sources with q_ts > 0.
"""

from dataclasses import dataclass, replace

import torch

from bnpzoo.models.coupled_dp import inherited_mass, mixing_weights


@dataclass
class GibbsState:
    alpha: torch.Tensor  # (S,)
    source: torch.Tensor  # (K,) long
    weight: torch.Tensor  # (K,)
    params: dict  # {"phi": (K, V)} or {"mean": (K, D), "precision": (K, D)}
    coeffs: torch.Tensor  # (T, S)
    inherit: torch.Tensor  # (T, K) in {0, 1}
    z: torch.Tensor  # (N,) long


@dataclass(frozen=True)
class Problem:
    """The data and the fixed settings of one sampler."""

    x: torch.Tensor  # (N,) word ids or (N, D) reals
    groups: torch.Tensor  # (N,) long
    q: torch.Tensor  # (T, S)
    atoms_per_source: int
    family: str = "categorical"
    vocab_size: int | None = None
    beta: float = 1.0
    prior_mean: float = 0.0
    prior_kappa: float = 1.0
    prior_shape: float = 1.0
    prior_rate: float = 1.0
    alpha_fixed: bool = False
    alpha_step: float = 0.5

    @property
    def sizes(self):
        return self.q.shape[0], self.q.shape[1], self.q.shape[1] * self.atoms_per_source


# -- pieces shared by the steps -------------------------------------------------------------
def label_counts(problem: Problem, z: torch.Tensor) -> torch.Tensor:
    """m_tk: tokens of group t on atom k, (T, K)."""
    t, _, k = problem.sizes
    counts = torch.zeros(t * k, dtype=problem.q.dtype, device=z.device)
    counts.index_add_(0, problem.groups * k + z, torch.ones_like(z, dtype=counts.dtype))
    return counts.view(t, k)


def group_log_likelihood(counts, coeffs, inherit, weight, source, num_sources):
    """ln p(z_t | .) = sum_k m_tk ln D_t(k) for each group (-inf where a token has no mass)."""
    probs = mixing_weights(coeffs, inherit, weight, source, num_sources)
    terms = torch.where(counts > 0, counts * probs.log(), torch.zeros_like(probs))
    return terms.sum(-1)


def component_log_density(problem: Problem, params: dict) -> torch.Tensor:
    """ln f(x_n; phi_k), (N, K)."""
    if problem.family == "categorical":
        return params["phi"].log().T[problem.x]
    lam, mu = params["precision"], params["mean"]
    x = problem.x
    quad = (x * x) @ lam.T - 2 * x @ (lam * mu).T + (lam * mu * mu).sum(1)
    return 0.5 * (lam.log().sum(1) - quad - x.shape[1] * torch.log(torch.tensor(2 * torch.pi, dtype=x.dtype)))


def dirichlet_log_density(c, concentration, support):
    """ln Dir(c; concentration) over the entries where ``support`` is true (rows)."""
    conc = torch.where(support, concentration, torch.zeros_like(concentration))
    log_c = torch.where(support, c.clamp_min(torch.finfo(c.dtype).tiny).log(), torch.zeros_like(c))
    lgamma_terms = torch.where(support, torch.lgamma(conc.clamp_min(torch.finfo(c.dtype).tiny)), torch.zeros_like(c))
    return torch.lgamma(conc.sum(-1)) - lgamma_terms.sum(-1) + ((conc - 1) * log_c).sum(-1)


def _sample_dirichlet_masked(concentration, mask):
    """Dirichlet draws over the entries where ``mask`` is true, 0 elsewhere (rows with no true
    entry give zeros)."""
    safe = torch.where(mask, concentration, torch.ones_like(concentration))
    g = _floored(torch.distributions.Gamma(safe, torch.ones_like(safe), validate_args=False).sample()) * mask
    total = g.sum(-1, keepdim=True)
    return g / torch.where(total > 0, total, torch.ones_like(total))


# -- the steps -----------------------------------------------------------------------------------
def update_labels(problem: Problem, state: GibbsState) -> GibbsState:  # step 1
    _, s, _ = problem.sizes
    mix = mixing_weights(state.coeffs, state.inherit, state.weight, state.source, s)
    logits = mix.log()[problem.groups] + component_log_density(problem, state.params)
    z = torch.distributions.Categorical(logits=logits, validate_args=False).sample()
    return replace(state, z=z)


def update_inheritance(problem: Problem, state: GibbsState) -> GibbsState:  # step 2
    _, s, k = problem.sizes
    counts = label_counts(problem, state.z)
    inherit = state.inherit.clone()
    off_on = torch.tensor([[0.0], [1.0]], dtype=inherit.dtype, device=inherit.device)
    for atom in range(k):
        candidates = inherit.expand(2, *inherit.shape).clone()
        candidates[:, :, atom] = off_on
        ll = group_log_likelihood(counts, state.coeffs, candidates, state.weight, state.source, s)  # (2, T)
        q = problem.q[:, state.source[atom]]
        inherit[:, atom] = torch.bernoulli(_keep_probability(ll, q))
    return replace(state, inherit=inherit)


def _keep_probability(ll, q):
    """p(r = 1) from the groups' log-likelihoods (2, T) under r = 0, 1 and the prior q (T,)."""
    scores = ll + torch.stack([(1 - q).log(), q.log()])
    keep = torch.sigmoid(scores[1] - scores[0])
    return torch.where(torch.isnan(keep), torch.zeros_like(keep), keep)


def update_coefficients(problem: Problem, state: GibbsState) -> GibbsState:  # step 3
    _, s, _ = problem.sizes
    owner, _, mass = inherited_mass(state.inherit, state.weight, state.source, s)
    per_source = label_counts(problem, state.z) @ owner  # n_ts
    active = mass > 0
    support = problem.q > 0
    conc = state.alpha * problem.q
    inside, outside = active & support, ~active & support
    a = _sample_dirichlet_masked(conc + per_source, inside)
    b = _sample_dirichlet_masked(conc, outside)
    mass_in = torch.where(inside, conc, torch.zeros_like(conc)).sum(-1)
    mass_out = torch.where(outside, conc, torch.zeros_like(conc)).sum(-1)
    g_in = _floored(torch.distributions.Gamma(mass_in.clamp_min(1e-300), 1.0, validate_args=False).sample())
    g_out = torch.where(mass_out > 0, torch.distributions.Gamma(mass_out.clamp_min(1e-300), 1.0, validate_args=False).sample(),
                        torch.zeros_like(mass_out))
    share = (g_in / (g_in + g_out))[:, None]
    coeffs = torch.where(problem.q > 0, _floored(share * a + (1 - share) * b), torch.zeros_like(a))
    return replace(state, coeffs=coeffs / coeffs.sum(-1, keepdim=True))


def update_atoms(problem: Problem, state: GibbsState) -> GibbsState:  # step 4
    _, _, k = problem.sizes
    x, z = problem.x, state.z
    if problem.family == "categorical":
        counts = torch.zeros(k * problem.vocab_size, dtype=problem.q.dtype, device=z.device)
        counts.index_add_(0, z * problem.vocab_size + x, torch.ones_like(z, dtype=counts.dtype))
        conc = problem.beta + counts.view(k, problem.vocab_size)
        return replace(state, params={"phi": torch.distributions.Dirichlet(conc, validate_args=False).sample()})
    d = x.shape[1]
    n = torch.zeros(k, dtype=x.dtype, device=x.device).index_add_(0, z, torch.ones_like(z, dtype=x.dtype))
    sums = torch.zeros(k, d, dtype=x.dtype, device=x.device).index_add_(0, z, x)
    squares = torch.zeros(k, d, dtype=x.dtype, device=x.device).index_add_(0, z, x * x)
    m0, k0 = problem.prior_mean, problem.prior_kappa
    kappa = k0 + n[:, None]
    mean_post = (k0 * m0 + sums) / kappa
    # sum_n (x - xbar)^2 + k0 n / (k0 + n) (xbar - m0)^2 = squares + k0 m0^2 - kappa mean_post^2
    scatter = (squares + k0 * m0**2 - kappa * mean_post**2).clamp_min(0)
    shape = problem.prior_shape + 0.5 * n[:, None]
    rate = problem.prior_rate + 0.5 * scatter
    precision = torch.distributions.Gamma(shape.expand(k, d), rate, validate_args=False).sample()
    mean = mean_post + (kappa * precision).rsqrt() * torch.randn_like(mean_post)
    return replace(state, params={"mean": mean, "precision": precision})


def update_sources(problem: Problem, state: GibbsState) -> GibbsState:  # step 5
    """Blocked: the owner s_k is drawn with atom k's inheritance r_.k summed out, then r_.k
    given the new owner, so an atom can change source and inheritance pattern together."""
    _, s, k = problem.sizes
    counts = label_counts(problem, state.z)
    source, inherit = state.source.clone(), state.inherit.clone()
    shape = state.alpha / problem.atoms_per_source
    off_on = torch.tensor([[0.0], [1.0]], dtype=inherit.dtype, device=inherit.device)
    prior = torch.stack([(1 - problem.q).log(), problem.q.log()]).permute(2, 0, 1)  # ln p(r | s = j), (S, 2, T)
    for atom in range(k):
        sources = source.expand(s, 2, k).clone()
        sources[:, :, atom] = torch.arange(s, device=source.device)[:, None]
        candidates = inherit.expand(s, 2, *inherit.shape).clone()
        candidates[:, :, :, atom] = off_on
        ll = group_log_likelihood(counts, state.coeffs, candidates, state.weight, sources, s)  # (S, 2, T)
        weight_prior = torch.distributions.Gamma(shape, 1.0, validate_args=False).log_prob(state.weight[atom])
        scores = torch.logsumexp(ll + prior, 1).sum(-1) + weight_prior  # (S,)
        if not torch.isfinite(scores).any():  # (a floored weight can leave every candidate at -inf)
            continue
        owner = torch.distributions.Categorical(logits=scores, validate_args=False).sample()
        source[atom] = owner
        inherit[:, atom] = torch.bernoulli(_keep_probability(ll[owner], problem.q[:, owner]))
    return replace(state, source=source, inherit=inherit)


def update_weights(problem: Problem, state: GibbsState) -> GibbsState:  # step 6
    _, s, _ = problem.sizes
    counts = label_counts(problem, state.z)
    owner, effective, mass = inherited_mass(state.inherit, state.weight, state.source, s)  # W_ts
    per_source = counts @ owner  # n_ts
    aux = torch.where(per_source > 0,
                      torch.distributions.Gamma(per_source.clamp_min(1.0), mass.clamp_min(1e-300), validate_args=False).sample(),
                      torch.zeros_like(mass))
    rate = 1 + (effective * aux[:, state.source]).sum(0)
    shape = state.alpha[state.source] / problem.atoms_per_source + counts.sum(0)
    weight = torch.distributions.Gamma(shape, rate, validate_args=False).sample()
    return replace(state, weight=_floored(weight))


def _floored(draws):
    """Gamma draws with a small shape (alpha / L, alpha q_ts) underflow to exactly 0, where the
    densities are infinite and a source's share vanishes; they are kept at the smallest normal
    number instead (a change far below anything observable)."""
    return draws.clamp_min(torch.finfo(draws.dtype).tiny)


def alpha_log_density(problem: Problem, state: GibbsState, alpha: torch.Tensor) -> torch.Tensor:
    """ln p(alpha) + ln p(w | alpha, s) + ln p(c | alpha), up to a constant."""
    prior = torch.distributions.Gamma(0.1, 0.1, validate_args=False).log_prob(alpha).sum()
    weights = torch.distributions.Gamma(alpha[state.source] / problem.atoms_per_source, 1.0,
                                         validate_args=False).log_prob(state.weight).sum()
    coeffs = dirichlet_log_density(state.coeffs, alpha * problem.q, problem.q > 0).sum()
    return prior + weights + coeffs


def update_alpha(problem: Problem, state: GibbsState) -> GibbsState:  # step 7
    if problem.alpha_fixed:
        return state
    alpha = state.alpha.clone()
    for j in range(alpha.shape[0]):
        proposal = alpha.clone()
        proposal[j] = alpha[j] * torch.exp(problem.alpha_step * torch.randn(()))
        # the log-normal walk's Jacobian: q(a | a') / q(a' | a) = a' / a
        log_ratio = (alpha_log_density(problem, state, proposal) - alpha_log_density(problem, state, alpha)
                     + proposal[j].log() - alpha[j].log())
        if torch.rand(()).log() < log_ratio:
            alpha = proposal
    return replace(state, alpha=alpha)


STEPS = (update_labels, update_inheritance, update_coefficients, update_atoms, update_sources, update_weights,
         update_alpha)


def sweep(problem: Problem, state: GibbsState) -> GibbsState:
    """One pass of steps 1-7."""
    for step in STEPS:
        state = step(problem, state)
    return state


def state_from_trace(trace, family: str, alpha=None) -> GibbsState:
    """The latent values of a ``models.coupled_dp`` trace as a sampler state (``alpha``: the
    value the program was given, when it did not sample one)."""
    value = lambda name: trace.nodes[name]["value"]  # noqa: E731
    params = {"phi": value("phi")} if family == "categorical" else {"mean": value("mean"),
                                                                   "precision": value("precision")}
    q = trace.nodes["_INPUT"]["kwargs"]["q"] if "_INPUT" in trace.nodes else None
    coeffs = _floored(value("coeffs").squeeze(-2))
    if q is not None:
        coeffs = torch.where(q > 0, coeffs, torch.zeros_like(coeffs))
    coeffs = coeffs / coeffs.sum(-1, keepdim=True)
    if "alpha" in trace.nodes:
        alpha = value("alpha")
    else:
        alpha = torch.as_tensor(alpha, dtype=coeffs.dtype, device=coeffs.device).expand(coeffs.shape[-1]).clone()
    return GibbsState(alpha=alpha, source=value("source"), weight=_floored(value("weight")), params=params,
                      coeffs=coeffs, inherit=value("inherit"), z=value("z"))
