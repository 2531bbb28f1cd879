"""A Markov chain over the clusters of a stick mixture (DP or Pitman-Yor sticks, a conjugate family),
under ``pyro.infer.MCMC``: exact in every move, parallel over the rows in its label step.

The state is the partition (``Partition``: labels in 0..K-1, every cluster holding a row, and the
clusters' statistics). One sweep (``sweep``):

    step 1  split and merge moves on the partition, the clusters' parameters and weights integrated
            out (``split_merge``; (K + 1) / 2 attempts in warm-up, ``ATTEMPT_SHARE``, then as many
            as at its end);
    step 2  the weights and the parameters given the partition: (pi_1, ..., pi_K, pi_rest) ~
            Dir(n_1 - d, ..., n_K - d, alpha + K d) (the Pitman-Yor posterior of the weights given
            the partition) and theta_k ~ p(theta_k | x_k) (``family.draw``);
    step 3  every row's label at once: z_n ~ Cat(pi_k f(x_n | theta_k)) over the K clusters.

Why step 3 is exact. Given K, the joint of the labelled partition and step 2's variables is
EPPF(z) / K! * Dir(pi; n - d, alpha + K d) * prod_k p(theta_k) prod_n f(x_n | theta_{z_n}), and
EPPF(z) * Dir(pi; n - d, ...) is prod_k pi_k^{n_k - d - 1} times a function of K alone (the
Gamma(n_k - d) of the partition function cancel the Dirichlet's normaliser). So, with every cluster
kept non-empty, the labels are independent given (pi, theta) with p(z_n = k) propto pi_k f(x_n |
theta_k): Chang and Fisher's (2013) restricted Gibbs step. A draw that empties a cluster leaves the
state space of that K: it is proposed from the product above and rejected (a Metropolis-Hastings
independence step whose ratio is 1 inside the space and 0 outside), for all rows at once, or where
that empties a cluster, block by block (``LABEL_BLOCKS`` random blocks, drawn independently of the
state). Step 1 moves the partition with step 2's variables integrated out; step 2 then draws them
anew, so steps 1 and 2 together leave the joint invariant.

The warm-up. Its first sweeps climb (``SplitMergeMove.climb``), until a climb takes no move or
``CLIMB_SHARE`` of the warm-up has passed: every cluster's split tried, again on its pieces while
they split, then every cluster's merge, each move taken where it raises ln p(partition, x). From
one cluster a chain reaches the clusters of a mode in a few sweeps, with no surplus cluster: an
exact split can cut a cluster where its reverse merge is never proposed again (a piece that later
label steps make compact has a reverse split of ln q in the thousands of nats), and a chain grown
by exact moves alone kept such pieces for tens of sweeps (``benchmarks/reports/sampler.md``). The rest of the warm-up and every kept sweep are exact;
the warm-up, dropped, only chooses where the chain starts. Each chain climbs with its own draws, so
chains that settle in different modes still disagree, and R-hat says so.

``StickMixtureKernel`` is the thin ``MCMCKernel`` over ``init`` and ``sweep`` (as the coupled
sampler's, ``inference.coupled.kernel``): each ``sample`` is one sweep, returning fixed-shape
summaries (``log_joint``: ln p(partition, x), the clusters' parameters integrated out;
``n_clusters``; ``n_small``, the clusters holding under 1 % of the rows) that several chains stack
for R-hat, ESS and ``arviz.from_pyro``.
"""

import math
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import torch
from pyro.infer.mcmc.mcmc_kernel import MCMCKernel

from bnpzoo.inference.checkpoint import ChainCheckpoint, CheckpointedChain
from bnpzoo.ops import softmax_
from bnpzoo.inference.stick_mixture.split_merge import SplitMergeMove, Target, log_partition_prior

REBUILD_SHARE = 4  # a label step's statistics afresh where more than 1 / this of the rows moved
LABEL_BLOCKS = 8  # step 3's blocks where a draw of every row at once would empty a cluster
SMALL_SHARE = 0.01  # ``n_small`` counts the clusters holding fewer than this share of the rows
MIN_ATTEMPTS = 2  # split-merge attempts a sweep after a warm-up of none
ATTEMPT_SHARE = 0.5  # split-merge attempts a sweep, per cluster (and one) at the end of warm-up
CLIMB_SHARE = 0.6  # of the warm-up sweeps, the most that climb (``SplitMergeMove.climb``) before exact ones


