"""The stick mixtures' sampler (``inference.stick_mixture.sampler``, ``split_merge``): each move leaves
the joint of the partition and the data invariant (Geweke's joint-distribution check, in the form of
draws from the joint pushed through the kernel), the chain's posterior is the enumerated one on 8
rows, and the estimators' ``inference="gibbs"`` gives its chains, co-clustering and ArviZ data."""

import math
import warnings
from collections import Counter

import numpy as np
import pytest
import torch

from bnpzoo import DPBMM, DPGMM, PYPGGM
from bnpzoo.base import ConvergenceWarning
from bnpzoo.data import blobs
from bnpzoo.diagnostics import RHAT_LIMIT, arviz
from bnpzoo.families import ComponentPrior, NormalGammaFamily, NormalWishartFamily
from bnpzoo.inference.stick_mixture import sampler, split_merge
from bnpzoo.inference.stick_mixture.split_merge import SplitMergeMove, Target, log_partition_prior, split_prior
from bnpzoo.metrics import nmi
from conftest import interrupted

PRIOR_1D = ComponentPrior(mean=torch.zeros(1, dtype=torch.float64), mean_precision=0.5,
                          covariance=torch.eye(1, dtype=torch.float64), dof=3.0)


def prior_partition(n: int, alpha: float, discount: float) -> torch.Tensor:
    """Labels of n rows drawn from the Pitman-Yor Chinese restaurant."""
    labels, counts = [0], [1]
    for _ in range(1, n):
        weights = torch.tensor([c - discount for c in counts] + [alpha + len(counts) * discount])
        table = int(torch.multinomial(weights, 1))
        counts.append(1) if table == len(counts) else counts.__setitem__(table, counts[table] + 1)
        labels.append(table)
    return torch.tensor(labels)


def data_given(labels: torch.Tensor, family, prior) -> torch.Tensor:
    """x | partition: each cluster's (mean, precision) from the prior, then the rows."""
    k = int(labels.max()) + 1
    empty = family.label_statistics(prior.mean[None], torch.full((1,), -1), k, prior)
    point = family.draw(family.natural(empty, prior), prior)
    means, precisions = point["means"][labels], point["precisions"][labels]
    return means + torch.randn(means.shape, dtype=means.dtype) * precisions.rsqrt()


