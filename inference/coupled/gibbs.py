"""Blocked Gibbs sampler for the truncated coupled latent-DP model (``models.coupled_dp``), after
[Coupled-DP] section 4: pure step functions over a ``GibbsState``; the two sequential loops run
compiled (``inference.coupled.compiled``), the rest is vectorised torch.

One sweep, every step an exact draw from its full conditional in the truncated model (so the
sampler's stationary law is that model's posterior, which ``tests/test_coupled_gibbs.py``
checks with Geweke's joint-distribution test):

    step 1  labels z_ti (eq. (10)-(11)). Words: the topics phi are collapsed (Dirichlet(beta)
            integrated out) and tokens are redrawn one at a time, p(z_ti = k) propto D_t(k)
            (n_kw + beta) / (n_k + V beta) without token ti. Or blocked, on (group, word) cells
            (``Problem.multiplicity``, ``cells``): topics drawn, phi_k ~ Dir(beta + n_k.), then given
            them a cell's tokens are independent and alike, so its labels are one Multinomial(n_c,
            p(k) propto D_t(k) phi_k(w)) count vector. No other step reads phi, so drawing it and
            dropping it is a data-augmentation step for the same phi-collapsed posterior, at a
            cost per cell, not per token (faster a sweep where tokens repeat, though its log joint
            decorrelates about 3x slower, ``benchmarks/reports/speed.md``;
            ``compiled.blocked_labels``, and on cells the whole
            sweep runs compiled, ``cells_sweep``). Gaussian: given the
            weights, inheritance and atoms, tokens are independent: one (N, K) table, one draw per
            token.
            Choosing the source u_ti is implicit: u_ti = s_{z_ti}.
    step 2  inheritance r_tk (eq. (12)): for each atom k in turn and every group at once, the
            odds q_{t s_k} p(z_t | r_tk = 1) : (1 - q_{t s_k}) p(z_t | r_tk = 0), with p(z_t | r_t)
            = prod_k D_t(k)^{m_tk}: an atom that holds a token of group t is kept for sure, an
            unused one is kept less often the more mass it would take from the others.
    step 3  combination coefficients c_t (eq. (13)): only c_t restricted to the active sources A_t
            (W_ts > 0), renormalised, meets the data; by the Dirichlet's aggregation property
            c_{A}/Z ~ Dir(alpha q_A + n_tA), Z = sum_A c ~ Beta(sum_A alpha q, sum_{A^c} alpha q)
            and c_{A^c}/(1 - Z) ~ Dir(alpha q_{A^c}), independently. Words: before c_t is drawn,
            split-merge moves (``compiled.split_merge``) carry a group's tokens between two
            atoms all at once, with c_t integrated out, which token-by-token step 1 cannot do
            (emptying an atom passes through half-moved states whose topics fit neither half):
                p(z_t | w, r, s) = prod_{s in A_t} G(alpha_s q_ts + n_ts) / G(alpha_s q_ts)
                                   x G(sum_A alpha q) / G(sum_A alpha q + n_t) x prod_k (w_k / W_{t s_k})^{m_tk},
            the Dirichlet-multinomial of c_t over the active sources times the within-source
            shares, times p(x | z) with the topics collapsed. A move picks group t, an atom a
            that holds some of its tokens and another atom b it reaches (probability
            (1[a used] + 1[b used]) / (atoms used x (atoms reached - 1)) for the pair), and
            proposes, independently of how the pair's tokens lie now, either all of them on a
            (1/4), all on b (1/4), or a sequential allocation (1/2): word by word, from the
            pair's most frequent word down, each token of word w goes to a with the probability
            p_w one token would given the words placed before it (so a Binomial(c_w, p_w) count,
            the tokens a uniform subset). Metropolis-Hastings accepts with the ratio of targets,
            of proposals and of pair probabilities, so the moves keep p(z | w, r, s).
    step 4  atom parameters phi_k from their conjugate posteriors (Gaussian: Normal-Gamma; words
            need none, their topics are collapsed).
    step 5  owners s_k (eq. (14)), blocked with the atom's inheritance: for each atom in turn,
            every candidate source j is scored by the prior of w_k under Gamma(alpha_j / L, 1)
            and prod_t sum_{r in 0, 1} q_tj^r (1 - q_tj)^{1 - r} p(z_t | s_k = j, r_tk = r)
            ([Coupled-DP]'s eq. (14) with the labels' likelihood, which the truncated model adds, and
            r_.k summed out); then r_.k is drawn given the new owner as in step 2. On cells, steps
            2 and 5 integrate c out and step 3 follows them (``inference.coupled.cells``).
    step 6  weights w_k: p(z_t | w) has the normalisers W_ts^{-n_ts}; with auxiliaries
            V_ts ~ Gamma(n_ts, W_ts) (W^{-n} = int V^{n-1} e^{-V W} dV / Gamma(n)),
            w_k | V ~ Gamma(alpha_{s_k} / L + m_k, 1 + sum_t r_tk V_{t s_k}); then, V dropped, each
            latent DP's total mass is redrawn from its full conditional, its prior (``cells._draw_weights``).
            Words: before w is drawn, split-merge moves as in step 3, with w integrated out given V:
            each atom gives G(a_k + m_k) (1 + R_k)^-(a_k + m_k), each source V^(n_ts - 1) / G(n_ts),
            and n_ts may not cross 0 (V_ts = 0 exactly when n_ts = 0).
    step 7  concentrations alpha_s under Gamma(0.1, 0.1) (section 5.1, or another Gamma), drawn inside
            step 6, after V and the moves and before w, with w integrated out given V:
                p(alpha | V, z, s, c)  propto  p(alpha) prod_t Dir(c_t; alpha q_t)
                                               x prod_k G(a_k + m_k) / G(a_k) (1 + R_k)^(-a_k),
            a_k = alpha_{s_k} / L, R_k = sum_t r_tk V_{t s_k}; rounds of a random-walk Metropolis
            step on ln alpha_s, one source at a time (the Dirichlet of c_t couples them;
            ``compiled.alpha_given_auxiliaries``). (alpha, w) | V is then one block. Drawn
            given w (as it was), the move scored Gamma(alpha / L, 1) densities at unused atoms'
            weights, about U^(L / alpha), which tie alpha to the value that drew them, and at
            weights floored to e^-708 (``_floored``), which are no draws of that Gamma at all.
            alpha still mixes slowly: V_ts carries the scale of the weights group t inherits,
            which can be tiny. On lee_background (s-ldp with documents, 75 topics) alpha stays
            near 0.3 from its start at the prior median; started at 1 it rises to about 23 and
            the pool fills (``kernel`` starts it at the median).

The document level (``Problem.documents``, ``models.coupled_dp``): theta_d ~ Dir(b D_t) for each
document d of group t, and z_di ~ theta_d. Gibbs by direct assignment (Teh et al. 2006, sec. 5.3)
with theta_d integrated out, p(z_d | D_t) = G(b) / G(b + n_d) prod_k G(b D_t(k) + n_dk) / G(b D_t(k)).
Since G(a + n) / G(a) = sum_m |s(n, m)| a^m (unsigned Stirling numbers of the first kind), the
auxiliary table counts m_dk, p(m_dk = m | n_dk, D_t) propto |s(n_dk, m)| (b D_t(k))^m, give

    p(z, m | D)  propto  prod_dk |s(n_dk, m_dk)| b^m_dk D_t(k)^m_dk,

in which D_t enters exactly as it does without documents, with m_tk = sum_{d in t} m_dk in place
of the labels per group. So steps 2-7 run unchanged on the tables (``mixture_counts``), and step 1
draws (z, m) as one block: each token from
    p(z_di = k | .)  propto  (n_dk^-di + b D_t(k)) (n_kw^-di + beta) / (n_k^-di + V beta)
(``compiled.document_labels``), then m given z by Antoniak's scheme (``draw_tables``: the
j-th token of atom k in document d, j = 0, 1, ..., opens a table with probability b D_t(k) /
(b D_t(k) + j)). The split-merge moves are off: they move tokens under the group-level
likelihood. As b grows every token opens a table (m = n) and theta_d -> D_t: the model without
documents.

In a sweep the labels, the block moves and the tables run as one compiled call on one count of z
(``approximate.sweep_share``). With ``Problem.parallel`` step 1 is partially collapsed instead:
the topics drawn, then the documents swept in parallel, on threads and across processes
(``inference.coupled.parallel``, derived there). With ``label_step="uncollapsed"`` each
document's proportions theta_d are drawn too, and every token is drawn at once, in torch where the
tokens lie, a GPU's step (``inference.coupled.uncollapsed``, derived there).

Sources with q_ts = 0 are never inherited by group t; c_ts is then 0 and the Dirichlet densities
run over the sources with q_ts > 0. Steps 1 (words, but the uncollapsed step), 2 and 5 run on the CPU; the others run
where the data lie, except on cells, where the whole sweep runs compiled on the CPU, and for words
without token moves (the document level, or no split-merge moves), where steps 2, 3, 5 and 6 see
the labels only through the counts m_tk and run as one compiled call on them (``counts_sweep``:
about twice as fast as torch's small calls, ``benchmarks/reports/speed.md``).
"""