@dataclass
class Partition:
    """The chain's state: ``labels`` (N,) in 0..K-1, each cluster holding a row, the clusters'
    ``stats`` (the family's, with K leading) and their log ``evidence`` (K,) (``Target.evidence``)."""

    labels: torch.Tensor
    stats: dict
    evidence: torch.Tensor

    @property
    def k(self) -> int:
        return self.evidence.numel()

    def update(self, labels: torch.Tensor, stats: dict, evidence: torch.Tensor) -> None:
        self.labels, self.stats, self.evidence = labels, stats, evidence


def partition(target: Target, x: torch.Tensor, labels: torch.Tensor, k: int) -> Partition:
    """The state of ``labels`` (every one of the k clusters holding a row)."""
    stats = target.family.label_statistics(x, labels, k, target.prior)
    return Partition(labels, stats, target.evidence(stats))


def log_joint(target: Target, partition: Partition, rows_term: float = 0.0) -> torch.Tensor:
    """ln p(partition, x), the clusters' parameters integrated out (``split_merge``'s target), with
    the rows' own terms ``rows_term`` that the family's evidence leaves out."""
    return (log_partition_prior(partition.stats["count"], target.alpha, target.discount)
            + partition.evidence.sum() + rows_term)


def draw_clusters(target: Target, partition: Partition):
    """Step 2: the clusters' log weights (K,) (normalised over the K clusters) and parameters."""
    counts = partition.stats["count"]
    shape = (counts - target.discount).clamp_min(1e-12)
    log_weights = torch.distributions.Gamma(shape, torch.ones_like(shape)).sample().clamp_min(1e-300).log()
    point = target.family.draw(target.family.natural(partition.stats, target.prior), target.prior)
    return log_weights - torch.logsumexp(log_weights, 0), point


def draw_labels(target: Target, x: torch.Tensor, state: Partition) -> None:
    """Steps 2 and 3: new labels for every row, the clusters kept non-empty (the module docstring)."""
    log_weights, point = draw_clusters(target, state)
    logits = target.family.log_density(x, point) + log_weights.to(x.dtype)
    probabilities = softmax_(logits)
    proposal = _draw_rows(probabilities)
    if not bool((torch.bincount(proposal, minlength=state.k) > 0).all()):
        # a fresh draw, taken block by block: the rejected one is not a draw of the product any more
        proposal = _blockwise(state.labels, _draw_rows(probabilities), state.k)
    stats = relabelled(target, x, state, proposal)
    state.update(proposal, stats, target.evidence(stats))


def relabelled(target: Target, x: torch.Tensor, state: Partition, labels: torch.Tensor) -> dict:
    """The clusters' statistics once the rows take ``labels``: the state's, less the moved rows' at
    their old labels, plus theirs at the new (the statistics add over rows), or taken afresh where
    more than ``1 / REBUILD_SHARE`` of the rows moved. Once the clusters settle a label step moves
    a few rows in 100,000."""
    moved = (labels != state.labels).nonzero()[:, 0]
    if moved.numel() * REBUILD_SHARE > labels.numel():
        return target.family.label_statistics(x, labels, state.k, target.prior)
    family, rows = target.family, x[moved]
    gained = family.label_statistics(rows, labels[moved], state.k, target.prior)
    lost = family.label_statistics(rows, state.labels[moved], state.k, target.prior)
    return {name: value + gained[name] - lost[name] for name, value in state.stats.items()}


def _draw_rows(probabilities: torch.Tensor) -> torch.Tensor:
    """One draw of each row's label from its row of ``probabilities``: the first k whose cumulative
    probability passes a uniform."""
    cumulative = probabilities.cumsum(1)
    uniform = torch.rand(len(cumulative), 1, dtype=cumulative.dtype, device=cumulative.device) * cumulative[:, -1:]
    return (cumulative < uniform).sum(1).clamp_max_(cumulative.shape[1] - 1)


def _blockwise(labels: torch.Tensor, proposal: torch.Tensor, k: int) -> torch.Tensor:
    """The rows' proposals taken block by block, each block's kept only where no cluster empties."""
    current, counts = labels.clone(), torch.bincount(labels, minlength=k)
    for block in torch.randperm(labels.numel(), device=labels.device).chunk(LABEL_BLOCKS):
        after = (counts - torch.bincount(current[block], minlength=k) + torch.bincount(proposal[block], minlength=k))
        if bool((after > 0).all()):
            current[block], counts = proposal[block], after
    return current