def summaries(labels: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Test functions of (partition, x): K, whether rows 0 and 1 share a cluster, the co-clustering
    weighted by the rows' closeness, whether the first and last rows share a cluster."""
    together = (labels[:, None] == labels[None, :]).double()
    near = torch.exp(-((x[:, None, 0] - x[None, :, 0]) ** 2))
    return torch.tensor([float(labels.max() + 1), float(together[0, 1]), float((together * near).sum()),
                         float(together[0, -1])])


@pytest.mark.parametrize("discount", [0.0, 0.5])
@pytest.mark.parametrize("step", ["moves", "labels"])
def test_each_step_leaves_the_joint_of_partition_and_data_invariant(step, discount):
    """Geweke's check of each step: (z, x) drawn from the model (a Pitman-Yor partition, cluster
    parameters from the prior, rows given them), z moved by a few applications of the step given x;
    the moved pairs must be draws from the same joint. Paired differences of test functions, each
    within 4.5 standard errors of 0 (a wrong acceptance ratio or a biased label draw moves them)."""
    torch.manual_seed(0)
    family, alpha, draws = NormalGammaFamily(), 1.0, 700
    differences = []
    for _ in range(draws):
        z = prior_partition(6, alpha, discount)
        x = data_given(z, family, PRIOR_1D)
        target = Target(family, PRIOR_1D, alpha, discount, x / x.std(0).clamp_min(1e-12))
        state = sampler.partition(target, x, z, int(z.max()) + 1)
        moves = SplitMergeMove(target, x)
        for _ in range(4):
            moves.attempt(state) if step == "moves" else sampler.draw_labels(target, x, state)
        differences.append(summaries(state.labels, x) - summaries(z, x))
    differences = torch.stack(differences)
    spread = differences.std(0) / math.sqrt(draws)
    moved = spread > 0
    assert moved.any()
    assert (differences.mean(0)[moved].abs() < 4.5 * spread[moved]).all(), differences.mean(0) / spread


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["tail", "halves"])
def test_each_move_kernel_alone_samples_every_enumerated_partition(kernel, monkeypatch):
    """Each kernel of ``SplitMergeMove`` alone (tails: detach and attach; halves: split and merge)
    on 5 close rows, where all 52 partitions hold mass: each partition's share of the attempts
    against its enumerated posterior, within 5 batch-means standard errors (plus 0.004). A wrong
    term in an acceptance ratio (a draw's probability, say) moves the small clusters' shares."""
    monkeypatch.setattr(split_merge, "TAIL_SHARE", 1.0 if kernel == "tail" else 0.0)
    torch.manual_seed(2)
    x = (torch.randn(5, 2) * 0.6).double()
    prior = ComponentPrior(mean=x.mean(0), mean_precision=0.5, covariance=torch.eye(2, dtype=torch.float64) * 0.5,
                           dof=2.0)
    target = Target(NormalGammaFamily(), prior, 3.0, 0.3, x / x.std(0))  # alpha 3: K = 1 to 5 all likely
    exact = _enumerated_log_joints(target, x)
    total = torch.logsumexp(torch.tensor(list(exact.values())), 0)
    state, moves = sampler.init(target, x), SplitMergeMove(target, x)
    attempts, batches = 40000, 40
    visited = []
    for _ in range(attempts):
        moves.attempt(state)
        visited.append(_canonical(state.labels))
    keys = list(exact)
    index = {key: i for i, key in enumerate(keys)}
    hits = torch.nn.functional.one_hot(torch.tensor([index[v] for v in visited]), len(keys)).double()
    shares = hits.view(batches, -1, len(keys)).mean(1)
    error = shares.std(0) / math.sqrt(batches)
    probability = torch.tensor([math.exp(exact[key] - total) for key in keys])
    assert (probability > 0.002).sum() == len(keys)  # mass everywhere: the test sees small clusters
    assert ((shares.mean(0) - probability).abs() < 5 * error + 0.004).all(), \
        (shares.mean(0) - probability).abs().max()


def _partitions(n: int):
    if n == 0:
        yield []
        return
    for blocks in _partitions(n - 1):
        for i in range(len(blocks)):
            yield blocks[:i] + [blocks[i] + [n - 1]] + blocks[i + 1:]
        yield blocks + [[n - 1]]


def _enumerated_log_joints(target, x) -> dict:
    """ln p(partition, x) of every partition of the rows of x, keyed by ``_canonical`` labels."""
    log_joints = {}
    for blocks in _partitions(x.shape[0]):
        labels = torch.empty(x.shape[0], dtype=torch.long)
        for k, block in enumerate(blocks):
            labels[block] = k
        log_joints[_canonical(labels)] = float(sampler.log_joint(target, sampler.partition(target, x, labels,
                                                                                           len(blocks))))
    return log_joints


def _canonical(labels: torch.Tensor) -> tuple:
    first = {}
    return tuple(first.setdefault(label, len(first)) for label in labels.tolist())


@pytest.mark.slow
@pytest.mark.parametrize("discount", [0.0, 0.5])
def test_the_chain_samples_the_enumerated_posterior_on_8_rows(discount):
    """The posterior over the 4,140 partitions of 8 rows, by enumeration, against the sampler's sweeps:
    the probability of each number of clusters within 5 batch-means standard errors (plus 0.005)."""
    torch.manual_seed(1)
    x = torch.cat([torch.randn(4, 2) * 0.5, torch.randn(4, 2) * 0.5 + 1.5]).double()
    prior = ComponentPrior(mean=x.mean(0), mean_precision=1.0, covariance=torch.eye(2, dtype=torch.float64) * 0.5,
                           dof=2.0)
    target = Target(NormalGammaFamily(), prior, 1.0, discount, x / x.std(0))
    exact = Counter()
    log_joints = _enumerated_log_joints(target, x)
    total = torch.logsumexp(torch.tensor(list(log_joints.values())), 0)
    for key, value in log_joints.items():
        exact[max(key) + 1] += math.exp(value - total)
    state, moves = sampler.init(target, x), SplitMergeMove(target, x)
    sweeps, batches = 6000, 30
    counts = torch.empty(sweeps)
    for t in range(sweeps):
        sampler.sweep(target, x, state, moves, 4)
        counts[t] = state.k
    for k, probability in exact.items():
        hits = (counts == k).double().view(batches, -1).mean(1)
        error = hits.std() / math.sqrt(batches)
        assert abs(hits.mean() - probability) < 5 * error + 0.005, (k, float(hits.mean()), probability)


