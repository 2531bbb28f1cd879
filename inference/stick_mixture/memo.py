"""Statistics memoized over the minibatches of a stochastic learner, for its births and merges.

Hughes and Sudderth ("Memoized online variational inference for Dirichlet process mixture
models", NeurIPS 2013; bnpy's memoized online VB) keep, for each of B fixed batches of rows, the
statistics of its last visit; their sum is the whole data's, so a move (a merge, a birth) is
judged on the memoized bound of ``inference.stick_mixture.vmm`` (``MemoizedTerms.cluster`` and
``.sticks``: the same bound as vmm's moves) without a pass over the data.

A record holds at most ``window`` batches (``RECORD_BATCHES``): where the rows need more, it is the
first ``window`` batches of a pass in its random order, a sample of the rows whose statistics are
scaled to N (``scale``), so its memory is set by the batches and the clusters, never by the rows
(a record of every row kept 8 bytes a row of labels and, at 6,000,000 x 64 in 20 batches, a batch of
300,000 rows a step), and the moves and the convergence test are judged after ``window`` steps,
not after a pass. Such a record's memoized bound differs from the next one's by the sample too:
``noise`` is its standard error, from the batches' log marginal likelihoods (0 where the record
holds every row).

Here the stochastic learner visits the rows in fixed batches: a random partition of the rows made
once, the batches drawn in a new random order every pass (``draw``). Each step records its batch's
soft statistics, each row's most responsible cluster, the entropy of the responsibilities, their
overlaps (for merge candidates) and, for the candidate pairs chosen when the record began, the
entropy of each pair's summed responsibilities. Once every batch has been visited since the
record began (``complete``), ``assignments()`` is the record as ``vmm.Assignments``: what vmm's
``propose_merges`` and ``propose_births`` take. The record's batches were scored under factors that moved between
them: the memoized bound is the bound of those assignments, which is what a move compares (as in
the memoized learner's passes). A move changes the clusters, so the record starts again
(``reset``), with the pairs chosen from the last record's overlaps.
"""

import torch

from bnpzoo.inference.stick_mixture.vmm import Assignments

ALL_PAIRS = 256  # the most candidate pairs a record keeps before overlaps choose them
RECORD_BATCHES = 20  # the most batches a record holds (``inference.svi.memo_batch_size`` makes 20 a pass up to
# 200,000 rows: there the record is every row, as before)


