"""Batch variational maximisation-maximisation (the "MM" learner) for a stick-breaking mixture of
any conjugate component family (``bnpzoo.families``).

[DPM-SGA] eq. (5), [PYPM-sVMM] Algorithm 1: every variational log-posterior (VLP) is replaced by
its MAP, E[z] <- argmax ln q(z), E[theta] <- argmax ln q(theta), one coordinate at a time:

    step 1  E[z_nk]: argmax_k ln E[pi_k] + E_q[ln f(x_n | theta_k)]           [DPM-SGA] eq. (15)
            (or, as an option, soft responsibilities: the softmax of the same scores)
    step 2  clusters reordered by size and dead ones pruned                      [PYPM-sVMM] V.D
    step 3  q(theta_k): the family's conjugate factor from the clusters' statistics, whose mode
            for the fixed-scale Gaussian is the zero of eq. (12), (sum_n E[z_nk] x_n + lambda0 m0)
            / (N_k + lambda0); for the learned covariances the Normal-Wishart (Normal-Gamma)
            update of Bishop's PRML eq. (10.60)-(10.63)
    step 4  E[v_k]: Dirichlet- or Pitman-Yor sticks, ``sticks.update_sticks``  [PYPM-sVMM] eq. (21)

Departure in step 1: the expectation under q(theta_k) rather than ln f at its mode; for the
fixed-scale Gaussian it adds the Occam penalty D / (2 (N_k + lambda0)) of ``inference.stick_mixture.mean_factors``.

The objective is the bound with hard assignments, E_q ln p(x, E[z] | theta) + ln p_u(E[v]) -
KL(q(theta) || p(theta)), and with soft ones its maximum over the responsibilities (z summed out, as in
EM); u = logit v (``inference.stick_mixture.sticks`` says why the sticks are taken in that coordinate).
Clusters that pruning removed sit at their prior, so the objective of K clusters stays comparable
after pruning. Steps 1, 3 and 4 each maximise it in one block given the others.

Step 2 is the one heuristic: with alpha != 1 or d > 0 the stick prior is not exchangeable, so a
new order can lower the objective, and with soft assignments a pruned cluster takes its mass with
it. Measured before this guard, on scikit-learn's mixture-test data at alpha = 0.1, 3 to 4 of 24
fits lost objective, and at alpha = 20 the hard learner could cycle. So the reorganised step is
kept only when its objective is at least the previous one; otherwise the iteration takes steps 3
and 4 without it. The objective then never decreases, for every alpha and discount.

Soft counts are never 0, and the last cluster's stick stays near 1 / (1 + alpha) however small its
count, so the stick's threshold never drops the clusters that soft assignments empty: a cluster with
at most ``EMPTY_ROWS`` of responsibility is pruned as empty. Kept, such clusters (1e-13 to 1e-25 rows
after a K-means start of 50 on 20 Gaussians) were merged one an iteration, each merge changing the
objective by its rounding: 7 of a 20,000-row fit's 13 iterations.

Pruning phase. A prior that pulls every mean toward the data mean prunes the clusters K-means
split off (their means move, and their members leave), but biases large clusters' means by a
fraction lambda0 / (N_k + lambda0) (and, for the learned covariances, widens the clusters a far
mean is pulled from). With ``pruning_precision`` above ``prior_precision`` the
iterations run to convergence under the stronger prior first, then continue under the model's
own: the clusters pruned in the first phase stay pruned, and the means end at the model's MAP.
The objective changes at the switch (it is monotone within each phase).

Merge moves (``merge_moves=True``; the estimators turn them on for the families that learn a
spread). After each iteration, pairs of clusters whose responsibilities correlate are scored on
the memoized bound (``propose_merges``: the objective at fixed responsibilities is a function of the
clusters' statistics and entropies, so no pass over the data), and the merges that raise it are
made; once the assignments settle, the best three candidates are also run for up to ``REFINE``
iterations each and kept once their objective passes the current one (the rows of merged pieces
must move before a merge pays). Every accepted merge raises the objective, so the trace stays
monotone. Without them, a learned spread leaves one Gaussian cloud in 3 to 50 pieces
(``benchmarks/reports/families.md``).

Memoized passes (``batch_size`` below N; Hughes and Sudderth, NeurIPS 2013). The pass visits
consecutive batches of rows, keeps each batch's statistics from its last visit, and after each
batch replaces that batch's old statistics in the totals by its new ones and re-estimates q and the
sticks (``memoized_expectation``). Each local step maximises the objective over one batch's
assignments and each global step over q and the sticks given all of them, so the objective still
never decreases, and the fixed points are batch VMM's; q moves B times a pass instead of once. The
objective is then the memoized bound, from the statistics alone (the family's ``rows_term`` adds
what its ``expected_data_term`` leaves out), the same number as a pass's. A move that changes the
clusters drops the record; the next pass makes it again with one q throughout.

The collapse move (with births, the last phase only; ``propose_whole``): once the assignments stand
still, every row in one cluster, kept where that raises the memoized bound (exact for one cluster).
A K-means start cuts a cloud with no structure into cells that no merge of two joins.

Split moves, or births (``split_moves=True``, the last phase only). The steps above move one sample
at a time and only ever empty clusters: a cost or a gain that belongs to a whole cluster (its
stick's prior, the Occam term) never decides anything, and no cluster is ever opened. Once the
assignments stand still, every cluster of at least 4 members is divided in two by 2-means (in units
of its own spread; the spherical family also into 4 and 8 pieces where halves do not pay) and scored
on the memoized bound (``propose_births``: the halves' statistics come from the cluster's own rows,
so no pass over the data); the splits that raise the bound are kept, the second halves appended as
new clusters, up to the truncation, and the phase ends when no split is kept. The number of clusters
can double in one round, so a fit started with 2 clusters reaches 50 well-separated ones in about 6
rounds. After a round that keeps none, births are proposed again only once the clusters holding at
least half a row change in number (a merge of two of them), not after each merge that folds away a
cluster the start emptied: re-dividing every cluster after each of those took 8 rounds and two
thirds of a 20,000-row fit, and on the families' real tables and generated clusters kept no division
(the fits are the same without it; ``benchmarks/reports/pass.md``). A split must pay for the weights
it divides (about N_k ln 2 with hard assignments): a cluster that covers many true ones in a
spread-out glob (the spherical family) can stay unsplit. With soft assignments a split divides the
responsibilities of the rows the cluster is most responsible for between its halves (the entropies
cancel), and the next pass's bound, which sums the assignments out, is at least the memoized one.
The estimators turn births on for vmm (``bnpzoo.mixture``'s ``split_moves``); they open clusters
where the model asks for them, so where the model is wrong for the data they can cost NMI (the fixed
scale on iris: 3 clusters to 9, NMI 0.67 to 0.48).
"""