@pytest.mark.parametrize("seed", range(4))
def test_a_climb_never_lowers_the_target_and_finds_separated_clusters_from_one(seed):
    """``SplitMergeMove.climb`` (the warm-up's first sweeps) takes only moves that raise ln p(partition,
    x), and from one cluster, with a label step after each pass, reaches the separated clusters in
    three passes with no surplus one; the exact sweeps after keep the statistics the labels hold."""
    torch.manual_seed(seed)
    data = blobs(n=2000, d=3, k=6, seed=seed)
    x = torch.as_tensor(data.X, dtype=torch.float64)
    prior = ComponentPrior(mean=x.mean(0), mean_precision=0.01, covariance=torch.eye(3, dtype=torch.float64),
                           dof=5.0)
    target = Target(NormalWishartFamily(), prior, 1.0, 0.0, x / x.std(0))
    state, moves = sampler.init(target, x), SplitMergeMove(target, x)
    for _ in range(3):
        before = float(sampler.log_joint(target, state))
        k = state.k
        taken = moves.climb(state)
        assert float(sampler.log_joint(target, state)) >= before - 1e-6 * abs(before)
        assert not moves.climbing and taken >= abs(state.k - k)
        sampler.draw_labels(target, x, state)
    assert state.k == 6 and nmi(data.labels, state.labels.numpy()) > 0.95
    assert moves.tried == {"split": 0, "merge": 0}  # the acceptance rates count the exact moves alone
    for _ in range(5):  # exact sweeps: a label step updates the statistics by the rows it moved
        sampler.sweep(target, x, state, moves, 4)
    fresh = sampler.partition(target, x, state.labels, state.k)
    for name, value in fresh.stats.items():
        assert torch.allclose(state.stats[name], value, rtol=1e-9, atol=1e-9), name
    assert torch.allclose(state.evidence, fresh.evidence, rtol=1e-9)


def test_the_partition_prior_and_its_split_ratio_agree():
    """split_prior is the ratio of log_partition_prior's values, for the DP and Pitman-Yor priors."""
    for alpha, discount in ((1.0, 0.0), (0.7, 0.5), (3.0, 0.25)):
        before = log_partition_prior(torch.tensor([5.0, 7.0, 2.0]), alpha, discount)
        after = log_partition_prior(torch.tensor([5.0, 3.0, 2.0, 4.0]), alpha, discount)
        assert torch.isclose(after - before, split_prior(alpha, discount, 3, 3.0, 4.0), atol=1e-10)


def test_the_cluster_evidence_is_the_closed_form_marginal_likelihood():
    """Normal-Gamma, one feature: ln p(x) in closed form (Murphy 2007, eq. 95) against log_evidence."""
    x = torch.tensor([[0.3], [1.2], [-0.4], [0.9]], dtype=torch.float64)
    prior = ComponentPrior(mean=torch.zeros(1, dtype=torch.float64), mean_precision=2.0,
                           covariance=torch.eye(1, dtype=torch.float64) * 0.8, dof=3.0)
    family = NormalGammaFamily()
    stats = family.label_statistics(x, torch.zeros(4, dtype=torch.long), 1, prior)
    n, a0, b0, k0 = 4, 1.5, 1.5 * 0.8, 2.0
    kn, an = k0 + n, a0 + n / 2
    bn = b0 + 0.5 * ((x - x.mean()) ** 2).sum() + k0 * n * x.mean() ** 2 / (2 * kn)
    closed = (math.lgamma(an) - math.lgamma(a0) + a0 * math.log(b0) - an * torch.log(bn)
              + 0.5 * math.log(k0 / kn) - n / 2 * math.log(2 * math.pi))
    assert torch.isclose(family.log_evidence(stats, prior)[0], closed, atol=1e-10)