class Memo:
    """The record of fixed batches over ``n`` rows, at most ``window`` of them (the module docstring)."""

    def __init__(self, n: int, batch_size: int, device, window: int = RECORD_BATCHES):
        order = torch.randperm(n)  # the CPU generator, as the learners' minibatches
        self.batches = [part.to(device) for part in torch.tensor_split(order, -(-n // batch_size))]  # equal sizes
        self.n, self.device, self.window = n, device, min(window, len(self.batches))
        self.current = None
        self.reset()

    def reset(self, last: Assignments | None = None) -> None:
        """Start a new record after ``last``, the last record or a move made of it: its merge candidates
        are the pairs whose summed entropies this record keeps, and its counts ``counts()`` keeps until
        this record completes. None: no record before (every pair, where there are at most
        ``ALL_PAIRS``: clusters whose overlaps nothing has measured yet, as a stream's first batch)."""
        self.parts = {}
        self.pairs, self.known = (None, None) if last is None else (last.merge_candidates(), last.counts)
        self.queue = []  # a new pass: the record completes after ``window`` steps, not up to twice as many

    def select(self, keep: torch.Tensor, k: int) -> None:
        """Of the ``k`` clusters, those in ``keep`` in that order (the session's reordering and
        pruning): each batch's columns follow, a dropped cluster's rows are in none (label -1), the
        pairs of kept clusters stay. Reset instead, the record of 300 clusters, reordered at nearly
        every evaluation, did not complete in 500 steps."""
        position = torch.full((k + 1,), -1, dtype=torch.long, device=keep.device)  # -1 indexes the last, -1
        position[keep] = torch.arange(keep.numel(), device=keep.device)
        both = None
        if self.pairs is not None:
            pairs = position[self.pairs]
            both = (pairs >= 0).all(1)
            self.pairs = pairs[both]
        if self.known is not None:
            self.known = self.known[keep]
        for part in self.parts.values():
            part["stats"] = {name: value[keep] for name, value in part["stats"].items()}
            part["entropy"], part["overlap"] = part["entropy"][keep], part["overlap"][keep][:, keep]
            part["labels"] = position[part["labels"]]
            if both is not None:
                part["pair_entropy"] = part["pair_entropy"][both]

    def draw(self) -> torch.Tensor:
        """The next batch's row indices; the batches in a new random order every pass."""
        if not self.queue:
            self.queue = torch.randperm(len(self.batches)).tolist()
        self.current = self.queue.pop()
        return self.batches[self.current]

    def record(self, stats: dict, resp: torch.Tensor, marginal: torch.Tensor) -> None:
        """The current batch's statistics, responsibilities (M, K) and log marginal likelihoods
        ln sum_k exp(score) (M,), replacing its last visit's."""
        if self.pairs is None:
            k = resp.shape[1]
            every = torch.triu_indices(k, k, 1, device=resp.device).T
            self.pairs = every if len(every) <= ALL_PAIRS else every[:0]
        pairs = self.pairs
        summed = resp[:, pairs[:, 0]] + resp[:, pairs[:, 1]]
        self.parts.pop(self.current, None)
        self.parts[self.current] = {
            "stats": stats,
            "entropy": -torch.xlogy(resp, resp).sum(0).double(),
            "overlap": (resp.T @ resp).double(),
            "pair_entropy": -torch.xlogy(summed, summed).sum(0).double(),
            "labels": resp.argmax(1),
            "marginal": marginal.double().mean(),
        }
        while len(self.parts) > self.window:  # the oldest visit leaves (a record never holds more)
            self.parts.pop(next(iter(self.parts)))

    @property
    def complete(self) -> bool:
        """``window`` batches visited since the record began."""
        return len(self.parts) == self.window

    @property
    def scale(self) -> float:
        """The rows each recorded row stands for."""
        return self.n / sum(self.batches[b].numel() for b in self.parts)

    def counts(self) -> torch.Tensor | None:
        """The recorded batches' soft counts of each cluster, scaled to N; until the record completes, at
        least the last record's (``reset``): a record of one batch held none of a class of 20 rows in
        40,000, so the session pruned the cluster that a birth had just found for it, and its parent
        was divided again at every record (40,000 x 256, 300 classes: 342 and 357 clusters in turn
        until the steps ran out). None where neither holds anything."""
        recorded = self.scale * sum(part["stats"]["count"] for part in self.parts.values()) if self.parts else None
        if self.complete or self.known is None:
            return recorded
        return self.known if recorded is None else torch.maximum(recorded, self.known.to(recorded))

    def rows(self) -> torch.Tensor:
        """The recorded rows' indices, ascending (every row's, 0 to N - 1, where the record holds every
        row), in the order of ``assignments().labels``."""
        return self._ordered()[0]

    def _ordered(self) -> tuple[torch.Tensor, torch.Tensor]:
        rows = torch.cat([self.batches[b] for b in self.parts])
        order = torch.argsort(rows)
        return rows[order], torch.cat([part["labels"] for part in self.parts.values()])[order]

    def noise(self) -> float:
        """The standard error of the record's bound as an estimate of the rows' (0 where it holds
        every row): N sd(the batches' mean log marginals) / sqrt(B), finite-population corrected."""
        held = len(self.parts)
        if held == len(self.batches) or held < 2:
            return 0.0
        means = torch.stack([part["marginal"] for part in self.parts.values()])
        return float(self.n * means.std() * ((1 - held / len(self.batches)) / held) ** 0.5)

    def assignments(self) -> Assignments:
        """The record as ``vmm.Assignments``, its sums scaled to N (each recorded row's label, in the
        order of ``rows()``)."""
        parts, scale = list(self.parts.values()), self.scale
        total = lambda key: scale * sum(part[key] for part in parts)
        stats = {name: scale * sum(part["stats"][name] for part in parts) for name in parts[0]["stats"]}
        labels = self._ordered()[1]
        return Assignments(stats, labels, total("overlap"), total("entropy"), self.pairs, total("pair_entropy"),
                           scale=scale)