import math
from dataclasses import dataclass, field, replace
from functools import cached_property

import numba
import numpy as np
import torch

from bnpzoo.inference.coupled import approximate as approximate_steps, cells as cell_steps, compiled as numba_steps
from bnpzoo.inference.coupled import parallel as parallel_steps
from bnpzoo.inference.coupled import uncollapsed as uncollapsed_steps
from bnpzoo.models.coupled_dp import inherited_mass, mixing_weights


@dataclass
class GibbsState:
    alpha: torch.Tensor  # (S,)
    source: torch.Tensor  # (K,) long
    weight: torch.Tensor  # (K,)
    params: dict  # {} (words: topics collapsed) or {"mean": (K, D), "precision": (K, D)}
    coeffs: torch.Tensor  # (T, S)
    inherit: torch.Tensor  # (T, K) in {0, 1}
    z: torch.Tensor  # (N,) long
    tables: torch.Tensor | None = None  # (T, K) m_tk, the document level's table counts per group
    doc_concentration: torch.Tensor | None = None  # b, where it is sampled (``Problem.doc_concentration`` None)
    # words, token by token: the kept sweeps' n_kw summed over each atom's current life, and the
    # number of those sweeps (``average_topics``, ``topic_word``)
    topic_sums: torch.Tensor | None = None  # (K, V)
    topic_lives: torch.Tensor | None = None  # (K,) long


