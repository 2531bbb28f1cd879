"""Split and merge moves over the partition of the rows, exact Metropolis-Hastings steps of the
collapsed posterior p(partition | x) of a DP or Pitman-Yor mixture with conjugate clusters.

The target. With theta_k integrated out, a partition into K clusters of sizes n_k has

    ln p(partition, x) = sum_{j=1}^{K-1} ln(alpha + j d) - ln (alpha + 1)_{N-1}
                         + sum_k [ln Gamma(n_k - d) - ln Gamma(1 - d)] + sum_k ln p(x_k)

(Pitman's exchangeable partition function; d = 0 is the Dirichlet process), ln p(x_k) the
family's ``log_evidence`` of the cluster's statistics. The discount enters every move through
``split_prior``: a split multiplies the partition's prior by (alpha + K d) Gamma(n_a - d)
Gamma(n_b - d) / (Gamma(1 - d) Gamma(n_a + n_b - d)), which for d > 0 favours small clusters.

The moves (one ``SplitMergeMove`` a call, ``attempt``): two kernels, each reversible, one drawn
per attempt by a coin that does not look at the state (``TAIL_SHARE`` for the second).

The halves kernel. A row r is drawn uniformly (1 / N both ways, so it cancels); with probability
1/2 its cluster c is split, else merged with a partner j:

    split  rows of c go to two sides drawn independently from a fresh template of c's rows
           (``template``: two halves, two seeds, the first a random row, the second drawn
           k-means++-like, a few 2-means rounds; or, a third of the time, a core and its shell,
           ``core_template``; then each row's probability of each side under a diagonal Gaussian
           per side, sharpened); q_split = the probability of the pair of sides, either way round;
    merge  j ~ P(j | c), a mixture of the softmax of the merge's own log target ratio over the other
           clusters and the uniform (``partner_log_probs``, ``UNIFORM_SHARE``).

The reverse of a split of c into (a, b), r in a, is the merge of a with b (probability P(b | a) in
the split state), and the reverse of a merge is the split of the merged cluster with a fresh
template (the template's random draws are made anew each time, independently of the state, so the
kernel is a mixture over them of reversible kernels). The acceptance is

    split  min(1, p(z') / p(z) * P(b | a; z') / q_split(a, b))
    merge  min(1, p(z') / p(z) * q_split(c, j; template of c u j) / P(j | c; z)).

The tail kernel, where small clusters open and close (and the discount acts):

    detach r drawn uniformly (1 / N); the rows of its cluster c near r (``tail_template``, a
           mixture of widths, summed exactly; r surely) leave as a new cluster b;
    attach a cluster b drawn with probability proportional to 1 / n_b, then r in it uniformly
           (``attach_log_prob``); b joins a partner c ~ P(c | b).

The reverse of a detach is the attach that draws b and r back, and the other way round, so each
ratio carries the two draws' probabilities besides q and P: a cluster of one row that a label step
left behind is drawn at once and joins the cluster it belongs to. Unlike Chang and Fisher's (2013)
sub-cluster moves, whose merge ratio is approximate, every probability here is computed exactly;
the halves template is theirs in spirit (a split along the cluster's own two-piece structure),
made fresh for each proposal. ``tests/test_stick_sampler.py`` checks each kernel alone against the
enumerated posterior.
"""

import math
from dataclasses import dataclass

import torch

UNIFORM_SHARE = 0.1  # the partner proposal's uniform part: every pair can be proposed
TEMPLATE_ROUNDS = 4  # 2-means rounds of a split's template
TEMPLATE_ROWS = 256  # the most rows a template is fitted on (it then scores them all)
TAIL_SHARE = 0.25  # of the attempts, the share that detach or attach a tail (``tail_template``)
CORE_SHARE = 1 / 3  # of the halves kernel's templates, the share that part a core from its shell
TAIL_WIDTHS = (1 / 64, 1 / 16, 1 / 4)  # a tail's spreads (of the cluster's), one drawn a detach
TAIL_WEIGHT = 0.05  # a tail's prior weight in its template
SHARPNESS = 3.0  # a template's side log-densities times this: near-sure sides (``_sides``)