def sweep(target: Target, x: torch.Tensor, partition: Partition, moves: SplitMergeMove, attempts: int,
          climbing: bool = False) -> int:
    """One sweep of the chain (steps 1 to 3 of the module docstring), in place, with ``attempts``
    split-merge attempts: a number fixed beforehand, since a number read off the state (its K, say)
    would make the sweep's kernel leave the posterior (``StickMixtureKernel`` sets it in warm-up).
    ``climbing``: a warm-up sweep whose step 1 is ``SplitMergeMove.climb`` (no Markov step of the
    posterior: the warm-up's first sweeps, the module docstring). Returns the moves a climb took."""
    taken = moves.climb(partition) if climbing else 0
    for _ in range(0 if climbing else attempts):
        moves.attempt(partition)
    draw_labels(target, x, partition)
    return taken


def init(target: Target, x: torch.Tensor) -> Partition:
    """The chain's start: every row in one cluster (the split moves open the others)."""
    return partition(target, x, torch.zeros(x.shape[0], dtype=torch.long, device=x.device), 1)


class StickMixtureKernel(CheckpointedChain, MCMCKernel):
    """One chain over the partition of ``x`` (``Target``: the family, its prior, alpha, the discount);
    ``rows_term``: the family's rows' own terms (the log joint's constant); ``watched``: the rows whose
    labels every kept sweep records (the co-clustering); ``seed``: chain i seeds torch's generator with
    seed + i (None: it draws on as it is); ``state_dir``: a folder for each chain's last partition and
    recorded labels (chains in worker processes hand them back that way); ``checkpoint``: where each
    chain saves its state every few sweeps and resumes from (``inference.checkpoint``)."""

    def __init__(self, target: Target, x: torch.Tensor, *, rows_term: float = 0.0, watched=None, seed=None,
                 state_dir=None, checkpoint: ChainCheckpoint | None = None):
        self.target, self.x, self.rows_term, self.seed, self.checkpoint = target, x, rows_term, seed, checkpoint
        self._chain = 0
        self.watched = torch.zeros(0, dtype=torch.long) if watched is None else watched
        self.state_dir = state_dir
        self.transforms = {}
        self.model = None  # arviz.from_pyro reads it; None skips its observed-data group
        self.partition, self.moves, self.chains = None, None, []
        self._warmup_steps = self._t = 0
        self._recorded, self._trace = [], []

    def setup(self, warmup_steps, *args, **kwargs):
        self._warmup_steps, self._t, self._attempts, self._climbing = warmup_steps, 0, MIN_ATTEMPTS, True
        if self.seed is not None:
            torch.manual_seed(self.seed + self._chain)
        self.partition, self.moves = init(self.target, self.x), SplitMergeMove(self.target, self.x)
        self._recorded, self._trace, self._seconds, self._started = [], [], [], time.perf_counter()
        saved = self.resumed()  # sets the generators where the chain stopped
        if saved is not None:
            self._resume(saved)

    def _resume(self, state: dict) -> None:
        """The chain where its checkpoint left it (``_checkpoint_state``): its partition, adapted
        attempts, move counts and records."""
        device = self.x.device
        stats = {name: value.to(device) for name, value in state["stats"].items()}
        self.partition = Partition(state["labels"].to(device), stats, state["evidence"].to(device))
        self._attempts, self._climbing = int(state["attempts"]), bool(state["climbing"])
        self.moves.accepted, self.moves.tried = dict(state["accepted"]), dict(state["tried"])
        self._recorded, self._trace, self._seconds = list(state["recorded"]), list(state["trace"]), list(state["seconds"])
        self._started -= self._seconds[-1] if self._seconds else 0.0  # the chain's clock runs on

    def _checkpoint_state(self) -> dict:
        partition = self.partition
        return {"labels": partition.labels.cpu(), "stats": {name: value.cpu() for name, value in partition.stats.items()},
                "evidence": partition.evidence.cpu(), "attempts": self._attempts, "climbing": self._climbing,
                "accepted": dict(self.moves.accepted), "tried": dict(self.moves.tried), "recorded": self._recorded,
                "trace": self._trace, "seconds": self._seconds}

    def summary(self) -> dict:
        counts = self.partition.stats["count"]
        return {"log_joint": log_joint(self.target, self.partition, self.rows_term),
                "n_clusters": torch.tensor(float(self.partition.k), dtype=torch.float64),
                "n_small": (counts < SMALL_SHARE * counts.sum()).sum().double()}

    @property
    def initial_params(self):
        return self.summary()

    @initial_params.setter
    def initial_params(self, params):
        # the chain's index: the one value MCMC hands each chain (the chain draws its own start)
        self._chain = int(params.get("chain", 0))

    def sample(self, params):
        replayed = self.replayed()  # resumed: what the chain returned before it stopped
        if replayed is not None:
            return replayed
        if self._t < self._warmup_steps:  # warm-up adapts the attempts; the kept sweeps keep the last number
            self._attempts = max(MIN_ATTEMPTS, round(ATTEMPT_SHARE * (self.partition.k + 1)))
        climbing = self._climbing and self._t < CLIMB_SHARE * self._warmup_steps
        self._climbing = sweep(self.target, self.x, self.partition, self.moves, self._attempts, climbing) > 0
        self._t += 1
        summary = self.summary()
        self._trace.append(float(summary["log_joint"]))
        self._seconds.append(time.perf_counter() - self._started)
        if self._t > self._warmup_steps:
            self._recorded.append(self.partition.labels[self.watched.to(self.x.device)].cpu().to(torch.int32))
        self.recorded(summary)
        return summary

    def cleanup(self):
        if self.partition is None:
            return
        self.ended()
        chain = {"chain": self._chain, "labels": self.partition.labels.cpu(), "stats": {n: v.cpu() for n, v in self.partition.stats.items()},
                 "recorded": torch.stack(self._recorded) if self._recorded else torch.zeros(0, self.watched.numel()),
                 "trace": self._trace, "seconds": self._seconds, "accepted": dict(self.moves.accepted), "tried": dict(self.moves.tried)}
        self.chains.append(chain)
        if self.state_dir is not None:
            torch.save(chain, Path(self.state_dir) / f"chain-{uuid.uuid4().hex}.pt")
        self.partition = None

    def logging(self):
        return {"phase": "warmup" if self._t <= self._warmup_steps else "sample",
                "clusters": self.partition.k if self.partition is not None else 0}

    def diagnostics(self):
        return {"divergences": [], "sweeps": self._t}