import time
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import torch

from bnpzoo.families.base_measure import BaseMeasure, learned_prior
from bnpzoo.inference.kmeans import kmeans, nearest_centres
from bnpzoo.inference.stick_mixture.mean_factors import means_kl
from bnpzoo.inference.stick_mixture.sticks import reorder_and_prune, stick_log_prior, update_sticks
from bnpzoo.mapped import passes
from bnpzoo.ops import generalized_gaussian_log_density, stick_breaking_log_weights
from bnpzoo.progress import finish, tqdm
from bnpzoo.threads import small_work


@dataclass
class StickMixtureFit:
    """A fitted stick-breaking mixture: the K clusters' factors ``q`` (the family's natural
    parameters), their point estimates ``point`` (``means`` among them) and K - 1 free sticks."""

    q: dict
    point: dict
    sticks: torch.Tensor
    objective_trace: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)  # when each objective was reached, from clock_start
    phase_starts: list[int] = field(default_factory=list)  # where each prior phase's trace begins
    clock_start: float = 0.0  # a time.perf_counter() value
    n_iter: int = 0
    converged: bool = False
    prior: object = None  # the last phase's prior, as the fit learned it (``families.base_measure``)

    @property
    def means(self) -> torch.Tensor:
        return self.point["means"]


def mean_gradient(x, resp, means, std, prior_mean, prior_precision):
    """d/dmu_k [ln p(x | mu, z) + ln p(mu)] summed over the data: [DPM-SGA] eq. (12),

        sum_n (x_n - mu_k) E[z_nk] / std^2 - lambda0 (mu_k - m0) / std^2     (per feature).
    """
    counts = resp.sum(0)
    return (resp.T @ x - counts[:, None] * means - prior_precision * (means - prior_mean)) / std**2


def update_means(x, resp, prior_mean, prior_precision):
    """The zero of eq. (12): (sum_n E[z_nk] x_n + lambda0 m0) / (N_k + lambda0)."""
    return means_from_statistics(resp.sum(0), resp.T @ x, prior_mean, prior_precision)


def means_from_statistics(counts, sums, prior_mean, prior_precision):
    """The zero of eq. (12) from N_k = sum_n E[z_nk] and S_k = sum_n E[z_nk] x_n."""
    return (sums + prior_precision * prior_mean) / (counts[:, None] + prior_precision)


