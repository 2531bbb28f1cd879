"""Statistics memoized over the minibatches of a stochastic learner, for its births and merges.

Hughes and Sudderth ("Memoized online variational inference for Dirichlet process mixture
models", NeurIPS 2013; bnpy's memoized online VB) keep, for each of B fixed batches of rows, the
statistics of its last visit; their sum is the whole data's, so a move (a merge, a birth) is
judged on the memoized bound of ``inference.stick_mixture.vmm`` (``MemoizedTerms.cluster`` and
``.sticks``: the same bound as vmm's moves) without a pass over the data.

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


class Memo:
    """The record of one pass of fixed batches over ``n`` rows (the module docstring)."""

    def __init__(self, n: int, batch_size: int, device):
        order = torch.randperm(n)  # the CPU generator, as the learners' minibatches
        self.batches = [part.to(device) for part in torch.tensor_split(order, -(-n // batch_size))]  # equal sizes
        self.n, self.device = n, device
        self.queue, self.current = [], None
        self.reset()

    def reset(self, pairs: torch.Tensor | None = None) -> None:
        """Start a new record; ``pairs`` (P, 2): the merge candidates whose summed entropies it keeps
        (None: every pair, where there are at most ``ALL_PAIRS``: a record whose clusters' overlaps
        nothing has measured yet, as a stream's first batch)."""
        self.parts, self.pairs = {}, pairs
        self.labels = torch.full((self.n,), -1, dtype=torch.long, device=self.device)

    def draw(self) -> torch.Tensor:
        """The next batch's row indices; the batches in a new random order every pass."""
        if not self.queue:
            self.queue = torch.randperm(len(self.batches)).tolist()
        self.current = self.queue.pop()
        return self.batches[self.current]

    def record(self, stats: dict, resp: torch.Tensor) -> None:
        """The current batch's statistics and responsibilities (M, K), replacing its last visit's."""
        if self.pairs is None:
            k = resp.shape[1]
            every = torch.triu_indices(k, k, 1, device=resp.device).T
            self.pairs = every if len(every) <= ALL_PAIRS else every[:0]
        pairs = self.pairs
        summed = resp[:, pairs[:, 0]] + resp[:, pairs[:, 1]]
        self.parts[self.current] = {
            "stats": stats,
            "entropy": -torch.xlogy(resp, resp).sum(0).double(),
            "overlap": (resp.T @ resp).double(),
            "pair_entropy": -torch.xlogy(summed, summed).sum(0).double(),
        }
        self.labels[self.batches[self.current]] = resp.argmax(1)

    @property
    def complete(self) -> bool:
        """Every batch visited since the record began."""
        return len(self.parts) == len(self.batches)

    def assignments(self) -> Assignments:
        """The record as ``vmm.Assignments`` (sums over the batches, each row's last label)."""
        parts = list(self.parts.values())
        total = lambda key: sum(part[key] for part in parts)
        stats = {name: sum(part["stats"][name] for part in parts) for name in parts[0]["stats"]}
        return Assignments(stats, self.labels, total("overlap"), total("entropy"), self.pairs, total("pair_entropy"))