@dataclass(frozen=True)
class Problem:
    """The data and the fixed settings of one sampler; ``alpha`` fixes the concentrations (None:
    sampled under Gamma(alpha_prior))."""

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
    alpha: float | None = None
    alpha_prior: tuple = (0.1, 0.1)  # Gamma(shape, rate) of each alpha_s
    alpha_step: float = 0.5
    split_merge_moves: int = 1  # split-merge moves per group in each of steps 3 and 6 (words; 0: none)
    # words as (group, word) cells (``cells``): x and groups hold one entry per cell, multiplicity
    # its tokens, and the labels z are (C, K) counts; step 1 is then blocked
    multiplicity: torch.Tensor | None = None
    # the document level: the document of each token (0..D-1, tokens sorted by document), and b
    # (None: sampled under Gamma(doc_concentration_prior), ``update_doc_concentration``)
    documents: torch.Tensor | None = None
    doc_concentration: float | None = 1.0
    doc_concentration_prior: tuple = (1.0, 1.0)
    # words' step 1: "collapsed" (token by token, the topics integrated out), "parallel" (the topics
    # drawn, documents in parallel, ``parallel``) or "uncollapsed" (the topics and each document's
    # proportions drawn, in torch on the data's device, ``uncollapsed``); and this process's share
    # of a chain over several (``parallel.Ranks``; x, groups, documents its own)
    label_step: "LabelStep" = "collapsed"  # a name of ``LABEL_STEPS`` becomes its record
    ranks: parallel_steps.Ranks | None = None

    def __post_init__(self):
        if isinstance(self.label_step, str):
            object.__setattr__(self, "label_step", label_step(self.label_step))

    @property
    def parallel(self) -> bool:
        return self.label_step.by_blocks

    @property
    def on_host(self) -> bool:
        """Whether the labels' statistics come from compiled loops over the host's token arrays (one
        process, words on the CPU); else from count tables in torch, where the tokens lie."""
        return self.ranks is None and not self.label_step.on_device

    @property
    def sizes(self):
        return self.q.shape[0], self.q.shape[1], self.q.shape[1] * self.atoms_per_source

    @property
    def model_kwargs(self) -> dict:
        """The keyword arguments of ``models.coupled_dp.model`` for this problem."""
        kwargs = dict(groups=self.groups, q=self.q, atoms_per_source=self.atoms_per_source, family=self.family,
                      alpha=self.alpha, alpha_prior=self.alpha_prior)
        if self.documents is not None:
            kwargs.update(documents=self.documents, doc_concentration=self.doc_concentration,
                          doc_concentration_prior=self.doc_concentration_prior)
        if self.family == "categorical":
            return dict(kwargs, vocab_size=self.vocab_size, beta=self.beta)
        return dict(kwargs, prior_mean=self.prior_mean, prior_kappa=self.prior_kappa, prior_shape=self.prior_shape,
                    prior_rate=self.prior_rate, dim=self.x.shape[1])

    @cached_property
    def host_arrays(self) -> tuple:
        """(x, groups) as int64 numpy arrays for the compiled label step, converted once (words)."""
        return _numpy(self.x, np.int64, copy=False), _numpy(self.groups, np.int64, copy=False)

    @property
    def token_moves(self) -> int:
        """Split-merge moves per group and step: words by token only (the Gaussian atoms are not
        collapsed; the moves carry tokens, not cell counts)."""
        words_by_token = (self.family == "categorical" and self.multiplicity is None and self.documents is None
                          and self.label_step.token_moves)
        return self.split_merge_moves if words_by_token else 0

    @cached_property
    def document_starts(self) -> np.ndarray:
        """Where each document's tokens start, and N last (the document level; without it, for the
        parallel step, every token is a document of its own)."""
        if self.documents is None:
            return np.arange(len(self.x) + 1, dtype=np.int64)
        documents = _numpy(self.documents, np.int64)
        return np.searchsorted(documents, np.arange(documents[-1] + 2)).astype(np.int64)

    @cached_property
    def device_document_starts(self) -> tuple:
        """(``document_starts`` on the tokens' device, the chunks of ``uncollapsed``), built once."""
        starts = self.document_starts
        return torch.from_numpy(starts).to(self.x.device), uncollapsed_steps.chunks(starts, self.x.device)

    @cached_property
    def document_blocks(self) -> np.ndarray:
        """The blocks of documents that ``parallel.sweep_documents`` shares among threads."""
        return parallel_steps.document_blocks(self.document_starts)

    @cached_property
    def document_shares(self) -> np.ndarray:
        """The shares of documents, and their rounds, that ``approximate.sweep_shares`` sweeps
        (``approximate.share_rounds``): one a thread where the label step shares the documents (as many
        as their copies of the counts fit in memory, ``approximate.affordable_shares``), else one (the
        collapsed step)."""
        shares = 1
        if self.label_step.shares_documents:
            shares = min(parallel_steps.threads(), approximate_steps.affordable_shares(int(self.vocab_size),
                                                                                       self.sizes[2]))
        return approximate_steps.share_rounds(self.document_starts, shares)

    @cached_property
    def count_buffers(self) -> tuple:
        """(n_kw word-major (V, K) int32, n_k (K,)): the buffers into which step 1 counts the labels
        every sweep (``compiled.count_words``), allocated once; int32 (exact to 2^31 tokens a count):
        half float64's memory, and the label scan reads less (fine_foods' sweeps 13 % faster)."""
        _, _, k = self.sizes
        return np.empty((int(self.vocab_size), k), dtype=np.int32), np.empty(k)

    @cached_property
    def share_copies(self) -> tuple:
        """((shares, V, K), (shares, K)): each share's copy of the counts (``approximate.sweep_shares``),
        allocated once, written over every sweep."""
        _, _, k = self.sizes
        shares = len(self.document_shares)
        return np.empty((shares, int(self.vocab_size), k), dtype=np.int32), np.empty((shares, k))

    @cached_property
    def last_word_counts(self) -> list:
        """[labels z, their version, n_kw (K, V)]: ``word_counts``' last answer, kept."""
        return [None, -1, None]

    @cached_property
    def document_lengths(self) -> torch.Tensor:
        """n_d, the tokens of each document (the document level; every document has some), of the
        whole corpus where the chain runs on several processes."""
        if self.ranks is not None:
            return self.ranks.document_lengths
        return torch.from_numpy(np.diff(self.document_starts))

    def sum(self, *tensors) -> list:
        """Sums over documents or tokens: over every process's where the chain runs on several."""
        return list(tensors) if self.ranks is None else self.ranks.sum(*tensors)

    @cached_property
    def group_order(self) -> tuple:
        """(tokens sorted by group, where each group starts and, last, N), for the split-merge moves."""
        groups = self.host_arrays[1]
        starts = np.searchsorted(groups[order := np.argsort(groups, kind="stable")], np.arange(self.sizes[0] + 1))
        return order.astype(np.int64), starts.astype(np.int64)

    @cached_property
    def cell_index(self) -> tuple:
        """Cells: the flat (group, atom) and (word, atom) position of every entry of the (C, K)
        label counts, for ``label_counts`` and ``word_counts``, built once."""
        atoms = torch.arange(self.sizes[2], device=self.x.device)
        return tuple((index[:, None] * len(atoms) + atoms).flatten() for index in (self.groups, self.x))


def cells(x: torch.Tensor, groups: torch.Tensor, vocab_size: int) -> tuple:
    """Tokens as (group, word) cells: (word of each cell, its group, its tokens), cells sorted
    by group then word."""
    keys, multiplicity = torch.unique(groups * vocab_size + x, return_counts=True)
    return keys % vocab_size, keys // vocab_size, multiplicity


# -- pieces shared by the steps -------------------------------------------------------------
def _sum_rows(table: torch.Tensor, flat_index: torch.Tensor, size: int) -> torch.Tensor:
    """(size, K): the rows of ``table`` (C, K) summed by one weighted bincount over their flat
    positions (``Problem.cell_index``; index_add over rows is many times slower on CPU)."""
    k = table.shape[1]
    return torch.bincount(flat_index, weights=table.flatten(), minlength=size * k).view(size, k).to(table.dtype)


def label_counts(problem: Problem, z: torch.Tensor) -> torch.Tensor:
    """m_tk: tokens of group t on atom k, (T, K)."""
    t, _, k = problem.sizes
    if problem.multiplicity is not None:
        return _sum_rows(z, problem.cell_index[0], t)
    counts = torch.bincount(problem.groups * k + z, minlength=t * k).to(problem.q.dtype)  # (a histogram on CUDA)
    return problem.sum(counts.view(t, k))[0].to(problem.q.device)  # beside the coupled latents


def mixture_counts(problem: Problem, state: GibbsState) -> torch.Tensor:
    """(T, K) the counts through which the labels see D_t, p(labels | D) propto prod_tk D_t(k)^count:
    the tables m_tk with the document level, the labels m_tk otherwise."""
    return state.tables if problem.documents is not None else label_counts(problem, state.z)


def doc_concentration(problem: Problem, state: GibbsState) -> float:
    """b: the problem's, or the state's where it is sampled; 1 without the document level, where
    every token is a document of its own (the parallel and uncollapsed label steps)."""
    if problem.documents is None:
        return 1.0
    return float(problem.doc_concentration if problem.doc_concentration is not None else state.doc_concentration)


def draw_tables(problem: Problem, z: torch.Tensor, mixing: torch.Tensor, b: float) -> torch.Tensor:
    """m_tk = sum over group t's documents of m_dk, each m_dk drawn by Antoniak's scheme from
    p(m | n_dk, b D_t(k)) propto |s(n_dk, m)| (b D_t(k))^m: the j-th token (j = 0, 1, ...) of
    atom k in document d opens a table with probability b D_t(k) / (b D_t(k) + j)
    (``compiled.document_tables``; ``uncollapsed.draw_tables`` where the tokens' statistics are torch's)."""
    if not problem.on_host:
        starts, bounds = problem.device_document_starts
        tables = uncollapsed_steps.draw_tables(problem.documents, problem.groups, bounds, z, mixing.to(z.device), b)
        return problem.sum(tables)[0].to(mixing)
    tables = numba_steps.document_tables(problem.host_arrays[1], problem.document_starts, _numpy(z, np.int64),
                                           _numpy(mixing), b, _numpy(torch.rand(len(z), dtype=torch.float64)))
    return torch.from_numpy(tables).to(mixing)