@dataclass
class Assignments:
    """E[z] as the M-step sees it: the family's statistics of each cluster (``stats``, a dict with
    ``count`` N_k among them, K leading), and with hard assignments each sample's cluster (N,), -1
    for a sample whose cluster was pruned (it then sits in no cluster until step 1 reassigns it,
    as a one-hot row dropped with its column); with soft assignments each sample's most responsible
    cluster, where a pass has measured it (births take a cluster's rows from it)."""

    stats: dict
    labels: torch.Tensor | None = None
    # for merge moves (the memoized bound, ``propose_merges``): sum_n r_nk r_nj of the soft responsibilities
    # (K, K); the entropy -sum_n r_nk ln r_nk of each cluster's (K,); candidate pairs (P, 2) and the
    # entropy of each pair's summed responsibilities (P,) (all 0 for hard assignments)
    overlap: torch.Tensor | None = None
    entropy: torch.Tensor | None = None
    pairs: torch.Tensor | None = None
    pair_entropy: torch.Tensor | None = None
    # the memoized learner's record: each batch's statistics from the pass that made these
    # (``memoized_expectation``); None where a move changed the clusters since
    batches: list | None = None
    # after a move, each cluster's index before it, -1 where the move changed it (a merged pair, a
    # divided cluster, a piece born); None: unchanged
    origin: torch.Tensor | None = None
    # the rows each label stands for: a stochastic learner's record of a sample of the rows
    # (``memo.Memo``) holds statistics scaled to N, and births scale their pieces' statistics alike
    scale: float = 1.0

    @property
    def counts(self) -> torch.Tensor:
        return self.stats["count"]

    @classmethod
    def from_labels(cls, x, labels, k: int, family, prior, hard: bool = True) -> "Assignments":
        """One-hot E[z] from the labels (-1: in no cluster); ``hard=False`` keeps only the statistics."""
        stats = None
        for rows in passes(x, k):
            block = family.label_statistics(x[rows], labels[rows], k, prior)
            stats = block if stats is None else family.add(stats, block)
        return cls(stats, labels if hard else None)

    def select(self, keep: torch.Tensor) -> "Assignments":
        """The clusters ``keep`` in that order (step 2)."""
        position = torch.full((self.counts.numel() + 1,), -1, dtype=torch.long, device=keep.device)
        position[keep] = torch.arange(keep.numel(), device=keep.device)
        labels = None if self.labels is None else position[self.labels]  # -1 indexes the extra last entry, -1
        overlap = None if self.overlap is None else self.overlap[keep][:, keep]
        entropy = None if self.entropy is None else self.entropy[keep]
        pairs, pair_entropy = self.pairs, self.pair_entropy
        if pairs is not None:
            pairs = position[pairs]
            both = (pairs >= 0).all(1)
            pairs, pair_entropy = pairs[both], pair_entropy[both]
        batches = None if self.batches is None else [{name: value[keep] for name, value in batch.items()}
                                                       for batch in self.batches]
        origin = keep if self.origin is None else self.origin[keep]
        return Assignments({name: value[keep] for name, value in self.stats.items()}, labels, overlap, entropy,
                           pairs, pair_entropy, batches, origin)

    def merge(self, chosen: list[int]) -> "Assignments":
        """The candidate pairs ``chosen`` (indices into ``pairs``, no cluster in two of them) each
        made one cluster, in the first one's place: statistics, overlaps and labels add, the entropy
        is the pair's."""
        j, k = self.pairs[chosen].T
        stats = {name: value.clone().index_add_(0, j, value[k]) for name, value in self.stats.items()}
        entropy = self.entropy.clone()
        entropy[j] = self.pair_entropy[chosen]
        overlap = self.overlap.clone().index_add_(0, j, self.overlap[k])
        overlap = overlap.index_add_(1, j, overlap[:, k])
        labels = self.labels
        if labels is not None:
            target = torch.arange(self.counts.numel() + 1, device=labels.device)
            target[k] = j
            labels = target[labels]  # -1 is the last entry, itself
        rest = torch.ones(self.counts.numel(), dtype=torch.bool, device=j.device)
        rest[k] = False
        origin = torch.arange(self.counts.numel(), device=j.device).index_fill_(0, j, -1)
        return Assignments(stats, labels, overlap, entropy, origin=origin).select(rest.nonzero()[:, 0])

    def whole(self) -> "Assignments":
        """Every row in one cluster (``propose_whole``): the statistics and overlaps summed, the
        entropy 0 (each row's responsibility 1), a row in no cluster still in none."""
        labels = None if self.labels is None else torch.where(self.labels >= 0, 0, -1)
        overlap = None if self.overlap is None else self.overlap.sum().reshape(1, 1)
        entropy = None if self.entropy is None else self.entropy.new_zeros(1)
        return Assignments({name: value.sum(0, keepdim=True) for name, value in self.stats.items()}, labels,
                           overlap, entropy, origin=torch.full((1,), -1, device=self.counts.device))

    def merge_candidates(self, floor: float = 1e-6) -> torch.Tensor:
        """Pairs of clusters (P, 2) by their responsibilities' correlation r_jk^2 / (r_jj r_kk), the
        most correlated first, at most K of them, those above ``floor`` only (clusters that share no
        rows are not tried); none before a pass has measured the overlaps."""
        k = self.counts.numel()
        if self.overlap is None:
            return torch.empty(0, 2, dtype=torch.long, device=self.counts.device)
        diagonal = self.overlap.diagonal().clamp_min(torch.finfo(self.overlap.dtype).tiny)
        correlation = (self.overlap**2 / diagonal[:, None] / diagonal[None, :]).triu(1).flatten()
        above = (correlation > floor).nonzero()[:, 0]
        best = above[torch.argsort(correlation[above], descending=True)][:k]
        return torch.stack([best // k, best % k], 1)


def expectation(x, family, prior, factors: tuple, hard: bool, labels=None,
                pairs: torch.Tensor | None = None) -> tuple[torch.Tensor, Assignments]:
    """One pass over x in blocks of rows (``ops.row_blocks``: no N x K table): the data term of
    the objective (hard: of ``labels`` under these factors; soft: z summed out) and step 1's new
    assignments (eq. (15)) as ``Assignments``; with candidate ``pairs`` (P, 2) (merge moves), also
    the responsibilities' overlap and entropies (the ``Assignments`` fields). ``factors`` are (q,
    its point estimate, the sticks), as step 3-4 gives them; the scores are the family's
    ``expected_log_density`` at the point estimate, computed once for the pass."""
    q, point, sticks = factors
    k = sticks.shape[0] + 1
    value = x.new_zeros((), dtype=torch.float64)
    stats = None
    merges = pairs is not None
    entropy = x.new_zeros(k, dtype=torch.float64)
    if merges:
        products = x.new_zeros(k, k, dtype=torch.float64)
        pair_entropy = x.new_zeros(len(pairs), dtype=torch.float64)
    new_labels = torch.empty(x.shape[0], dtype=torch.long, device=x.device)
    log_weights = stick_breaking_log_weights(sticks.to(x.dtype))
    for rows in passes(x, k):
        block = x[rows]
        scores = family.expected_log_density(block, q, prior, point, log_weights)
        resp = torch.softmax(scores, 1) if merges or not hard else None
        if not hard:  # a hard assignment's entropy is 0, alone or merged
            entropy -= torch.xlogy(resp, resp).sum(0).double()
        if merges:
            products += (resp.T @ resp).double()
            if not hard:
                summed = resp[:, pairs[:, 0]] + resp[:, pairs[:, 1]]
                pair_entropy -= torch.xlogy(summed, summed).sum(0).double()
        new_labels[rows] = scores.argmax(1)
        if hard:
            old = labels[rows]
            value += scores.gather(1, old.clamp_min(0)[:, None]).squeeze(1).masked_fill(old < 0, 0).double().sum()
            part = family.label_statistics(block, new_labels[rows], k, prior, factors=q)
        else:
            value += torch.logsumexp(scores, 1).double().sum()
            part = family.statistics(block, resp, prior, factors=q)
        stats = part if stats is None else family.add(stats, part)
    if merges:
        return value, Assignments(stats, new_labels, products, entropy, pairs, pair_entropy)
    return value, Assignments(stats, new_labels, entropy=entropy)


def memoized_expectation(x, batches: list, family, prior, assignments, estimate, hard: bool,
                         pairs: torch.Tensor | None = None) -> Assignments:
    """``expectation`` over each batch of rows in turn (``batches``, slices of x), with the global
    step between batches: the memoized learner (Hughes and Sudderth, "Memoized online variational
    inference for Dirichlet process mixture models", NeurIPS 2013). Each batch's statistics from
    the pass before (``assignments.batches``) are held in the totals; after a batch's local step
    (step 1 on its rows) its old statistics are replaced by its new ones and q and the sticks are
    re-estimated from the totals (``estimate``: statistics -> (q, point, sticks)), so the factors
    move once a batch, not once a pass, and every step still maximises the whole data's objective
    in one block (the local step over the batch's assignments, the global one over q and the sticks
    given all of them): the objective never decreases. Without a record (the start, or a move that
    changed the clusters since) the pass keeps one q throughout, as batch vmm, and makes the record.
    Returns the pass's assignments, with each batch's statistics as the record."""
    record, totals = assignments.batches, assignments.stats
    q, point, sticks = estimate(totals)
    parts = []
    for b, rows in enumerate(batches):
        labels = None if assignments.labels is None else assignments.labels[rows]
        part = expectation(x[rows], family, prior, (q, point, sticks), hard, labels, pairs)[1]
        parts.append(part)
        if record is not None and b < len(batches) - 1:
            totals = {name: value - record[b][name] + part.stats[name] for name, value in totals.items()}
            q, point, sticks = estimate(totals)
    total = lambda name: None if getattr(parts[0], name) is None else sum(getattr(part, name) for part in parts)
    stats = {name: sum(part.stats[name] for part in parts) for name in parts[0].stats}  # exact: no running sum
    return Assignments(stats, torch.cat([part.labels for part in parts]), total("overlap"), total("entropy"),
                       pairs, total("pair_entropy"), [part.stats for part in parts])


def assignment_scores(x, means, sticks, std, penalty=0.0):
    """ln pi_k + ln N(x_n | mu_k, diag(std^2)) - penalty_k, (N, K): the argument of eq. (15) for
    the fixed-scale Gaussian, with ``penalty`` the Occam term that makes it the expectation under
    q(mu_k)."""
    return stick_breaking_log_weights(sticks) + generalized_gaussian_log_density(x, means, std) - penalty


def assign(scores: torch.Tensor, hard: bool) -> torch.Tensor:
    """E[z]: one-hot argmax (eq. (15)) or softmax responsibilities."""
    if hard:
        return torch.nn.functional.one_hot(scores.argmax(1), scores.shape[1]).to(scores.dtype)
    return torch.softmax(scores, 1)


def prior_terms(means, sticks, variances, *, n_clusters, **prior):
    """-KL(q(mu) || p(mu)) + ln p_u(v) over ``n_clusters`` for the fixed-scale family's point
    estimates (the SVI learners' bound); a cluster not in ``means`` sits at its prior (KL 0, its
    stick at the mode). ``prior``: std, alpha, discount (default 0), prior_mean (m0) and
    prior_precision (lambda0), the session's; each mean has prior N(m0, std^2 / lambda0) per feature."""
    kl = means_kl(means, variances, std=prior["std"], prior_mean=prior["prior_mean"],
                  prior_precision=prior["prior_precision"])
    return stick_log_prior(sticks, prior["alpha"], prior.get("discount", 0.0), n_sticks=n_clusters - 1) - kl


@dataclass(frozen=True)
class MemoizedTerms:
    """The memoized bound's two parts, as functions of statistics (moves score proposals with them),
    for ``family`` under ``prior`` and the sticks' prior over ``n_clusters`` (the most clusters a birth
    may open): ``cluster(stats, entropy)``, each cluster's expected data term, entropy and -KL at the
    factor its statistics give, (K,); ``sticks(counts)``, sum_k N_k ln pi_k + ln p_u(v) at the
    sticks' optimum for the counts (batched over leading dimensions)."""

    family: object
    prior: object
    sticks_prior: dict
    n_clusters: int

    def cluster(self, stats, entropy):
        q = self.family.natural(stats, self.prior)
        return self.family.expected_data_term(q, stats, self.prior) + entropy - self.family.kl(q, self.prior)

    def sticks(self, counts):
        sticks = update_sticks(counts, **self.sticks_prior)
        return (counts * stick_breaking_log_weights(sticks)).sum(-1) + stick_log_prior(
            sticks, **self.sticks_prior, n_sticks=self.n_clusters - 1)



def memoized_bound(terms: MemoizedTerms, assignments) -> float:
    """The memoized bound of ``assignments`` (an entropy of None: hard assignments, none), less what
    ``family.rows_term`` adds."""
    entropy = assignments.entropy if assignments.entropy is not None else torch.zeros_like(assignments.counts)
    return float(terms.cluster(assignments.stats, entropy).sum() + terms.sticks(assignments.counts))


BIRTH_SAMPLE = 2000  # a larger cluster's pieces: k-means on this many of its rows, then every row to the nearest
# Lloyd's iterations a division's k-means takes at most: a proposal, judged by the bound, need not converge
# (halving one round blob, Lloyd wandered 31 iterations on average, 70 % of a 100,000 x 64 fit's births)
BIRTH_ITERATIONS = 10
EMPTY_ROWS = 1e-12  # a cluster whose responsibilities sum to less is empty: pruned at step 2
HOLDS_ROWS = 0.5  # a cluster whose responsibilities sum to less holds no row (births wait for a change in the others)
REFINE = 10  # iterations a merge proposal may take to pass the objective it would replace


def division_statistics(rows, piece, cluster: int, assignments, family, prior, responsibilities=None) -> dict | None:
    """The statistics of a cluster's pieces, (P, ...): its member ``rows`` divided by ``piece`` (0 to
    P - 1; ``birth_candidates`` says how soft assignments share them). None where the first piece's
    rest is no statistic of rows (a factor outside the family's domain): a stochastic learner's
    record holds the responsibilities of its visit, the shares are today's, and where the members'
    shares grew since, the rest went negative (binarised digits, DPBMM natgrad-svi: a Beta of
    concentration -0.4). ``responsibilities``: ``Shares``, whose factors the pieces' statistics are
    taken around, as the record's were (``family.statistics``): the rest is then a statistic of rows
    for a family whose statistics need an anchor (``families.learned_scale``)."""
    size, scale = int(piece.max()) + 1, assignments.scale
    if responsibilities is None:
        return {name: scale * value for name, value in family.label_statistics(rows, piece, size, prior).items()}
    share = responsibilities(rows)[:, cluster, None] * torch.nn.functional.one_hot(piece, size)[:, 1:]
    factors = responsibilities.factors
    anchor = None if factors is None else {name: value[cluster].expand(size - 1, *value.shape[1:])
                                           for name, value in factors.items()}
    rest = family.statistics(rows, share.to(rows.dtype), prior, factors=anchor)
    stats = {name: torch.cat([(value[cluster] - scale * rest[name].sum(0))[None], scale * rest[name]])
             for name, value in assignments.stats.items()}
    return stats if bool(family.valid(family.natural(stats, prior)).all()) else None


class Division(NamedTuple):
    """A cluster divided (``birth_candidates``): the rows of each piece but the first, the pieces'
    statistics, and the cluster's member rows and their responsibilities (None: hard assignments),
    which a caller dividing the cluster otherwise too need not compute again."""

    cluster: int
    moved: list
    stats: dict
    rows: torch.Tensor
    shares: torch.Tensor | None


def birth_candidates(x, assignments, family, prior, seed: int, responsibilities=None, clusters=None, seen=None):
    """For each cluster of at least 4 members, a generator of its divisions by k-means (on at most
    ``BIRTH_SAMPLE`` of its rows, every row then to the nearest centre), in the coordinates of its
    own spread (each of ``family.split_views`` in turn), into each number of ``family.birth_pieces``
    in turn that it has 2 members a piece for (``Division``), from the cluster's own rows alone (a
    generator: the caller stops at the first division that pays, and larger ones are never
    computed). With soft
    assignments the members are the rows the cluster is most responsible for,
    ``responsibilities(rows)`` (M, K) gives their responsibilities, every piece but the first takes
    its rows' share of the cluster, and the first the rest of the cluster's statistics (rows
    elsewhere included): the responsibilities themselves do not change, only which piece holds them.
    ``clusters``: the clusters to divide (default: all); ``seen``: a dict that keeps each cluster's
    first division (a caller judging the same record again need not divide it again)."""
    labels, k = assignments.labels, assignments.counts.numel()
    order = torch.argsort(labels, stable=True)  # each cluster's members side by side (-1, in no cluster, first)
    bounds = torch.searchsorted(labels[order], torch.arange(k + 1, device=labels.device)).tolist()

    def divisions(cluster, members):
        rows = x[members]
        shares = None if responsibilities is None else responsibilities(rows)  # once for all its divisions
        shared = None if shares is None else responsibilities.holding(shares)
        sample = None  # the rows k-means runs on
        if len(rows) > BIRTH_SAMPLE:
            draw = torch.Generator().manual_seed(seed + cluster)
            sample = torch.randperm(len(rows), generator=draw)[:BIRTH_SAMPLE].to(rows.device)
        for pieces in family.birth_pieces:
            if members.numel() < 2 * pieces:
                return
            for units in family.split_views(rows, prior):
                centres, piece = kmeans(units if sample is None else units[sample], pieces, n_init=1,
                                        max_iter=BIRTH_ITERATIONS, seed=seed + cluster)
                piece = piece if sample is None else nearest_centres(units, centres)
                piece = torch.unique(piece, return_inverse=True)[1]  # pieces k-means left empty are dropped
                size = int(piece.max()) + 1
                if size < 2:
                    continue
                stats = division_statistics(rows, piece, cluster, assignments, family, prior, shared)
                if stats is None:
                    continue
                division = Division(cluster, [members[piece == j] for j in range(1, size)], stats, rows, shares)
                if seen is not None:
                    seen.setdefault(cluster, division)
                yield division

    for cluster in range(k) if clusters is None else clusters:
        members = order[bounds[cluster]:bounds[cluster + 1]]
        if members.numel() >= 4:
            yield divisions(cluster, members)


def propose_births(x, assignments, terms: MemoizedTerms, seed: int, responsibilities=None, clusters=None,
                   seen=None, floor=-float("inf")):
    """Split moves scored on the memoized bound (Hughes and Sudderth's births in a simple form): a
    cluster divided into pieces (``birth_candidates``: halves, and for the spherical family quarters
    and eighths; ``responsibilities`` with soft assignments) changes the objective at fixed
    assignments only through the pieces' own ``terms.cluster`` and ``terms.sticks`` (a division only
    shares out the responsibilities' entropy: ``held`` keeps it, as the bound ``floor`` does), so a
    candidate costs a k-means over its own rows and O(K), never a pass over the data (soft
    assignments: also its rows' responsibilities, over every cluster, one pass's). For each cluster
    the smallest division that raises the objective (halves where they do), then the clusters in order of that
    gain, each kept when it raises the objective further, the pieces but the first appended as new
    clusters, up to ``terms.n_clusters`` clusters. More than two pieces matter where a cluster with a
    pooled variance covers many true ones in one glob (``NormalGammaFamily.birth_pieces``): halves
    of it divide the weights (about N_k ln 2 with hard assignments) for little gain in fit, eighths
    gain far more. Taking the smallest that pays, not the best, keeps a division from cutting a true
    cluster where halves would do (offered 4 and 8 pieces, the fixed and full families ended at 52
    to 55 clusters for 50). Returns the new assignments, or None when no division raises the
    objective. The next iteration's objective is this memoized one (it maximises q and the sticks
    for these assignments), so the trace stays monotone. ``seen`` keeps each cluster's first division
    (``birth_candidates``); a division must also pass ``floor`` (``_Phase.moves``)."""
    counts, ceiling, k = assignments.counts, terms.n_clusters, assignments.counts.numel()
    current = terms.cluster(assignments.stats, torch.zeros_like(counts))
    held = float(current.sum()) + (0.0 if assignments.entropy is None else float(assignments.entropy.sum()))

    def objective(chosen):  # chosen: (the division's gain in cluster terms, cluster, moved rows, pieces)
        divided = counts.clone()
        for _, cluster, _, pieces in chosen:
            divided[cluster] = pieces["count"][0]
        born = [pieces["count"][1:] for *_, pieces in chosen]
        return held + sum(c[0] for c in chosen) + float(terms.sticks(torch.cat([divided, *born])))

    chosen, best, added = [], max(objective([]), floor), 0
    smallest = []  # for each cluster, (the objective with its smallest division that raises it alone, the division)
    for divisions in birth_candidates(x, assignments, terms.family, terms.prior, seed, responsibilities, clusters,
                                      seen):
        for cluster, moved, pieces, *_ in divisions:  # in order of size, up to the first that pays
            if k + len(moved) > ceiling:
                break
            gain = float(terms.cluster(pieces, torch.zeros_like(pieces["count"])).sum() - current[cluster])
            candidate = (gain, cluster, moved, pieces)
            if (value := objective([candidate])) > best:
                smallest.append((value, candidate))
                break
    for _, candidate in sorted(smallest, key=lambda c: c[0], reverse=True):
        if k + added + len(candidate[2]) > ceiling:
            continue
        trial = objective(chosen + [candidate])
        if trial > best:
            chosen, best, added = chosen + [candidate], trial, added + len(candidate[2])
    if not chosen:
        return None
    stats, origin = divided(assignments.stats, [(cluster, pieces) for _, cluster, _, pieces in chosen])
    labels = assignments.labels.clone()
    new_labels = iter(range(k, k + added))
    for _, _, moved, _ in chosen:
        for rows in moved:
            labels[rows] = next(new_labels)
    # a division hands each row's responsibility to one piece whole: the entropies stay (in the first)
    entropy = None if assignments.entropy is None else torch.cat([assignments.entropy, counts.new_zeros(added)])
    return Assignments(stats, labels, entropy=entropy, origin=origin)


def divided(stats: dict, divisions: list) -> tuple[dict, torch.Tensor]:
    """The clusters' statistics after ``divisions`` ((cluster, its pieces' statistics), no cluster
    twice): each divided cluster holds its first piece, the others are appended in turn; and each
    cluster's index before (-1 for a divided cluster and a piece born, ``Assignments.origin``)."""
    k = stats["count"].numel()
    out = {name: value.clone() for name, value in stats.items()}
    for cluster, pieces in divisions:
        for name in out:
            out[name][cluster] = pieces[name][0]
    out = {name: torch.cat([value, *(pieces[name][1:] for _, pieces in divisions)]) for name, value in out.items()}
    origin = torch.arange(out["count"].numel(), device=stats["count"].device)
    origin[[cluster for cluster, _ in divisions]] = -1
    origin[k:] = -1
    return out, origin


@dataclass(frozen=True)
class VMMSettings:
    """``fit_vmm``'s settings (its docstring): the sticks' prior, the pruning phase's precision, MAP
    assignments, the stopping rule, pruning, the moves, the memoized batches, the guard of step 2,
    the progress bar, and the clock the seconds count from (a ``time.perf_counter()`` value)."""

    alpha: float = 1.0
    discount: float = 0.0
    pruning_precision: float | None = None
    hard: bool = True
    max_iter: int = 100
    tol: float = 1e-6
    prune_threshold: float = 1e-3
    split_moves: bool = False
    merge_moves: bool = False
    batch_size: int | None = None
    guard: bool = True
    verbose: bool = False
    clock_start: float | None = None
    base_measure: BaseMeasure | None = None  # None: the prior as given throughout

    @property
    def sticks_prior(self) -> dict:
        return dict(alpha=self.alpha, discount=self.discount)


def fit_vmm(x: torch.Tensor, init_labels: torch.Tensor, n_clusters: int, *, family, prior,
            **settings) -> StickMixtureFit:
    """Run the MM iterations from a K-means start ([DPM-SGA] Algorithm 1, with MAP in place of SGA)
    for a conjugate component ``family`` (``bnpzoo.families``) under ``prior`` (a
    ``families.ComponentPrior``; its ``mean_precision`` is kappa0 of the last phase).

    Initialisation as in step 3.iv: E[z] = the K-means labels (``n_clusters`` of them), then q and
    E[v]. Each prior phase (the module docstring) stops when at most a fraction ``tol`` of the
    samples changed cluster (hard), when the relative change of the objective falls below ``tol``
    (soft), or after ``max_iter`` iterations. Both tests mean the same at every N; a test on the
    hard objective's relative change did not: on 1,000,000 x 64 a change of 4.4e-6 stopped the
    pruning phase after 2 iterations with 100 clusters left of 50 (NMI 0.931), where moving
    assignments run on to the 50. ``settings`` are ``VMMSettings``' fields. ``guard=False``
    reorganises unconditionally, as [PYPM-sVMM] V.D does (for comparison); ``split_moves`` proposes
    splits and the collapse in the last phase (the module docstring). Every pass over the data runs
    in blocks of rows (``expectation``).
    ``batch_size`` below N makes the learner memoized (``memoized_expectation``): the pass visits
    batches of that many consecutive rows and re-estimates q after each, and the objective is the
    memoized bound of the statistics (the same number, as the family's ``rows_term`` completes it).
    ``fit.seconds`` count from ``clock_start`` (a ``time.perf_counter()`` value; default: this call).
    ``base_measure`` (a ``families.BaseMeasure``, for a family with that capability): the last phase
    learns the prior's kappa0 and Sigma0 with the clusters, from two starts on the same labels (its
    ``schedules``); the fit of the higher bound is returned (its trace, iterations and learned
    ``prior``), as the evidence chooses between two local optima.
    """
    settings = VMMSettings(**settings)
    clock = time.perf_counter() if settings.clock_start is None else settings.clock_start
    learns = settings.base_measure is not None and family.capabilities.base_measure
    schedules = settings.base_measure.schedules() if learns else (None,)
    phases = [prior]
    if settings.pruning_precision is not None and settings.pruning_precision > prior.mean_precision:
        phases.insert(0, prior.with_mean_precision(settings.pruning_precision))
    bar = tqdm(total=settings.max_iter * len(phases) * len(schedules), disable=not settings.verbose, desc="vmm",
               unit="it")
    start = Assignments.from_labels(x, init_labels, n_clusters, family, phases[-1], settings.hard)
    fits = [_fit_from(x, start, family, phases, settings, schedule,
                      StickMixtureFit(q={}, point={}, sticks=x.new_empty(0), clock_start=clock), bar)
            for schedule in schedules]
    finish(bar)
    return max(fits, key=lambda fit: fit.objective_trace[-1])  # the start whose bound ends highest


def _fit_from(x, assignments: Assignments, family, phases: list, settings: VMMSettings, schedule,
              fit: StickMixtureFit, bar) -> StickMixtureFit:
    """One start of ``fit_vmm`` into ``fit``: its phases from the K-means start's ``assignments``, the
    base measure learned by ``schedule`` (None: held)."""
    n_clusters = assignments.counts.numel()
    batches, size = None, settings.batch_size
    if size is not None and size < x.shape[0]:
        batches = [slice(start, min(start + size, x.shape[0])) for start in range(0, x.shape[0], size)]
    rows_term = family.rows_term(x, phases[-1])
    for phase, phase_prior in enumerate(phases):
        fit.phase_starts.append(len(fit.objective_trace))
        terms = MemoizedTerms(family, phase_prior, settings.sticks_prior, n_clusters)
        last = phase == len(phases) - 1
        run = _Phase(x, terms, settings, splits=settings.split_moves and last, batches=batches, rows_term=rows_term,
                     base_measure=schedule if last else None)
        assignments, fit.converged = run.iterate(assignments, fit, bar)
        fit.prior = run.prior
    return fit


# Refined merges are tried once an iteration gains under NEAR * tol of the objective, not only once
# the assignments settle: under the data's covariance over 4 (``StickMixture._component_prior``)
# overlapping pieces of a 1-D cluster of 33,000 rows dissolved by ~1e-5 of the objective an
# iteration, 50 to 56 iterations (5.9 s) where a refined merge joins them at once (3 x 100,000 rows:
# 17 to 20 iterations, 2.7 s; 10: 27 to 30, 3.8 s).
NEAR = 100


class _Phase:
    """Steps 1-4 under one prior (``terms.prior``) until convergence (``iterate``). With ``batches``
    the pass is memoized (``memoized_expectation``) and the objective the memoized bound plus
    ``rows_term``; ``splits``: births and the collapse in this phase."""

    def __init__(self, x, terms: MemoizedTerms, settings: VMMSettings, *, splits: bool, batches=None,
                 rows_term=0.0, base_measure: BaseMeasure | None = None):
        self.x, self.terms, self.settings, self.splits = x, terms, settings, splits
        self.base_measure = base_measure  # None: the prior held
        self.learns_spread = base_measure is not None and base_measure.spread_from_start
        self.family, self.prior, self.batches, self.rows_term = terms.family, terms.prior, batches, rows_term
        self.trace = []
        self.births_due = True  # until a round of births keeps none, and again once the live clusters change
        self.refine_due = True  # refined merges before settling: until a round keeps none, again once clusters change

    def estimate(self, stats):  # steps 3-4: (q, its point, sticks)
        q = self.family.natural(stats, self.prior)
        return q, self.family.point(q, self.prior), update_sticks(stats["count"], **self.settings.sticks_prior)

    def maximise(self, assignments):
        """Steps 3-4, then one pass: (q, its point, sticks), step 1's assignments, the objective."""
        q, point, sticks = self.estimate(assignments.stats)
        pairs = assignments.merge_candidates() if self.settings.merge_moves else None
        hard, x = self.settings.hard, self.x
        if self.batches is not None:
            value = self.rows_term + memoized_bound(self.terms, assignments)
            return (q, point, sticks.to(x.dtype)), memoized_expectation(x, self.batches, self.family, self.prior,
                                                                        assignments, self.estimate, hard, pairs), value
        data_term, new = expectation(x, self.family, self.prior, (q, point, sticks), hard, assignments.labels, pairs)
        value = (data_term + stick_log_prior(sticks, **self.settings.sticks_prior, n_sticks=self.terms.n_clusters - 1)
                 - self.family.kl(q, self.prior).sum())
        return (q, point, sticks.to(x.dtype)), new, value.item()

    def refine(self, assignments, target):
        """Steps 1-4 from a proposal until its objective passes ``target``; None once it settles below."""
        previous = -float("inf")
        for _ in range(REFINE):
            _, new, objective = self.maximise(assignments.select(self.reorganise(assignments)))
            if objective > target:
                return new
            if objective - previous <= self.settings.tol * abs(objective):  # settled below the target
                return None
            previous, assignments = objective, new
        return None

    def learn_prior(self, q) -> None:
        """The base measure's step (``families.base_measure``): the prior that maximises the bound given
        the clusters' factors ``q``, for the next steps and the moves' scores."""
        if self.base_measure is None:
            return
        self.prior = learned_prior(self.family.base_measure_moments(q), self.prior, self.base_measure.most_precision,
                                   self.learns_spread)
        self.terms = replace(self.terms, prior=self.prior)

    def reorganise(self, assignments):  # step 2's order and pruning
        sticks_prior = self.settings.sticks_prior
        return reorder_and_prune(assignments.counts, sticks_prior["alpha"], self.settings.prune_threshold,
                                 sticks_prior["discount"], empty=EMPTY_ROWS)

    def iterate(self, assignments, fit, bar):
        """The phase's iterations; returns (assignments, converged)."""
        settings, trace = self.settings, self.trace
        for it in range(settings.max_iter + 1):
            began = time.perf_counter()
            # step 2: reorder by size, prune dead clusters; kept only where it does not lower the objective
            keep = self.reorganise(assignments)
            moved = not torch.equal(keep, torch.arange(assignments.counts.numel(), device=keep.device))
            estimates, new, value = self.maximise(assignments.select(keep))
            if settings.guard and moved and trace and value < trace[-1]:
                estimates, new, value = self.maximise(assignments)
            else:
                assignments = assignments.select(keep)
            fit.q, fit.point, fit.sticks = estimates
            self.learn_prior(fit.q)
            trace.append(value)
            fit.objective_trace.append(value)
            fit.seconds.append(time.perf_counter() - fit.clock_start)
            if it == settings.max_iter:
                return assignments, False
            # step 1: the new assignments (eq. (15)), from maximise's pass
            fit.n_iter += 1
            seconds = {"pass": time.perf_counter() - began}  # the iteration's parts, for the progress bar
            k = assignments.counts.numel()
            if settings.hard:
                converged = int((new.labels != assignments.labels).sum()) <= settings.tol * self.x.shape[0]
            else:
                converged = len(trace) > 1 and abs(value - trace[-2]) <= settings.tol * abs(trace[-2])
            assignments, converged = self.moves(new, converged, estimates, it, seconds)
            if converged and self.base_measure is not None and not self.learns_spread:
                self.learns_spread, converged = True, False  # settled under the guess: now learn Sigma0 too
            bar.update(1)
            bar.set_postfix({"k": k, "objective": f"{value:.4g}", **{part: f"{s:.2f}s" for part, s in seconds.items()}})
            if converged:
                return assignments, True

    def moves(self, assignments, converged: bool, estimates, it: int, seconds: dict):
        """Births once the assignments stand still, memoized merges at every iteration (those that
        need a pass once nearly settled), the collapse once nothing else changes the clusters;
        returns (assignments, converged), ``seconds`` gaining each move's time."""
        settings, trace, value = self.settings, self.trace, self.trace[-1]
        # a move must raise the memoized bound past the objective itself, where a family's memoized
        # bound of the current state is below it (``families.learned_scale``: a tangent taken at the
        # factors before): equal for the conjugate families, whose memoized bound is exact
        floor = value - self.rows_term
        if self.splits and converged and self.births_due:
            began = time.perf_counter()
            with small_work():
                shares = None if settings.hard else _responsibilities(self.family, self.prior, *estimates)
                born = propose_births(self.x, assignments, self.terms, seed=it, responsibilities=shares, floor=floor)
            seconds["births"] = time.perf_counter() - began
            self.births_due = born is not None
            if born is not None:
                assignments, converged, self.refine_due = born, False, True
        if settings.merge_moves:
            began = time.perf_counter()
            slow = self.refine_due and len(trace) > 1 and trace[-1] - trace[-2] <= NEAR * settings.tol * abs(trace[-2])
            merged = propose_merges(assignments, self.terms, lambda a: self.refine(a, value), value,
                                    tries=3 if converged else 1 if slow else 0, floor=floor)
            seconds["merges"] = time.perf_counter() - began
            self.refine_due = self.refine_due and not (slow and not merged)
            if merged:
                changed = _live(merged) != _live(assignments)
                self.births_due, self.refine_due = self.births_due or changed, self.refine_due or changed
                assignments, converged = merged, False
        if self.splits and converged:  # the collapse move, once nothing else changes the clusters
            whole = propose_whole(assignments, self.terms, floor)
            if whole is not None:
                assignments, converged, self.births_due, self.refine_due = whole, False, True, True
        return assignments, converged


def _live(assignments) -> int:
    """The clusters that hold rows."""
    return int((assignments.counts >= HOLDS_ROWS).sum())


def propose_whole(assignments, terms, floor=-float("inf")):
    """The collapse move: every row in one cluster, when that raises the memoized bound (``terms``,
    ``MemoizedTerms``). Merges see only pairs, and a K-means start cuts a cloud with no
    structure into cells of which no two gain from merging (each half of a Gaussian fits its rows
    far better than their union does), while the cloud whole is better than all of them: one
    axis-aligned 40-D Gaussian cloud, 5,000 rows, ended in 5 to 7 cells 38 to 61 nats below one
    cluster; 1,500 rows on the fixed scale in 1 to 10. For one cluster the memoized bound is
    exact (the responsibilities are all 1, their entropy 0; nothing is left to re-optimise but q
    and the sticks, which the next iteration does), so the move needs no pass and never lowers the
    objective (beyond float32 statistics' rounding: 0.003 of 323,213 nats once on 5,000 x 40).
    Births may divide the cluster again, only where that raises the objective further. Returns the
    collapsed assignments, or None."""
    if assignments.counts.numel() < 2:
        return None
    whole = assignments.whole()
    return whole if memoized_bound(terms, whole) > max(memoized_bound(terms, assignments), floor) else None


def _responsibilities(family, prior, q, point, sticks):
    """``Shares`` under the factors and sticks a pass used."""
    return Shares(family, prior, q, stick_breaking_log_weights(sticks), point)


@dataclass(frozen=True)
class Shares:
    """A soft division's shares: rows -> their responsibilities (M, K) under the factors ``factors``
    (the q that scored a record's statistics, which a division's pieces take theirs around:
    ``division_statistics``) and the clusters' ``log_weights``; ``held``, the responsibilities of
    the rows a caller divides, computed once (``holding``)."""

    family: object
    prior: object
    factors: dict | None
    log_weights: torch.Tensor | None
    point: dict | None = None
    held: torch.Tensor | None = None

    def __call__(self, rows):
        if self.held is not None:
            return self.held
        scores = self.family.expected_log_density(rows, self.factors, self.prior, self.point,
                                                  self.log_weights.to(rows.dtype))
        return torch.softmax(scores, 1)

    def holding(self, shares: torch.Tensor) -> "Shares":
        return replace(self, held=shares)


def propose_merges(assignments, terms: MemoizedTerms, refine, value, tries: int = 3, floor=-float("inf")):
    """Merge moves, scored first on the memoized bound (Hughes and Sudderth, NeurIPS 2013): the
    objective at fixed responsibilities, the merged pairs' summed, is the sum of ``terms.cluster``
    (each cluster's expected data term, entropy and -KL, from its statistics) and ``terms.sticks``
    (of the counts), so a candidate costs no pass over the data and O(K) beyond its own cluster.
    Candidates in order of their own gain, each kept when it raises the objective further (pairs
    sharing no cluster). The memoized gain is a lower bound (the responsibilities are not
    re-optimised): pieces of one Gaussian cloud gain only once the rows move, so when no candidate
    gains, the ``tries`` best are refined (``refine(proposal)``: up to ``REFINE`` iterations of steps
    1-4 from the merged state, stopped as soon as its objective passes ``value``, or once it settles
    below; the refined assignments, or None). One iteration is not enough: a 1-D cluster of 33,000
    rows held as three overlapping pieces (8 sd from its neighbours, on 18 of 30 fits) merged two
    of them at an objective below the three's after one pass, and 176 nats above it after the rows
    had moved for a few. Returns the merged assignments, or None when nothing raises the memoized
    objective of the current state (at least ``value``, the last iteration's: the assignments and
    then q were maximised since; compared only with itself, as a family's data term may leave out
    the rows' own terms, the same for every assignment) nor, refined, ``value``. The next
    iteration's objective is at least the memoized one (it maximises over q, the sticks and the
    responsibilities) or the refined one, so the trace stays monotone."""
    pairs = assignments.pairs
    if pairs is None or not len(pairs):
        return None
    with small_work():  # O(K) scores on one thread (bnpzoo.threads); the refinements are passes, on the fit's
        gains, chosen = _memoized_merges(assignments, terms, floor)
    if chosen:
        return assignments.merge(chosen)
    for _, p in gains[:tries]:
        refined = refine(assignments.merge([p]))
        if refined is not None:
            return refined
    return None


def _memoized_merges(assignments, memoized: MemoizedTerms, floor=-float("inf")):
    """``propose_merges``' scores: (every candidate's objective merged alone with its index, best
    first; the candidates chosen together, each raising the objective further)."""
    pairs = assignments.pairs
    counts = assignments.counts
    terms = memoized.cluster(assignments.stats, assignments.entropy)
    j, k = pairs.T
    merged_terms = memoized.cluster({name: value[j] + value[k] for name, value in assignments.stats.items()},
                                 assignments.pair_entropy)
    base = terms.sum()

    def objective(chosen):  # of the current state with the pairs ``chosen`` merged
        rest = torch.ones_like(counts, dtype=torch.bool)
        rest[k[chosen]] = False
        merged_counts = counts.clone().index_add_(0, j[chosen], counts[k[chosen]])[rest]
        gain = (merged_terms[chosen] - terms[j[chosen]] - terms[k[chosen]]).sum()
        return float(base + gain + memoized.sticks(merged_counts))

    best = start = max(objective([]), floor)  # at least ``value`` (the assignments and then q were maximised since)
    # every pair merged alone, in one batch: the counts with each pair's k folded into its j
    rows = torch.arange(len(pairs), device=counts.device)
    alone = counts.expand(len(pairs), -1).clone()
    alone[rows, j] += counts[k]
    kept = torch.ones_like(alone, dtype=torch.bool)
    kept[rows, k] = False
    singles = base + (merged_terms - terms[j] - terms[k]) + memoized.sticks(alone[kept].view(len(pairs), -1))
    gains = sorted(zip(singles.tolist(), range(len(pairs))), reverse=True)
    chosen, used, pair_list = [], set(), pairs.tolist()  # one host sync, not one a candidate
    for gain, p in gains:
        # the pairs that raise the objective alone, best first. (Tested against the objective after
        # the merges chosen before it, every pair whose own gain was below their sum was skipped:
        # one merge an iteration, and a fit of 1,000,000 x 32 merged the K-means start's emptied
        # clusters one an iteration, 59 iterations in 106 s; now 6 in 9.6 s, the same 20 clusters;
        # benchmarks/reports/pass.md)
        if gain <= start:
            break
        a, b = pair_list[p]
        if a in used or b in used:
            continue
        trial = objective(chosen + [p])
        if trial > best:
            chosen, best = chosen + [p], trial
            used.update((a, b))
    return gains, chosen