def test_normal_wishart_draws_match_torch_wishart_in_distribution():
    """The family's Bartlett draws have the mean of the Wishart, nu W, and the means' spread."""
    torch.manual_seed(3)
    family = NormalWishartFamily()
    x = torch.randn(30, 3, dtype=torch.float64) @ torch.tensor([[1.0, 0.5, 0], [0, 1, 0.3], [0, 0, 2]],
                                                               dtype=torch.float64)
    prior = ComponentPrior(mean=torch.zeros(3, dtype=torch.float64), mean_precision=1.0,
                           covariance=torch.eye(3, dtype=torch.float64), dof=3.0)
    q = family.natural(family.label_statistics(x, torch.zeros(30, dtype=torch.long), 1, prior), prior)
    many = {name: value.expand(20000, *value.shape[1:]).clone() for name, value in q.items()}
    draws = family.draw(many, prior)
    precision = draws["precision_factor"] @ draws["precision_factor"].transpose(-2, -1)
    expected = family.point(q, prior)
    expected_precision = family.precision(expected)[0]
    assert torch.allclose(precision.mean(0), expected_precision, atol=0.03 * expected_precision.abs().max())
    assert torch.allclose(draws["means"].mean(0), expected["means"][0], atol=0.02)


UNMIXED = "ignore::bnpzoo.base.ConvergenceWarning"  # short chains' R-hat, which these tests do not judge


@pytest.mark.filterwarnings(UNMIXED)
@pytest.mark.parametrize("estimator", [DPGMM, PYPGGM])
def test_gibbs_finds_separated_clusters_from_one_and_reports_its_chains(estimator):
    data = blobs(n=600, d=3, k=4, seed=2)
    # 6 warm-up sweeps, 4 of them climbing (``sampler``): random_state 0 to 7 reach the 4 clusters
    fitted = estimator(inference="gibbs", max_iter=20, warmup=6, num_chains=2, random_state=0).fit(data.X)
    assert fitted.n_clusters_ == 4 and nmi(data.labels, fitted.predict(data.X)) > 0.95
    assert fitted.samples_["n_clusters"].shape == (2, 20) and fitted.samples_["log_joint"].shape == (2, 20)
    assert (fitted.samples_["n_clusters"] >= 4).all()
    rows = fitted.coclustering_rows_
    assert fitted.coclustering_.shape == (len(rows), len(rows))
    same = data.labels[rows][:, None] == data.labels[rows][None, :]
    assert fitted.coclustering_[same].mean() > 0.95 and fitted.coclustering_[~same].mean() < 0.05
    with np.errstate(invalid="ignore", divide="ignore"):  # a chain that holds one K throughout: R-hat 0 / 0
        summary = arviz().summary(fitted.to_arviz())
    assert {"log_joint", "n_clusters"} <= set(summary.index)


@pytest.mark.filterwarnings(UNMIXED)
def test_gibbs_fits_a_bernoulli_mixture_and_refuses_a_family_without_evidence():
    rng = np.random.default_rng(0)
    centres, truth = rng.random((3, 12)) < 0.5, rng.integers(0, 3, 300)
    X = (rng.random((300, 12)) < np.where(centres[truth], 0.9, 0.1)).astype(np.float32)
    fitted = DPBMM(inference="gibbs", max_iter=20, warmup=10, num_chains=1, random_state=0).fit(X)
    # the posterior holds a few rows apart in clusters of their own (the DP's small clusters); the
    # three centres are its three largest clusters, most of the rows
    labels = fitted.predict(X)
    largest = np.isin(labels, np.argsort(np.bincount(labels))[-3:])
    assert largest.mean() > 0.8
    assert nmi(truth[largest], labels[largest]) > 0.8  # one feature in ten flipped: about 0.87 at best
    with pytest.raises(ValueError, match="gibbs.*cluster evidence"):
        PYPGGM(inference="gibbs", likelihood="laplace", max_iter=5).fit(X)