def gaussian_log_density(x: torch.Tensor, params: dict) -> torch.Tensor:
    """ln N(x_n; mean_k, diag(1 / precision_k)), (N, K), through matrix products."""
    lam, mu = params["precision"], params["mean"]
    quad = (x * x) @ lam.T - 2 * x @ (lam * mu).T + (lam * mu * mu).sum(1)
    return 0.5 * (lam.log().sum(1) - quad - x.shape[1] * torch.log(torch.tensor(2 * torch.pi, dtype=x.dtype)))


def word_counts(problem: Problem, z: torch.Tensor) -> torch.Tensor:
    """n_kw: tokens of word w on atom k, (K, V), not to be written to: the table of the labels z
    last asked for is kept (``Problem.last_word_counts``), as a kept sweep's topic average and log
    joint and the next sweep's label step ask for the same labels' (each an all-reduce of the table
    across processes: three a kept sweep took half of a torchrun fit's time on lee_background)."""
    memo = problem.last_word_counts
    if memo[0] is z and memo[1] == z._version:  # the same labels, not changed in place since
        return memo[2]
    memo[:] = [None, -1, None]  # the old table let go before the new one is made (one V x K table at a time)
    _, _, k = problem.sizes
    if problem.multiplicity is not None:
        table = _sum_rows(z, problem.cell_index[1], problem.vocab_size).T
    else:
        counts = torch.bincount(z * problem.vocab_size + problem.x, minlength=k * problem.vocab_size)
        table = problem.sum(counts.to(problem.q.dtype).view(k, problem.vocab_size))[0]
    memo[:] = [z, z._version, table]
    return table


def average_topics(problem: Problem, state: GibbsState) -> GibbsState:
    """``state`` with this sweep's word counts added to its topic sums (started at zero on the first
    call; words token by token only, other states are returned as they are)."""
    if problem.family != "categorical" or problem.multiplicity is not None:
        return state
    if state.topic_sums is None:
        _, _, k = problem.sizes
        state = replace(state, topic_sums=torch.zeros(k, problem.vocab_size, dtype=torch.float64),
                        topic_lives=torch.zeros(k, dtype=torch.int64))
    if problem.on_host:
        numba_steps.accumulate_topics(problem.host_arrays[0], _numpy(state.z, np.int64), state.topic_sums.numpy(),
                                      state.topic_lives.numpy())
        return state
    counts = word_counts(problem, state.z).cpu()  # every process's tokens: their sum, as accumulate_topics keeps it
    alive = counts.sum(1) > 0
    lives = torch.where(alive, state.topic_lives + 1, torch.zeros_like(state.topic_lives))
    return replace(state, topic_sums=torch.where(alive[:, None], state.topic_sums, 0.0) + counts, topic_lives=lives)


def topic_word(problem: Problem, state: GibbsState) -> torch.Tensor:
    """E[phi | x], (K, V): (n_kw + beta) / (n_k + V beta) averaged over the kept sweeps of each
    atom's current life where the chain kept them (``average_topics``; a Rao-Blackwellised
    posterior mean: ``benchmarks/reports/coupled_defaults.md``), else from the state's labels
    alone."""
    counts = word_counts(problem, state.z)
    if state.topic_sums is not None:
        lives = state.topic_lives.to(counts)[:, None]  # (the sums live on the CPU, beside the compiled steps)
        counts = torch.where(lives > 0, state.topic_sums.to(counts) / lives.clamp(min=1), counts)
    counts = counts + problem.beta
    return counts / counts.sum(1, keepdim=True)


def collapsed_word_log_likelihood(problem: Problem, z: torch.Tensor) -> torch.Tensor:
    """ln p(x | z) with every topic's Dirichlet(beta) integrated out:
    sum_k [ln G(V beta) - ln G(n_k + V beta) + sum_w (ln G(n_kw + beta) - ln G(beta))]."""
    _, _, k = problem.sizes
    dtype = problem.q.dtype
    if problem.multiplicity is None and problem.on_host:  # tokens: compiled, one pass (``compiled``)
        value = numba_steps.collapsed_log_likelihood(problem.host_arrays[0], _numpy(z, np.int64),
                                                       problem.vocab_size, k, float(problem.beta))
        return torch.tensor(value, dtype=dtype, device=problem.q.device)
    table = word_counts(problem, z)  # cells: the count table itself
    used, totals = table[table > 0], table.sum(1)
    beta, vbeta = torch.tensor(problem.beta, dtype=dtype), torch.tensor(problem.vocab_size * problem.beta, dtype=dtype)
    value = (torch.lgamma(vbeta) * k - torch.lgamma(totals + vbeta).sum()
             + (torch.lgamma(used.to(dtype) + beta) - torch.lgamma(beta)).sum())
    return value.to(problem.q.device)  # beside the coupled latents, wherever the tokens lie


def label_log_likelihood(problem: Problem, state: GibbsState) -> torch.Tensor:
    """ln p(z | weights, inheritance, coefficients) = sum_tk m_tk ln D_t(k); with the document
    level, theta_d integrated out: sum_d [ln G(b) - ln G(b + n_d) + sum_k (ln G(b D_t(k) + n_dk) -
    ln G(b D_t(k)))]."""
    mix = mixing_weights(state.coeffs, state.inherit, state.weight, state.source, problem.sizes[1])
    if problem.documents is not None and not problem.on_host:
        starts, _ = problem.device_document_starts
        value = uncollapsed_steps.document_log_likelihood(problem.documents, problem.groups, starts, state.z,
                                                          mix.to(state.z.device), doc_concentration(problem, state))
        return problem.sum(value)[0].to(mix)
    if problem.documents is not None:
        value = numba_steps.document_log_likelihood(problem.host_arrays[1], problem.document_starts,
                                                      _numpy(state.z, np.int64), _numpy(mix),
                                                      doc_concentration(problem, state))
        return problem.sum(torch.tensor(value, dtype=mix.dtype, device=mix.device))[0]
    counts = label_counts(problem, state.z)
    return torch.where(counts > 0, counts * mix.log(), torch.zeros_like(mix)).sum()


def data_log_likelihood(problem: Problem, state: GibbsState) -> torch.Tensor:
    """ln p(x | z, atoms); words: ln p(x | z) with the topics integrated out."""
    if problem.family == "categorical":
        return collapsed_word_log_likelihood(problem, state.z)
    lam, mu = state.params["precision"][state.z], state.params["mean"][state.z]
    return torch.distributions.Normal(mu, lam.rsqrt(), validate_args=False).log_prob(problem.x).sum()