def split_prior(alpha: float, discount: float, k: int, n_a, n_b) -> torch.Tensor:
    """ln p(split partition) - ln p(partition) of the stick prior, from K = ``k`` clusters to K + 1,
    one cluster of n_a + n_b rows cut into n_a and n_b (the module docstring)."""
    n_a, n_b = torch.as_tensor(n_a, dtype=torch.float64), torch.as_tensor(n_b, dtype=torch.float64)
    d = discount
    return (math.log(alpha + k * d) + torch.lgamma(n_a - d) + torch.lgamma(n_b - d) - torch.lgamma(n_a + n_b - d)
            - math.lgamma(1 - d))


def log_partition_prior(counts: torch.Tensor, alpha: float, discount: float) -> torch.Tensor:
    """ln p(partition) of clusters of sizes ``counts`` under the DP (discount 0) or Pitman-Yor prior."""
    counts = counts.double()
    k, n, d = counts.numel(), counts.sum(), discount
    j = torch.arange(1, k, dtype=torch.float64, device=counts.device)
    return (torch.log(alpha + j * d).sum() - (torch.lgamma(alpha + n) - math.lgamma(alpha + 1))
            + (torch.lgamma(counts - d) - math.lgamma(1 - d)).sum())


@dataclass(frozen=True)
class Target:
    """What the moves score: the family and its prior, the stick prior's alpha and discount, and the
    rows in the units the templates measure distances in (each feature over its spread)."""

    family: object
    prior: object
    alpha: float
    discount: float
    scaled: torch.Tensor

    def evidence(self, stats: dict) -> torch.Tensor:
        return self.family.log_evidence(stats, self.prior)

    def merge_gain(self, stats: dict, evidence: torch.Tensor, c: int) -> torch.Tensor:
        """ln p(z with c merged into j) - ln p(z) for every j, (K,) (-inf at c itself), the clusters
        holding ``stats`` with log evidences ``evidence``."""
        counts, k = stats["count"], stats["count"].numel()
        merged = {name: value + value[c] for name, value in stats.items()}
        gain = (self.evidence(merged) - evidence - evidence[c]
                - split_prior(self.alpha, self.discount, k - 1, counts, counts[c]))
        gain[c] = -math.inf
        return gain


def partner_log_probs(target: Target, stats: dict, evidence: torch.Tensor, c: int) -> torch.Tensor:
    """ln P(j | c), (K,): the merge partner's proposal (the module docstring); -inf at c."""
    return _mixed_with_uniform(target.merge_gain(stats, evidence, c), c)


def _mixed_with_uniform(gain: torch.Tensor, c: int) -> torch.Tensor:
    """ln of (1 - UNIFORM_SHARE) softmax(gain) + UNIFORM_SHARE / (K - 1), over j != c."""
    uniform = torch.full_like(gain, -math.log(gain.numel() - 1))
    mixed = torch.logaddexp(math.log1p(-UNIFORM_SHARE) + torch.log_softmax(gain, 0), math.log(UNIFORM_SHARE) + uniform)
    mixed[c] = -math.inf
    return mixed


def _pick(weights: torch.Tensor) -> torch.Tensor:
    """One index drawn with probability proportional to ``weights`` (all zero: uniformly)."""
    total = weights.sum()
    return torch.multinomial(weights if total > 0 else torch.ones_like(weights), 1)[0]


def _squared_distances(rows: torch.Tensor, centres: torch.Tensor, scale=1.0) -> torch.Tensor:
    """sum_d (rows_nd - centres_sd)^2 / scale_sd, (n, 2), by matrix products (no n x 2 x D tensor)."""
    scale = torch.as_tensor(scale, dtype=rows.dtype, device=rows.device).expand_as(centres)
    return ((rows * rows) @ (1 / scale).T - 2 * rows @ (centres / scale).T + (centres**2 / scale).sum(1)).clamp_min(0)