def coclustering(recorded: torch.Tensor) -> torch.Tensor:
    """(m, m) the share of recorded sweeps in which two watched rows share a cluster, from labels
    (S, m)."""
    total = torch.zeros(recorded.shape[1], recorded.shape[1], dtype=torch.float64)
    for labels in recorded:  # one sweep at a time: (m, K) one-hot products, never (S, m, m)
        member = torch.nn.functional.one_hot(labels.long()).double()
        total += member @ member.T
    return total / recorded.shape[0] if recorded.shape[0] else total.fill_(math.nan)


@dataclass
class Chains:
    """What ``run_chains`` leaves: Pyro's ``MCMC`` (``arviz.from_pyro`` reads it), each chain's last
    partition, recorded labels of the watched rows, log-joint trace and move counts (``chains``,
    in chain order), and the best chain's index (the highest last log joint)."""

    mcmc: object
    chains: list
    best: int


def run_chains(kernel: StickMixtureKernel, *, num_samples: int, warmup: int, num_chains: int,
               verbose: bool = False) -> Chains:
    """``num_chains`` chains of ``kernel`` under ``pyro.infer.MCMC``, ``warmup`` sweeps each dropped
    and ``num_samples`` kept; chains in worker processes (where MCMC starts them: fewer chains than
    cores) hand their last state back through files."""
    import tempfile
    import warnings

    from pyro.infer import MCMC

    with tempfile.TemporaryDirectory() as folder:
        kernel.state_dir, kernel.chains = folder, []
        with warnings.catch_warnings():  # more chains than cores run one after the other, as documented
            warnings.filterwarnings("ignore", message="num_chains=", category=UserWarning)
            mcmc = MCMC(kernel, num_samples=num_samples, warmup_steps=warmup, num_chains=num_chains,
                        initial_params={"chain": torch.arange(num_chains).squeeze(0)}, mp_context="spawn",
                        disable_progbar=not verbose)
        mcmc.run()
        chains = [torch.load(path, weights_only=False) for path in Path(folder).glob("*.pt")]
        kernel.state_dir = None
    chains.sort(key=lambda chain: chain["chain"])
    best = max(range(len(chains)), key=lambda i: chains[i]["trace"][-1])
    return Chains(mcmc, chains, best)