def prior_labels(problem: Problem, state: GibbsState) -> GibbsState:
    """z_ti ~ D_t, ignoring the data (a starting point for step 1)."""
    _, s, _ = problem.sizes
    mix = mixing_weights(state.coeffs, state.inherit, state.weight, state.source, s)
    if problem.multiplicity is not None:
        return replace(state, z=_multinomial_counts(problem.multiplicity, mix[problem.groups]))
    if problem.parallel:  # by blocks: a chain's start in any number of processes
        z = np.empty(len(problem.groups), dtype=np.int64)
        parallel_steps.prior_document_labels(problem.host_arrays[1], problem.document_starts, problem.document_blocks,
                                             _numpy(mix), z, _block_seed(problem))
        return replace(state, z=torch.from_numpy(z).to(problem.groups.device))  # (tables come with step 1)
    z = torch.empty_like(problem.groups)
    for t in range(mix.shape[0]):
        members = problem.groups == t
        if members.any():
            z[members] = torch.multinomial(mix[t].to(z.device), int(members.sum()), replacement=True)
    return replace(state, z=z) if problem.documents is None else with_tables(problem, replace(state, z=z))


def _numpy(tensor, dtype=np.float64, copy=True):
    """A numpy copy the compiled steps may change in place; ``copy=False``: the tensor's own memory
    where its dtype and layout allow (read-only use: the token arrays of a large corpus)."""
    return np.ascontiguousarray(tensor.detach().cpu().numpy().astype(dtype, copy=copy))