@pytest.mark.filterwarnings(UNMIXED)
def test_gibbs_arguments_are_checked_and_saved(tmp_path):
    with pytest.raises(ValueError, match="num_chains applies to inference='gibbs'"):
        DPGMM(num_chains=2).fit(blobs(n=100, d=2, k=2, seed=0).X)
    data = blobs(n=200, d=2, k=2, seed=0)
    fitted = DPGMM(inference="gibbs", max_iter=10, warmup=5, num_chains=1, random_state=1).fit(data.X)
    fitted.save(tmp_path / "model.pt")
    loaded = DPGMM.load(tmp_path / "model.pt")
    assert np.array_equal(loaded.predict(data.X), fitted.predict(data.X))
    assert torch.equal(torch.as_tensor(loaded.samples_["log_joint"]), torch.as_tensor(fitted.samples_["log_joint"]))
    assert np.array_equal(loaded.coclustering_, fitted.coclustering_)


def _stopped_fit(data, folder, stop_at=None, **options):
    """A gibbs fit with checkpoints in ``folder``, stopped (KeyboardInterrupt) at the ``stop_at``-th sweep."""
    est = DPGMM(**dict(dict(inference="gibbs", max_iter=8, warmup=4, num_chains=2, checkpoint_every=3,
                            random_state=3), **options), checkpoint=folder)
    with interrupted(sampler, "sweep", stop_at):
        return est.fit(data.X)


@pytest.mark.filterwarnings(UNMIXED)
def test_a_gibbs_run_resumed_from_its_checkpoint_equals_the_uninterrupted_run(tmp_path, chains_in_this_process):
    data = blobs(n=300, d=2, k=3, seed=1)
    whole = _stopped_fit(data, None)
    # 12 sweeps a chain, a checkpoint every 3: stops in chain 0's warm-up (after its first
    # checkpoint), in chain 0's kept sweeps, and in chain 1 after its first checkpoint
    for stop_at in (5, 11, 17):
        folder = tmp_path / f"stop-{stop_at}"
        with pytest.raises(KeyboardInterrupt):
            _stopped_fit(data, folder, stop_at)
        resumed = _stopped_fit(data, folder)
        for name, value in whole.samples_.items():
            assert torch.equal(resumed.samples_[name], value), (stop_at, name)
        assert np.array_equal(resumed.means_, whole.means_) and np.array_equal(resumed.coclustering_,
                                                                                whole.coclustering_)
        assert resumed.acceptance_ == whole.acceptance_
    longer = _stopped_fit(data, tmp_path / "stop-5", max_iter=12)  # the chains continue
    assert longer.samples_["log_joint"].shape == (2, 12)
    assert torch.equal(longer.samples_["log_joint"][:, :8], whole.samples_["log_joint"])
    with pytest.raises(ValueError, match="other data or settings"):
        _stopped_fit(data, tmp_path / "stop-5", random_state=4)
    with pytest.raises(ValueError, match="checkpoint applies to inference='gibbs'"):
        DPGMM(checkpoint=tmp_path).fit(data.X)


def test_chains_that_have_not_mixed_warn_once_and_say_so_in_converged():
    data = blobs(n=300, d=8, k=12, seed=3, spread=3.0)  # overlapping clusters: K moves slowly
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fitted = DPGMM(inference="gibbs", max_iter=6, warmup=2, num_chains=2, random_state=0).fit(data.X)
    messages = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert not any("stopped after" in message for message in messages)  # a sampler has no tolerance test
    unmixed = max(fitted.rhat_.values()) > RHAT_LIMIT
    assert fitted.converged_ is not unmixed and len(messages) == int(unmixed)