def template(rows: torch.Tensor, core_share: float = CORE_SHARE) -> torch.Tensor:
    """ln p(side | row), (n, 2): a fresh template of a cluster's ``rows`` (scaled units), fitted on
    ``TEMPLATE_ROWS`` of them drawn at random (all of them where fewer): with probability
    ``core_share`` a core and its shell (``core_template``), else two halves: two seeds, the first
    a random fitted row, the second drawn with probability proportional to its squared
    distance from the first (k-means++), ``TEMPLATE_ROUNDS`` rounds of 2-means, then each side's
    diagonal Gaussian (its spread shrunk toward the cluster's by one pseudo-row). It depends on
    the rows as a set and on torch's generator only."""
    fitted = rows if rows.shape[0] <= TEMPLATE_ROWS else rows[torch.randint(rows.shape[0], (TEMPLATE_ROWS,))]
    if torch.rand(()) < core_share:
        return core_template(rows, fitted)
    first = fitted[torch.randint(fitted.shape[0], (1,))[0]]
    centres = torch.stack([first, fitted[_pick(((fitted - first) ** 2).sum(1).double())]])
    for _ in range(TEMPLATE_ROUNDS):
        side = _squared_distances(fitted, centres).argmin(1)
        sums = fitted.new_zeros(2, fitted.shape[1]).index_add_(0, side, fitted)
        sizes = torch.bincount(side, minlength=2).to(fitted.dtype)[:, None]
        centres = torch.where(sizes > 0, sums / sizes.clamp_min(1), centres)
    side = _squared_distances(fitted, centres).argmin(1)
    sizes = torch.bincount(side, minlength=2).to(fitted.dtype)
    squares = fitted.new_zeros(2, fitted.shape[1]).index_add_(0, side, (fitted - centres[side]) ** 2)
    spread = fitted.var(0, unbiased=False).mean().clamp_min(1e-12)
    return _sides(rows, centres, (squares + spread) / (sizes[:, None] + 1), (sizes + 1) / (fitted.shape[0] + 2))


def core_template(rows: torch.Tensor, fitted: torch.Tensor) -> torch.Tensor:
    """ln p(side | row), (n, 2): a cluster's core against its shell, two diagonal Gaussians about the
    fitted rows' mean, their spreads s_1 < s_2 (times the rows' own) and weights from
    ``TEMPLATE_ROUNDS`` rounds of EM on the rows' squared distances (a scale mixture of chi^2_D).
    Two clusters about one centre, one broad, are what a label step makes of a cluster split in
    two by an earlier move; this template proposes their merge's reverse."""
    centre, variance = fitted.mean(0), fitted.var(0, unbiased=False).clamp_min(1e-12)
    distances = (((fitted - centre) ** 2) / variance).sum(1).double()
    dim = fitted.shape[1]
    scales, weights = distances.new_tensor([0.5, 2.0]), distances.new_tensor([0.5, 0.5])
    for _ in range(TEMPLATE_ROUNDS):
        shares = torch.softmax(weights.log() - 0.5 * dim * scales.log() - distances[:, None] / (2 * scales), 1)
        weights = (shares.mean(0) + 1 / fitted.shape[0]) / (1 + 2 / fitted.shape[0])  # never 0
        scales = ((shares * distances[:, None]).sum(0) + dim) / (dim * (shares.sum(0) + 1))  # a pseudo-row at 1
    variances = scales.to(rows.dtype)[:, None] * variance
    return _sides(rows, torch.stack([centre, centre]), variances, weights.to(rows.dtype))