def _multinomial_counts(totals: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
    """One Multinomial(totals[c], probs[c] normalised) count vector per row, (C, K), drawn by
    numpy's generator seeded from torch's (so runs repeat under ``pyro.set_rng_seed``)."""
    p = _numpy(probs)
    rng = np.random.default_rng(int(torch.randint(2**63 - 1, ())))
    draws = rng.multinomial(_numpy(totals, np.int64), p / p.sum(1, keepdims=True))
    return torch.from_numpy(draws.astype(np.float64)).to(probs)


# -- the steps -----------------------------------------------------------------------------------
def update_labels(problem: Problem, state: GibbsState) -> GibbsState:  # step 1
    _, s, _ = problem.sizes
    mix = mixing_weights(state.coeffs, state.inherit, state.weight, state.source, s)
    if problem.multiplicity is not None:  # blocked, on cells: phi drawn, then each cell's counts
        z = _numpy(state.z)
        numba_steps.blocked_labels(*problem.host_arrays, z, _numpy(mix), problem.vocab_size, float(problem.beta),
                                     int(torch.randint(2**31 - 1, ())))
        return replace(state, z=torch.from_numpy(z).to(state.z))
    if problem.label_step.draw is not None:  # topics drawn, then documents (or, without them, tokens) in parallel
        return update_doc_concentration(problem, problem.label_step.draw(problem, state, mix))
    if problem.documents is not None:  # theta_d collapsed, then the tables: one blocked step for (z, m)
        return update_doc_concentration(problem, _collapsed_document_labels(problem, state, mix))
    if problem.family == "categorical":
        z = _numpy(state.z, np.int64)
        # D_t(k) below 1e-30 of the group's largest are flushed to 0: even K of them would not
        # move the running totals at float64's precision, and under a small alpha they run down
        # to subnormal numbers, whose arithmetic is many times slower (benchmarks/reports/speed.md)
        mix = torch.where(mix < 1e-30 * mix.amax(-1, keepdim=True), torch.zeros_like(mix), mix)
        numba_steps.collapsed_labels(*problem.host_arrays, z, _numpy(mix), problem.vocab_size, float(problem.beta),
                                       _numpy(torch.rand(z.shape[0], dtype=torch.float64)))
        return replace(state, z=torch.from_numpy(z).to(state.z.device))
    logits = mix.log()[problem.groups] + gaussian_log_density(problem.x, state.params)
    z = torch.distributions.Categorical(logits=logits, validate_args=False).sample()
    return replace(state, z=z)


def _parallel_document_labels(problem: Problem, state: GibbsState, mix: torch.Tensor) -> GibbsState:
    """Step 1, partially collapsed (``parallel``): the topics drawn given the labels, then every
    document's labels, block moves and tables given them, in parallel. Without the document level,
    every token is a document of its own with b = 1: p(z = k) propto D_t(k) phi_k(w), and every
    token opens a table (the tables are the labels' counts, which the state does not keep)."""
    t, _, k = problem.sizes
    x, groups = problem.host_arrays
    z = _numpy(state.z, np.int64)
    phi = parallel_steps.draw_topics(word_counts(problem, state.z).cpu().T.contiguous(), problem.beta).numpy()
    mixing, b = _numpy(mix), doc_concentration(problem, state)
    # D_t(k) below 1e-30 of the group's largest flushed to 0 in the prior bucket (``update_labels``)
    prior = b * np.where(mixing < 1e-30 * mixing.max(1, keepdims=True), 0.0, mixing)
    opened = np.empty(len(z), dtype=np.bool_)
    numba.set_num_threads(parallel_steps.threads())
    corpus = (x, groups, problem.document_starts, problem.document_blocks)
    topics = (phi, prior, prior @ phi.T, mixing, numba_steps.row_cumsum(mixing), float(b))
    parallel_steps.sweep_documents(corpus, z, opened, topics, _block_seed(problem))
    tables = problem.sum(torch.from_numpy(np.bincount(groups * k + z, weights=opened, minlength=t * k).reshape(t, k)))
    parallel_steps.release_memory()
    z = torch.from_numpy(z).to(state.z.device)
    return replace(state, z=z, tables=tables[0].to(mix)) if problem.documents is not None else replace(state, z=z)


def _uncollapsed_labels(problem: Problem, state: GibbsState, mix: torch.Tensor) -> GibbsState:
    """Step 1 with the topics and theta_d drawn (``uncollapsed``), in torch where the tokens lie;
    the tables (the document level) drawn given the new labels."""
    starts, bounds = problem.device_document_starts
    z, b = state.z.clone(), doc_concentration(problem, state)
    tokens = (problem.x, problem.groups, problem.documents, starts, bounds)
    uncollapsed_steps.sweep_labels(tokens, z, word_counts(problem, state.z), mix.to(z.device), b, problem.beta)
    if problem.documents is None:
        return replace(state, z=z)
    return replace(state, z=z, tables=draw_tables(problem, z, mix, b))


def _collapsed_document_labels(problem: Problem, state: GibbsState, mix: torch.Tensor) -> GibbsState:
    """Step 1 collapsed with the document level, with its block moves and tables
    (``approximate.sweep_shares``): over the problem's shares of documents (``document_shares``) in
    parallel against stale counts, each share starting from the counts of every label (over every
    process, where the chain runs on several); one share is the exact collapsed step."""
    z = _numpy(state.z, np.int64)
    counts = problem.count_buffers
    if problem.on_host:
        numba_steps.count_words(problem.host_arrays[0], z, *counts)
    else:  # every process's labels (``word_counts`` all-reduces), word-major as the compiled loops read them
        table = word_counts(problem, state.z).cpu()
        torch.from_numpy(counts[0]).copy_(table.T)
        torch.from_numpy(counts[1]).copy_(table.sum(1))
    seed, opens = int(torch.randint(2**31 - 1, ())), True  # the same draw in every process
    if problem.ranks is not None:  # new atoms opened by one process a sweep, each process's seeds its own
        opens = (seed // approximate_steps.MAX_SHARES) % problem.ranks.size == problem.ranks.rank
        seed += problem.ranks.first_block * approximate_steps.MAX_SHARES
    shares = problem.document_shares
    own = problem.share_copies if len(shares) > 1 else None  # one share sweeps the counts themselves
    corpus, z, mixing, b = _document_arrays(problem, state, z, mix)
    tables = approximate_steps.sweep_shares(corpus, z, counts, mixing, b, shares, (seed, opens), own)
    z = torch.from_numpy(z).to(state.z.device)
    if problem.documents is None:  # every token its own document: its tables are the labels' counts
        return replace(state, z=z)
    return replace(state, z=z, tables=problem.sum(torch.from_numpy(tables))[0].to(mix))


# the label steps drawn by a function of their own: with the topics drawn (partially collapsed, theta_d
# integrated out, and uncollapsed), or collapsed against stale counts
@dataclass(frozen=True)
class LabelStep:
    """How step 1 draws words' labels (``CoupledDP(label_step=...)``): one record each in
    ``LABEL_STEPS``, the only place that knows them by name."""

    name: str
    # (problem, state, mix) -> state, words' steps but the exact collapsed one (a checkpoint's
    # fingerprint knows the step by its name: a function's repr holds its address)
    draw: callable = field(default=None, metadata={"fingerprint": False})
    by_cells: bool = False  # the (group, word) cells' label counts at once (``cells``); tokens otherwise
    by_blocks: bool = False  # documents in parallel blocks, the same draws in any number of processes (``parallel``)
    spans_ranks: bool = False  # one chain over the processes of a torch.distributed group (``data_parallel``)
    shares_documents: bool = False  # collapsed, documents shared among threads against stale counts (``approximate``)
    on_device: bool = False  # in torch where the tokens lie, any device (``uncollapsed``)
    token_moves: bool = False  # split-merge moves on tokens (words by token, one process)

    @property
    def words_only(self) -> bool:
        """Whether it draws words' labels only (not real vectors')."""
        return self.draw is not None


LABEL_STEPS = {step.name: step for step in (
    LabelStep("collapsed", token_moves=True),
    LabelStep("blocked", by_cells=True),
    LabelStep("parallel", _parallel_document_labels, by_blocks=True, spans_ranks=True),
    LabelStep("approximate", _collapsed_document_labels, spans_ranks=True, shares_documents=True),
    LabelStep("uncollapsed", _uncollapsed_labels, on_device=True),
)}


def label_step(name: str | None, *, on_device: bool = False, data_parallel: bool = False,
               documents: bool = True) -> LabelStep:
    """The record of the label step ``name``; None: the default where the fit runs: on a device the
    one that runs there; with the document level over ranks or on more than one thread, the
    collapsed step against stale counts (``approximate``, exact on one share; its held-out perplexity
    within the seeds' spread of the exact step's on enwiki and fine_foods, single seeds from 8.8 %
    better to 3.3 % worse, ``benchmarks/reports/coupled_parallel.md``); over ranks without it, the exact
    parallel step; else the collapsed step (with its split-merge moves at the group level)."""
    if name is not None:
        return LABEL_STEPS[name]
    if on_device:
        return LABEL_STEPS["uncollapsed"]
    if documents and (data_parallel or parallel_steps.threads() > 1):
        return LABEL_STEPS["approximate"]
    return LABEL_STEPS["parallel" if data_parallel else "collapsed"]


def _block_seed(problem: Problem) -> int:
    """The seed of this process's first block of documents: one draw of torch's generator, the same
    in every process, shifted by the blocks before this process's share (``parallel``)."""
    return int(torch.randint(2**31 - 1, ())) + (0 if problem.ranks is None else problem.ranks.first_block)


def _document_arrays(problem: Problem, state: GibbsState, z: np.ndarray, mix: torch.Tensor) -> tuple:
    """(the corpus (x, groups, document starts, V, beta), z, D, b): the compiled document steps' arguments."""
    corpus = (*problem.host_arrays, problem.document_starts, int(problem.vocab_size), float(problem.beta))
    return corpus, z, _numpy(mix), doc_concentration(problem, state)


def move_document_cells(problem: Problem, state: GibbsState, mix: torch.Tensor | None = None) -> GibbsState:
    """The document level's block moves (``compiled.document_moves``: each document's tokens
    on one atom move together to an atom it does not use), then the tables given the labels."""
    if mix is None:
        mix = mixing_weights(state.coeffs, state.inherit, state.weight, state.source, problem.sizes[1])
    z = _numpy(state.z, np.int64)
    numba_steps.document_moves(*_document_arrays(problem, state, z, mix), int(torch.randint(2**31 - 1, ())))
    z = torch.from_numpy(z).to(state.z.device)
    return replace(state, z=z, tables=draw_tables(problem, z, mix, doc_concentration(problem, state)))


def update_doc_concentration(problem: Problem, state: GibbsState) -> GibbsState:  # in step 1
    """b given the labels and tables, where it is sampled (Escobar and West 1995; Teh et al. 2006,
    appendix A). With theta_d integrated out, b enters p(z, m | b, D) only as
        b^(m..) prod_d G(b) / G(b + n_d),    m.. = sum_tk m_tk (every table), n_d = tokens of d,
    and G(b) / G(b + n) = (1 / G(n)) int_0^1 w^b (1 - w)^(n - 1) (1 + n / b) dw, so with
    auxiliaries w_d ~ Beta(b + 1, n_d) and s_d ~ Bernoulli(n_d / (n_d + b)) the conditional of b
    is Gamma(shape + m.. - sum_d s_d, rate - sum_d ln w_d), drawn exactly; w and s are dropped."""
    if problem.documents is None or problem.doc_concentration is not None:
        return state
    b, n = state.doc_concentration, problem.document_lengths.to(state.doc_concentration)
    # raw draws: torch.distributions' objects cost more than the arithmetic on small corpora
    upper, lower = torch._standard_gamma((b + 1).expand_as(n)), torch._standard_gamma(n)
    log_w = upper.log() - (upper + lower).log()  # w ~ Beta(b + 1, n_d)
    s = (torch.rand(n.shape, dtype=n.dtype, device=n.device) * (n + b) < n).sum()  # s_d ~ Bernoulli(n_d / (n_d + b))
    shape, rate = problem.doc_concentration_prior
    b = torch._standard_gamma(shape + state.tables.sum() - s) / (rate - log_w.sum())
    return replace(state, doc_concentration=_floored(b))


def _move_atoms(problem: Problem, state: GibbsState, move_owner: bool) -> GibbsState:
    """Steps 2 and 5, atom by atom over sufficient statistics (``compiled.move_atoms``)."""
    t, s, k = problem.sizes
    inherit, source = _numpy(state.inherit, np.int64), _numpy(state.source, np.int64)
    shape = state.alpha / problem.atoms_per_source
    weight_prior = torch.distributions.Gamma(shape, 1.0, validate_args=False).log_prob(state.weight[:, None])
    q = problem.q.double()
    labels = (_numpy(mixture_counts(problem, state)), inherit, source, _numpy(state.weight))
    priors = (_numpy(q.log()), _numpy(torch.log1p(-q)), _numpy(weight_prior))
    numba_steps.move_atoms(labels, _numpy(state.coeffs), priors, _numpy(torch.rand(k, t + 1, dtype=torch.float64)),
                           move_owner, False)
    return replace(state, inherit=torch.from_numpy(inherit).to(state.inherit),
                   source=torch.from_numpy(source).to(state.source))


def update_inheritance(problem: Problem, state: GibbsState) -> GibbsState:  # step 2
    return _move_atoms(problem, state, move_owner=False)


def update_coefficients(problem: Problem, state: GibbsState) -> GibbsState:  # step 3
    """c_t given the labels (``cells._coefficients``, compiled), after the split-merge moves with c_t
    integrated out where words move by token."""
    if problem.token_moves:
        _, s, _ = problem.sizes
        owner, effective, mass = inherited_mass(state.inherit, state.weight, state.source, s)
        log_share = state.weight.log() - mass[:, state.source].clamp_min(torch.finfo(mass.dtype).tiny).log()
        state, _ = _split_merge(problem, state, effective, mixture_counts(problem, state) @ owner, log_share,
                                state.alpha * problem.q, False)
    return counts_sweep(problem, state, steps=(3,))


def _split_merge(problem, state, effective, per_source, log_token, source_param, weights_integrated):
    """The split-merge moves of steps 3 and 6 (``compiled.split_merge``) on the atoms each group
    reaches (D_t(k) > 0); log_token (T, K) and source_param (T, S) as that function takes them.
    Returns the state with its new labels and their n_ts."""
    k = problem.sizes[2]
    reachable = (effective > 0) & (problem.q[:, state.source] > 0)
    reach = torch.sort(torch.where(reachable, torch.arange(k, device=reachable.device), k), 1).values
    z, nts = _numpy(state.z, np.int64), _numpy(per_source)
    words = (problem.host_arrays[0], *problem.group_order, int(problem.vocab_size))
    target = (_numpy(log_token), _numpy(state.alpha[state.source] / problem.atoms_per_source), _numpy(source_param),
              bool(weights_integrated), _numpy(state.source, np.int64), float(problem.beta))
    numba_steps.split_merge(words, z, target, nts, (_numpy(reach, np.int64), _numpy(reachable.sum(1), np.int64)),
                            problem.token_moves, int(torch.randint(2**31 - 1, ())))
    return replace(state, z=torch.from_numpy(z).to(state.z.device)), torch.from_numpy(nts).to(per_source)


def update_atoms(problem: Problem, state: GibbsState) -> GibbsState:  # step 4
    _, _, k = problem.sizes
    x, z = problem.x, state.z
    if problem.family == "categorical":
        return state  # the topics are collapsed
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
    return _move_atoms(problem, state, move_owner=True)


def update_weights(problem: Problem, state: GibbsState) -> GibbsState:  # step 6
    """V_ts ~ Gamma(n_ts, W_ts), then alpha and w given V (``cells``, compiled); where words move by
    token, the split-merge moves run between them, with w integrated out given the same V."""
    if not problem.token_moves:
        return counts_sweep(problem, state, steps=(6,))
    s = problem.sizes[1]
    counts = mixture_counts(problem, state)
    owner, effective, _ = inherited_mass(state.inherit, state.weight, state.source, s)
    latents = _compiled_state(state)
    cell_steps.seed(int(torch.randint(2**31 - 1, ())))
    used, log_rate, aux = cell_steps.auxiliary_rates(_numpy(counts), latents.inherit, latents.weight, latents.source, s)
    log_token = state.coeffs[:, state.source].log() - torch.from_numpy(log_rate).to(state.coeffs)
    log_aux = torch.from_numpy(aux).to(counts).log()
    state, _ = _split_merge(problem, state, effective, counts @ owner, log_token, log_aux, True)
    used = np.bincount(_numpy(state.z, np.int64), minlength=len(used)).astype(np.float64)
    cell_steps.weights_given_auxiliaries(used, log_rate, latents, _settings(problem))
    return _updated(state, latents._asdict())


def _log_gamma(shape: torch.Tensor) -> torch.Tensor:
    """ln of Gamma(shape, 1) draws, as ln Gamma(shape + 1) + ln U / shape: with shapes like
    alpha / L ~ 1e-3 the draws themselves underflow, their logarithms do not."""
    return (torch.distributions.Gamma(shape + 1, 1.0, validate_args=False).sample().log()
            + torch.rand_like(shape).log() / shape)


def _floored(draws):
    """Gamma draws with a small shape (alpha / L, alpha q_ts) underflow to exactly 0, where the
    densities are infinite and a source's share vanishes; they are kept at the smallest normal
    number instead (a change far below anything observable)."""
    return draws.clamp_min(torch.finfo(draws.dtype).tiny)


def _coefficient_terms(problem: Problem, state: GibbsState, alpha: torch.Tensor) -> torch.Tensor:
    """(T, S): (alpha_s q_ts - 1) ln c_ts - ln G(alpha_s q_ts) on the support q_ts > 0, 0 elsewhere;
    ln Dir(c_t; alpha q_t) is their row sum plus ln G(sum_s alpha_s q_ts)."""
    tiny = torch.finfo(alpha.dtype).tiny
    conc = alpha * problem.q
    terms = (conc - 1) * state.coeffs.clamp_min(tiny).log() - torch.lgamma(conc.clamp_min(tiny))
    return torch.where(problem.q > 0, terms, torch.zeros_like(terms))


def coefficient_log_density(problem: Problem, state: GibbsState) -> torch.Tensor:
    """sum_t ln Dir(c_t; alpha q_t) over the sources group t can inherit (q_ts > 0; c_ts = 0 elsewhere)."""
    return torch.lgamma(problem.q @ state.alpha).sum() + _coefficient_terms(problem, state, state.alpha).sum()


STEPS = (update_labels, update_inheritance, update_coefficients, update_atoms, update_sources, update_weights)

# -- the pool of atoms ---------------------------------------------------------------------------
FULL = 0.95  # a pool whose atoms hold data in at least this share of them is full (``pool_full``)
GROWTH = 1.5  # a full pool grows to ceil(GROWTH L) atoms per latent DP (``grown``)


def pool_full(problem: Problem, state: GibbsState) -> bool:
    """Whether at least ``FULL`` of the pool's atoms hold data (with the document level, tables:
    an atom holds a token of a document only where it holds one of its tables)."""
    counts = state.tables if problem.documents is not None else label_counts(problem, state.z)
    return int((counts.sum(0) > 0).sum()) >= FULL * problem.sizes[2]


def grown(problem: Problem, state: GibbsState) -> tuple:
    """(problem, state) with ceil(GROWTH L) atoms per latent DP: the new atoms hold no data, their
    owners, weights, inheritance and (Gaussian) parameters drawn from the prior of the truncation
    with the larger L. A change of the model (the weights' prior is Gamma(alpha / L)), so the sampler
    makes it in warm-up only (``kernel``): the kept sweeps run on one truncation, whose pool the
    data then no longer fill, and the next sweeps redraw every weight under the new prior."""
    _, s, _ = problem.sizes
    per_source = math.ceil(GROWTH * problem.atoms_per_source)
    extra = per_source - problem.atoms_per_source
    source = torch.arange(s, device=state.source.device).repeat_interleave(extra)
    weight = _floored(_log_gamma(state.alpha[source] / per_source).exp())
    inherit = torch.bernoulli(problem.q[:, source]).to(state.inherit)
    params = dict(state.params)
    if problem.family == "gaussian":
        d = problem.x.shape[1]
        precision = torch.distributions.Gamma(problem.prior_shape, problem.prior_rate).sample((len(source), d))
        precision = precision.to(params["precision"])
        mean = problem.prior_mean + (problem.prior_kappa * precision).rsqrt() * torch.randn_like(precision)
        params = {"mean": torch.cat([params["mean"], mean]), "precision": torch.cat([params["precision"], precision])}
    empty = lambda value, dim=-1: None if value is None else torch.cat(  # noqa: E731  no data on the new atoms
        [value, value.new_zeros(value.shape[:dim] + (extra * s,) + value.shape[dim:][1:])], dim)
    state = replace(state, source=torch.cat([state.source, source]), weight=torch.cat([state.weight, weight]),
                    inherit=torch.cat([state.inherit, inherit], 1), params=params, tables=empty(state.tables),
                    z=empty(state.z) if state.z.ndim == 2 else state.z, topic_sums=empty(state.topic_sums, 0),
                    topic_lives=empty(state.topic_lives))
    return replace(problem, atoms_per_source=per_source), state


def resized(problem: Problem, state: GibbsState) -> Problem:
    """``problem`` with the pool of ``state`` (grown in warm-up, ``grown``)."""
    per_source = state.weight.shape[0] // problem.sizes[1]
    return problem if per_source == problem.atoms_per_source else replace(problem, atoms_per_source=per_source)


def sweep(problem: Problem, state: GibbsState, sweeps: int = 1) -> GibbsState:
    """``sweeps`` passes of steps 1-7 (step 4 does nothing for words); on cells, compiled
    (``cells_sweep``); for words without token moves (the document level, or split_merge_moves=0),
    step 1 and then steps 2, 3, 5, 6 compiled on the counts (``counts_sweep``)."""
    if problem.multiplicity is not None:
        return cells_sweep(problem, state, sweeps)
    steps = (update_labels, counts_sweep) if problem.family == "categorical" and not problem.token_moves else STEPS
    for _ in range(sweeps):
        for step in steps:
            state = step(problem, state)
    return state


def _compiled_state(state: GibbsState) -> cell_steps.Latents:
    """The state's coupled latents as the numpy arrays the compiled steps update in place."""
    return cell_steps.Latents(alpha=_numpy(state.alpha), source=_numpy(state.source, np.int64),
                              weight=_numpy(state.weight), coeffs=_numpy(state.coeffs),
                              inherit=_numpy(state.inherit, np.int64))


def _settings(problem: Problem) -> cell_steps.Settings:
    return cell_steps.Settings(_numpy(problem.q), problem.atoms_per_source, *map(float, problem.alpha_prior),
                               float(problem.alpha_step), problem.alpha is None)


def _updated(state: GibbsState, arrays: dict) -> GibbsState:
    return replace(state, **{name: torch.from_numpy(value).to(getattr(state, name)) for name, value in arrays.items()})


def counts_sweep(problem: Problem, state: GibbsState, steps=cell_steps.COUNT_STEPS) -> GibbsState:
    """Steps 2, 3, 5, 6 (``steps``, [Coupled-DP]'s numbers, in this order) on the mixture counts
    (``mixture_counts``), in one compiled call (``cells.count_sweeps``: steps 2 and 5 given the
    coefficients, as ``update_inheritance`` and ``update_sources`` draw them), on the CPU."""
    latents = _compiled_state(state)
    cell_steps.count_sweeps(_numpy(mixture_counts(problem, state)), latents, _settings(problem),
                            np.asarray(steps, dtype=np.int64), int(torch.randint(2**31 - 1, ())))
    return _updated(state, latents._asdict())


def cells_sweep(problem: Problem, state: GibbsState, sweeps: int = 1, steps=cell_steps.STEPS) -> GibbsState:
    """``sweeps`` passes of ``steps`` ([Coupled-DP]'s step numbers) on (group, word) cells, in one
    compiled call (``inference.coupled.cells``), on the CPU."""
    z, latents = _numpy(state.z), _compiled_state(state)
    words = cell_steps.Words(*problem.host_arrays, problem.vocab_size, float(problem.beta))
    cell_steps.sweeps(words, z, latents, _settings(problem), np.asarray(steps, dtype=np.int64), sweeps,
                      int(torch.randint(2**31 - 1, ())))
    return _updated(state, dict(z=z, **latents._asdict()))


def state_from_trace(trace, problem: Problem) -> GibbsState:
    """The latent values of a ``models.coupled_dp`` trace of this problem as a sampler state."""
    value = lambda name: trace.nodes[name]["value"]  # noqa: E731
    params = {} if problem.family == "categorical" else {"mean": value("mean"), "precision": value("precision")}
    coeffs = torch.where(problem.q > 0, _floored(value("coeffs").squeeze(-2)), torch.zeros_like(problem.q))
    coeffs = coeffs / coeffs.sum(-1, keepdim=True)
    if problem.alpha is None:
        alpha = value("alpha")
    else:
        alpha = torch.full((problem.sizes[1],), float(problem.alpha), dtype=coeffs.dtype, device=coeffs.device)
    b = value("doc_concentration") if problem.documents is not None and problem.doc_concentration is None else None
    state = GibbsState(alpha=alpha, source=value("source"), weight=_floored(value("weight")), params=params,
                       coeffs=coeffs, inherit=value("inherit"), z=value("z"), doc_concentration=b)
    return with_tables(problem, state) if problem.documents is not None and len(state.z) == len(problem.x) else state


def with_tables(problem: Problem, state: GibbsState) -> GibbsState:
    """The state with the document level's tables drawn given its labels (``draw_tables``)."""
    mix = mixing_weights(state.coeffs, state.inherit, state.weight, state.source, problem.sizes[1])
    return replace(state, tables=draw_tables(problem, state.z, mix, doc_concentration(problem, state)))