def tail_template(rows: torch.Tensor, seed: int) -> torch.Tensor:
    """ln p(side | row, width), (W, n, 2), a uniform mixture over the ``TAIL_WIDTHS``: the rows near
    row ``seed`` of a cluster's ``rows`` (scaled units) on side 1, a diagonal Gaussian around it of
    the width times the cluster's spread with prior weight ``TAIL_WEIGHT``; side 0 the cluster's
    own diagonal Gaussian; the seed on side 1 surely. A function of the rows as a set and the seed
    only. The narrow widths detach one row or a few from a long cluster's core (where a label step
    can leave a cluster of one, ``sampler``), the wide ones a tail of many."""
    centre, variance = rows.mean(0), rows.var(0, unbiased=False).clamp_min(1e-12)
    # the distances once, in the cluster's spread; a width w scales side 1's by 1 / w and its
    # normaliser by w^(D/2) (ln |v|, common to both sides, cancels in the softmax)
    distances = _squared_distances(rows, torch.stack([centre, rows[seed]]), variance).double()
    widths = torch.tensor(TAIL_WIDTHS, dtype=torch.float64, device=rows.device)[:, None]
    bulk = (-0.5 * distances[:, 0] + math.log(1 - TAIL_WEIGHT)).expand(widths.shape[0], -1)
    near = -0.5 * (distances[:, 1] / widths + rows.shape[1] * widths.log()) + math.log(TAIL_WEIGHT)
    log_side = (SHARPNESS * torch.stack([bulk, near], dim=-1)).log_softmax(-1)  # (W, n, 2)
    log_side[:, seed] = torch.tensor([-math.inf, 0.0], dtype=log_side.dtype)
    return log_side


def draw_sides(log_side: torch.Tensor) -> torch.Tensor:
    """Sides (n,) drawn independently from a template (n, 2)."""
    return (torch.rand(log_side.shape[0], dtype=log_side.dtype, device=log_side.device) < log_side[:, 1].exp()).long()


def draw_tail(log_side: torch.Tensor) -> torch.Tensor:
    """Sides (n,) drawn from a tail template (W, n, 2): a width uniformly, then each row's side."""
    return draw_sides(log_side[torch.randint(log_side.shape[0], (1,))[0]])


def tail_log_prob(log_side: torch.Tensor, side: torch.Tensor) -> torch.Tensor:
    """ln q of the sides ``side`` (n,), side 1 the tail, under a tail template (W, n, 2)."""
    per_width = log_side.gather(2, side[None, :, None].expand(log_side.shape[0], -1, 1)).sum((1, 2))
    return torch.logsumexp(per_width, 0) - math.log(log_side.shape[0])


def _sides(rows, centres, variances, weights) -> torch.Tensor:
    """ln p(side | row) under two diagonal Gaussians (centres, variances (2, D)) with prior ``weights``,
    sharpened (``SHARPNESS``). Sides drawn near-surely make a split's ln q near 0, so that a split
    is taken where the target gains and seldom elsewhere: with the template's own probabilities,
    a noisy split of a cluster passed on its tiny q, and the label steps then made its piece
    compact, a state whose reverse merge no template proposes (``benchmarks/reports/sampler.md``)."""
    log_density = -0.5 * (_squared_distances(rows, centres, variances) + variances.log().sum(1)) + weights.log()
    return torch.log_softmax(SHARPNESS * log_density.double(), 1)


def sides_log_prob(log_side: torch.Tensor, side: torch.Tensor) -> torch.Tensor:
    """ln q of the unordered pair of sides ``side`` (n,) under the template ``log_side`` (n, 2)."""
    return torch.logaddexp(log_side.gather(1, side[:, None]).sum(), log_side.gather(1, 1 - side[:, None]).sum())


class SplitMergeMove:
    """Split and merge attempts on a ``Partition`` (``inference.stick_mixture.sampler``) in place."""

    def __init__(self, target: Target, x: torch.Tensor):
        self.target, self.x = target, x
        self.accepted = {"split": 0, "merge": 0}
        self.tried = {"split": 0, "merge": 0}
        self.climbing = False  # accept a move where it raises the target, and only there (``climb``)

    def attempt(self, partition) -> None:
        """One application of the kernel (the module docstring) at a uniformly drawn row: of the
        halves kernel, or with probability ``TAIL_SHARE`` of the tail kernel."""
        tail, split = bool(torch.rand(()) < TAIL_SHARE), bool(torch.rand(()) < 0.5)
        if not split and partition.k < 2:
            return
        if tail and not split:  # attach: a cluster drawn with probability 1 / n_c, then one of its rows
            c = int(torch.multinomial(attach_weights(partition.stats["count"]), 1)[0])
            members = self._rows(partition, c)
            r = int(members[torch.randint(members.numel(), (1,))[0]])
        else:
            r = int(torch.randint(partition.labels.numel(), (1,))[0])
            c = int(partition.labels[r])
        (self._split if split else self._merge)(partition, r, c, tail)

    def climb(self, partition) -> int:
        """A pass of greedy moves, for a warm-up that need not leave the posterior invariant: each
        cluster's split tried (the halves kernel with two halves, from a random row of it), and
        both pieces' again while they split; then each cluster's merge with a partner drawn as
        ``_merge`` draws it; every move taken where it raises the target and only there. From one
        cluster a pass bisects down to clusters whose halves no longer pay; the surplus clusters
        that a label step leaves are merged at once. Returns the moves it took; ``accepted`` and
        ``tried`` count the exact moves alone."""
        counts = dict(self.accepted), dict(self.tried)
        self.climbing = True
        try:
            waiting = list(range(partition.k))
            while waiting:
                c, k = waiting.pop(), partition.k
                members = self._rows(partition, c)
                self._split(partition, int(members[torch.randint(members.numel(), (1,))[0]]), c, False)
                waiting += [c, k] if partition.k > k else []
            for c in reversed(range(partition.k)):
                if 1 < partition.k and c < partition.k:
                    self._merge(partition, 0, c, False)
        finally:
            self.climbing = False
            taken = sum(self.accepted.values()) - sum(counts[0].values())
            self.accepted, self.tried = counts
        return taken

    def _threshold(self, log_ratio, gain) -> torch.Tensor:
        """ln u - ``log_ratio`` (the move's ln ratio but for the reverse's ln probability): the move is
        taken where the threshold falls below that. Climbing (a warm-up that is no Markov chain of
        the posterior, ``sampler``): -``gain``, the target's change alone, so that only moves that
        raise it are taken."""
        if self.climbing:
            return -gain
        return torch.log(torch.rand((), dtype=torch.float64)) - log_ratio

    def _rows(self, partition, *clusters) -> torch.Tensor:
        member = partition.labels == clusters[0]
        for other in clusters[1:]:
            member |= partition.labels == other
        return member.nonzero()[:, 0]

    def _pieces(self, partition, c: int, rows, side) -> dict:
        """The statistics of cluster c's two sides, (2, ...): side 1's summed, side 0's the rest."""
        moved = self.target.family.label_statistics(self.x[rows[side == 1]], side.new_zeros(int(side.sum())), 1,
                                                    self.target.prior)
        return {name: torch.cat([value[c:c + 1] - moved[name], moved[name]]) for name, value in partition.stats.items()}

    def _split(self, partition, r: int, c: int, tail: bool) -> None:
        """Split c: halves, r's side staying c; or a tail around r leaving as a new cluster."""
        rows = self._rows(partition, c)
        if rows.numel() < 2:
            return
        self.tried["split"] += 1
        at = int((rows == r).nonzero()[0, 0])
        if tail:
            log_side = tail_template(self.target.scaled[rows], at)
            side = draw_tail(log_side)
        else:
            log_side = template(self.target.scaled[rows], 0.0 if self.climbing else CORE_SHARE)
            side = draw_sides(log_side)
            side = side ^ side[at]  # r's side is 0: the cluster that stays c
        moving = int(side.sum())
        if moving in (0, rows.numel()):
            return  # no split proposed: the state is kept
        target, pieces = self.target, self._pieces(partition, c, rows, side)
        piece_evidence = target.evidence(pieces)
        log_ratio = (split_prior(target.alpha, target.discount, partition.k, rows.numel() - moving, moving)
                     + piece_evidence.sum() - partition.evidence[c])
        log_q = tail_log_prob(log_side, side) if tail else sides_log_prob(log_side, side)
        if tail:  # the reverse attach draws r (``attach_log_prob``) where this drew it uniformly
            counts = torch.cat([partition.stats["count"], partition.stats["count"].new_tensor([moving])])
            counts[c] -= moving
            log_q = log_q - attach_log_prob(counts, -1) - math.log(partition.labels.numel())
        threshold = self._threshold(log_ratio - log_q, log_ratio)
        if threshold >= 0:  # rejected whatever the reverse merge's ln P (at most 0)
            return
        after = {name: torch.cat([value, pieces[name][1:]]) for name, value in partition.stats.items()}
        for name in after:
            after[name][c] = pieces[name][0]
        evidence = torch.cat([partition.evidence, piece_evidence[1:]])
        evidence[c] = piece_evidence[0]
        new = partition.k  # the reverse merge starts from r's cluster: the new one for a tail
        if self.climbing or threshold < (partner_log_probs(target, after, evidence, new)[c] if tail else
                                         partner_log_probs(target, after, evidence, c)[new]):
            labels = partition.labels.clone()
            labels[rows[side == 1]] = new
            partition.update(labels, after, evidence)
            self.accepted["split"] += 1

    def _merge(self, partition, r: int, c: int, tail: bool) -> None:
        """Merge r's cluster c with a partner j; the reverse is the split of their union that
        ``_split`` would propose from r (a tail: c as the tail around r)."""
        self.tried["merge"] += 1
        stats, target = partition.stats, self.target
        gain = target.merge_gain(stats, partition.evidence, c)
        forward = _mixed_with_uniform(gain, c)
        j = int(torch.multinomial(forward.exp(), 1)[0])
        log_ratio = gain[j] - forward[j]
        if tail:  # the reverse detach draws r uniformly, where this drew it by ``attach_log_prob``
            log_ratio = log_ratio - attach_log_prob(stats["count"], c) - math.log(partition.labels.numel())
        threshold = self._threshold(log_ratio, gain[j])
        if threshold >= 0:  # rejected whatever the reverse split's ln q (at most 0): no template needed
            return
        rows = self._rows(partition, c, j)
        if not (self.climbing or threshold < self._split_log_q(partition, rows, r, c, j, tail)):
            return
        labels = partition.labels.clone()
        labels[rows] = c
        merged = {name: value.clone() for name, value in stats.items()}
        for name, value in merged.items():
            value[c] += stats[name][j]
        evidence = partition.evidence.clone()
        evidence[c] = target.evidence({name: value[c:c + 1] for name, value in merged.items()})[0]
        partition.update(*_drop(labels, merged, evidence, j))
        self.accepted["merge"] += 1

    def _split_log_q(self, partition, rows, r: int, c: int, j: int, tail: bool) -> torch.Tensor:
        """ln q of the split of the union ``rows`` of c and j back into them that ``_split`` would
        propose from r (a tail: c as the tail around r)."""
        scaled = self.target.scaled[rows]
        if tail:
            return tail_log_prob(tail_template(scaled, int((rows == r).nonzero()[0, 0])),
                                 (partition.labels[rows] == c).long())
        return sides_log_prob(template(scaled), (partition.labels[rows] == j).long())


def attach_weights(counts: torch.Tensor) -> torch.Tensor:
    """The attach move's draw of a cluster, (K,): 1 / n_c, so that a cluster of a few rows (a
    label step can leave one behind, ``sampler``) is drawn at once among large ones."""
    return 1 / counts.double()


def attach_log_prob(counts: torch.Tensor, c: int) -> float:
    """ln of the attach move's probability of drawing cluster c and then a given row of it."""
    weights = attach_weights(counts)
    return float((weights[c] / weights.sum()).log() - counts[c].double().log())


def _drop(labels: torch.Tensor, stats: dict, evidence: torch.Tensor, j: int):
    """Labels, statistics and evidences without the (emptied) cluster j: the last takes its index."""
    last = evidence.numel() - 1
    if j != last:
        labels[labels == last] = j
        for value in (*stats.values(), evidence):
            value[j] = value[last]
    return labels, {name: value[:last] for name, value in stats.items()}, evidence[:last]
