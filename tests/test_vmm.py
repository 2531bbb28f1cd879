"""The batch learner: a monotone objective for every stick prior, recovery of the generating clusters."""

import numpy as np
import pyro
import pytest
import torch

from bnpzoo import DPGMM
from bnpzoo.data import blobs
from bnpzoo.families import ComponentPrior, gaussian_family
from bnpzoo.inference.kmeans import kmeans
from bnpzoo.inference.stick_mixture.sticks import reorder_and_prune
from bnpzoo.inference.stick_mixture.vmm import HOLDS_ROWS, expectation, fit_vmm
from bnpzoo.metrics import nmi
from bnpzoo.ops import default_sigma
from conftest import match_means


def _mixture_test_data(seed, n=500, k=3, d=2):
    """scikit-learn's mixture-test data (sklearn/mixture/tests: RandomData): means uniform on
    [0, 50]^d, random weights and per-cluster spherical variances in [0.5, 1.5]."""
    rng = np.random.RandomState(seed)
    weights = rng.rand(k)
    means = rng.rand(k, d) * 50
    var = 0.5 + rng.rand(k)
    z = rng.choice(k, size=n, p=weights / weights.sum())
    return means[z] + rng.randn(n, d) * np.sqrt(var[z])[:, None]


def _prior(x, std, mean_precision=1.0):
    d = x.shape[1]
    std = torch.as_tensor(std, dtype=x.dtype).expand(d)
    return ComponentPrior(mean=x.mean(0), mean_precision=mean_precision, covariance=torch.diag(std**2), dof=float(d))


def _fit(x, hard, covariance="fixed", **kw):
    x = torch.as_tensor(x, dtype=torch.float64)
    init, labels = kmeans(x, 30, seed=0)
    return fit_vmm(x, labels, init.shape[0], family=gaussian_family(covariance),
                   prior=_prior(x, default_sigma(x, init, labels)), hard=hard, max_iter=200, tol=0.0, **kw)


def _monotone(fit):
    """The objective never drops within a prior phase (it changes at a phase's start)."""
    bounds = fit.phase_starts[1:] + [len(fit.objective_trace)]
    for start, end in zip(fit.phase_starts, bounds):
        trace = np.array(fit.objective_trace[start:end])
        steps = np.diff(trace)
        assert (steps >= -1e-9 * np.abs(trace[:-1])).all(), (start, steps.min())


@pytest.mark.parametrize("hard", [True, False], ids=["hard", "soft"])
@pytest.mark.parametrize("discount", [0.0, 0.5])
@pytest.mark.parametrize("alpha", [0.1, 1.0, 20.0])
def test_the_objective_never_drops_for_any_stick_prior(digits, alpha, discount, hard):
    data = [digits.X[:400], _mixture_test_data(0), _mixture_test_data(1, k=5, d=3)]
    for x in data:
        _monotone(_fit(x, hard, alpha=alpha, discount=discount, pruning_precision=20.0))


@pytest.mark.parametrize("covariance", ["full", "diag", "spherical"])
@pytest.mark.parametrize("hard", [True, False], ids=["hard", "soft"])
@pytest.mark.parametrize("discount", [0.0, 0.5])
@pytest.mark.parametrize("alpha", [0.1, 1.0, 20.0])
def test_the_objective_never_drops_for_a_learned_covariance(alpha, discount, hard, covariance):
    """Within each phase, with merge moves (accepted only when the objective rises) and a pruning phase."""
    for x in [_mixture_test_data(0), _mixture_test_data(1, k=5, d=3)]:
        _monotone(_fit(x, hard, covariance, alpha=alpha, discount=discount, pruning_precision=20.0,
                       merge_moves=True))


@pytest.mark.parametrize("covariance, hard", [("fixed", True), ("fixed", False), ("full", False), ("diag", True)])
def test_the_memoized_learner_climbs_the_same_objective_to_the_same_fit(covariance, hard):
    """Batches of 97 rows with q re-estimated after each: the objective (the memoized bound, which
    ``rows_term`` completes) never drops, and it converges to the batch learner's fit and objective
    from the same start. The memoized objective of the start is the batch learner's first value."""
    x = torch.as_tensor(_mixture_test_data(2, n=600, k=4, d=3))
    init, labels = kmeans(x, 12, seed=0)
    common = dict(family=gaussian_family(covariance), prior=_prior(x, 1.0), hard=hard, max_iter=300, tol=1e-10,
                  merge_moves=covariance != "fixed", pruning_precision=None)
    batch = fit_vmm(x, labels, 12, **common)
    memo = fit_vmm(x, labels, 12, batch_size=97, **common)
    _monotone(memo)
    # the clusters that hold rows (an emptying cluster's count halves an iteration until it is pruned, at
    # EMPTY_ROWS: how many are left depends on when each learner stopped)
    holds = [common["family"].counts(fit.q, common["prior"]) >= HOLDS_ROWS for fit in (batch, memo)]
    assert memo.converged and memo.means[holds[1]].shape == batch.means[holds[0]].shape
    assert torch.allclose(memo.means[holds[1]], batch.means[holds[0]], atol=1e-4)
    assert memo.objective_trace[-1] == pytest.approx(batch.objective_trace[-1], rel=1e-6)
    if hard:  # the soft batch learner's first value sums z out: at least the start's
        assert memo.objective_trace[0] == pytest.approx(batch.objective_trace[0], rel=1e-9)


def test_without_the_guard_the_papers_reorganisation_lowers_the_objective():
    """[PYPM-sVMM] V.D's unconditional reordering (guard=False) loses objective at alpha = 20 (the
    stick prior is not exchangeable), so the monotonicity test above can fail."""
    drops = [np.diff(_fit(_mixture_test_data(seed, k=k), True, alpha=20.0, pruning_precision=None,
                          guard=False).objective_trace).min() for seed in range(4) for k in (2, 3, 5)]
    assert min(drops) < -1.0


def test_split_moves_open_clusters_and_keep_the_objective_monotone():
    """On data whose true clusters K-means at K = 4 cannot separate, splits open the missing ones."""
    rng = np.random.default_rng(0)
    centres = rng.normal(0.0, 6.0, size=(10, 3))
    z = rng.integers(0, 10, 2000)
    x = torch.as_tensor(centres[z] + rng.normal(size=(2000, 3)))
    init, labels = kmeans(x, 4, seed=0)
    common = dict(family=gaussian_family("fixed"), prior=_prior(x, 1.0), pruning_precision=None, max_iter=300,
                  tol=0.0)
    plain = fit_vmm(x, labels, 4, **common)
    split = fit_vmm(x, labels, 10, split_moves=True, **common)  # room for 10 clusters: truncation 10
    assert plain.means.shape[0] == 4 and split.means.shape[0] == 10 and split.converged
    nearest_true = ((x.numpy()[:, None] - centres[None]) ** 2).sum(-1).argmin(1)  # the best any fit can do
    assert nmi(z, vmm_predict(x, split)) > nmi(z, nearest_true) - 0.02
    _monotone(split)


@pytest.mark.parametrize("batch_size", [None, 100], ids=["batch", "memoized"])
@pytest.mark.parametrize("covariance, hard", [("fixed", True), ("diag", False)], ids=["fixed", "diag-soft"])
def test_the_collapse_move_leaves_a_cloud_with_no_structure_whole(covariance, hard, batch_size, random_state):
    """One axis-aligned 40-D Gaussian cloud (400 rows, spreads 0.5 to 2) from a K-means start of 30:
    without moves the fit mostly ends in several cells (the fixed scale in 9 to 17, the diagonal
    family in 3 to 8, on four draws), no two of which gain from a merge; the collapse move puts
    every row in one cluster, where the bound is higher, and the objective never drops (batch and
    memoized)."""
    rng = np.random.default_rng(random_state)
    x = rng.normal(size=(400, 40)) * rng.uniform(0.5, 2.0, 40)
    plain = _fit(x, hard, covariance, pruning_precision=None, batch_size=batch_size)
    moved = _fit(x, hard, covariance, pruning_precision=None, split_moves=True, batch_size=batch_size)
    assert moved.means.shape[0] == 1 and moved.objective_trace[-1] >= plain.objective_trace[-1]
    _monotone(moved)


@pytest.mark.parametrize("batch_size", [None, 1000], ids=["batch", "memoized"])
@pytest.mark.parametrize("covariance, hard", [("fixed", True), ("full", True), ("diag", True), ("spherical", True),
                                              ("full", False)], ids=["fixed", "full", "diag", "spherical", "full-soft"])
def test_births_open_fifty_clusters_from_a_start_with_two(covariance, hard, batch_size):
    """50 well-separated clusters (10-D, 100 rows each, in order), a K-means start with 2 and room
    for 100, batch and memoized (5 batches of 10 clusters each): the births divide the clusters round
    by round to the 50 (the spherical family's globs into 4 or 8 pieces, where halves do not pay),
    every accepted move raising the bound."""
    rng = np.random.default_rng(0)
    centres = rng.normal(0.0, 5.0, size=(50, 10))
    z = np.repeat(np.arange(50), 100)
    x = torch.as_tensor(centres[z] + rng.normal(size=(5000, 10)))
    _, labels = kmeans(x, 2, seed=0)
    family = gaussian_family(covariance)
    fit = fit_vmm(x, labels, 100, family=family, prior=_prior(x, 1.0), split_moves=True, hard=hard,
                  merge_moves=family.capabilities.moves, max_iter=200, batch_size=batch_size)
    _, assigned = expectation(x, family, _prior(x, 1.0), (fit.q, fit.point, fit.sticks), True,
                              torch.zeros(len(x), dtype=torch.long))
    assert abs(fit.means.shape[0] - 50) <= 2 and fit.converged
    assert nmi(z, assigned.labels.numpy()) >= 0.99
    _monotone(fit)


def test_with_births_a_pitman_yor_discount_keeps_more_small_clusters():
    """Five draws of a Pitman-Yor mixture (d = 0.5, 4,000 rows in 6-D, 105 to 145 clusters under
    1 % of the rows): fits with births and d = 0.5 keep more clusters under 1 % than with d = 0,
    summed over the draws (257 against 246 when written, more or equal in each draw; without
    births 61 against 58, one draw the other way), and so come closer to the truth (638)."""
    from bnpzoo import PYPGGM
    from bnpzoo.models import pyp_ggm

    def small(labels):
        counts = np.bincount(labels)
        return int((counts[counts > 0] < 0.01 * len(labels)).sum())

    truth, kept = 0, {0.0: 0, 0.5: 0}
    for seed in range(5):
        pyro.set_rng_seed(seed)
        trace = pyro.poutine.trace(pyp_ggm.model).get_trace(None, truncation=300, alpha=2.0, discount=0.5, rho=2.0,
                                                            prior_precision=0.05, num_data=4000, dim=6)
        x, z = trace.nodes["x"]["value"].numpy(), trace.nodes["z"]["value"].numpy()
        truth += small(z)
        for d in kept:
            est = PYPGGM(likelihood="gaussian", inference="vmm", discount=d, truncation=100, scale=1.0,
                         split_moves=True, random_state=seed).fit(x)
            kept[d] += small(est.predict(x))
    assert kept[0.0] < kept[0.5] < truth


def test_an_over_segmented_start_ends_at_the_true_number_of_clusters(random_state):
    """Ten clusters with random covariances (3,000 x 5) and a K-means start at truncation 100: the
    default learner (full covariances, merges and births) ends with the ten."""
    rng = np.random.default_rng(0)
    centres, z = rng.normal(0, 4, size=(10, 5)), rng.integers(0, 10, 3000)
    shapes = rng.normal(size=(10, 5, 5)) * 0.4 + np.eye(5)
    x = centres[z] + np.einsum("nij,nj->ni", shapes[z], rng.normal(size=(3000, 5)))
    est = DPGMM(truncation=100, random_state=random_state).fit(x)
    assert abs(est.n_clusters_ - 10) <= 1 and nmi(z, est.predict(x)) > 0.95


def vmm_predict(x, fit):
    from bnpzoo.inference.stick_mixture.vmm import assignment_scores

    return assignment_scores(x, fit.means, fit.sticks, 1.0).argmax(1).numpy()


def test_pruning_keeps_clusters_sorted_by_size_and_drops_empty_ones():
    counts = torch.tensor([3.0, 0.0, 10.0, 1.0, 0.0])
    keep = reorder_and_prune(counts, 1.0, 1e-3)
    assert keep.tolist() == [2, 0, 3]
    # soft counts are never 0: below ``empty`` a cluster is empty, the last one included (its stick stays
    # near 1 / (1 + alpha) whatever its count, so the stick's threshold never drops it)
    soft = torch.tensor([3.0, 1e-20, 10.0, 1e-9, 1e-30], dtype=torch.float64)
    assert reorder_and_prune(soft, 1.0, 1e-3).tolist() == [2, 0, 3, 1, 4]
    assert reorder_and_prune(soft, 1.0, 1e-3, empty=1e-12).tolist() == [2, 0, 3]


@pytest.mark.parametrize("inference", ["vmm", "vi"])
def test_recovers_six_clusters_drawn_from_the_model(model_draw, inference, random_state):
    X, z, means = model_draw
    # run to convergence (tol 1e-7): vi's default tol stops its last Adam steps some 0.03 short
    est = DPGMM(truncation=20, inference=inference, tol=1e-7, random_state=random_state).fit(X)
    assert est.n_clusters_ == 6
    assert nmi(z, est.predict(X)) > 0.99
    # the fitted means are the posterior mode given the true assignments under the prior the fit
    # learned (``prior_precision_``, lambda0; the pruning phase's stronger prior is gone) ...
    counts = np.bincount(z, minlength=6)[:, None]
    sums = np.stack([X[z == k].sum(0) for k in range(6)])
    kappa0 = est.prior_precision_
    mode = (sums + kappa0 * X.mean(0)) / (counts + kappa0)
    assert match_means(mode, est.means_) < 0.02
    # ... which lies within the sampling error of the generating means (200 samples a cluster)
    assert match_means(means, est.means_) < 0.25


def test_an_unseeded_kmeans_draws_from_torchs_generator_without_reseeding_it():
    """kmeans(seed=None) takes its seed from torch's generator: under the caller's
    ``torch.manual_seed`` the start and everything the caller draws after it reproduce."""
    x = torch.randn(200, 3, generator=torch.Generator().manual_seed(0))
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        labels = kmeans(x, 4)[1]
        runs.append((labels, torch.rand(3)))
    assert torch.equal(runs[0][0], runs[1][0]) and torch.equal(runs[0][1], runs[1][1])


def test_birth_candidates_take_each_clusters_members_in_row_order():
    """The rows k-means divides are drawn by position among a cluster's members, so their order
    must be the rows' own: an unstable sort of the labels gave another order on CUDA than on the
    CPU (and on the CPU from 2,000 or so rows), and so other births (gpu.md, fourth lease)."""
    from types import SimpleNamespace

    from bnpzoo.inference.stick_mixture.vmm import birth_candidates

    x = torch.as_tensor(_mixture_test_data(0, n=6000), dtype=torch.float64)
    labels = torch.randint(0, 3, (6000,), generator=torch.Generator().manual_seed(0))
    assignments = SimpleNamespace(labels=labels, counts=torch.bincount(labels, minlength=3).double(), scale=1.0)
    divided = 0
    for divisions in birth_candidates(x, assignments, gaussian_family("fixed"), _prior(x, 1.0), seed=0):
        for cluster, moved, *_ in divisions:
            for rows in moved:
                assert bool((labels[rows] == cluster).all()) and bool((rows.diff() > 0).all())
                divided += 1
    assert divided >= 3


@pytest.mark.parametrize("hard", [True, False], ids=["hard", "soft"])
@pytest.mark.parametrize("batch_size", [None, 10_000], ids=["batch", "memoized"])
def test_a_cluster_of_the_far_tails_is_merged_away_once_its_rows_have_moved(hard, batch_size, monkeypatch):
    """Three 1-D clusters of 10,000 rows and a fourth of their rows beyond 3 sd: every learner ends
    at the three, the bound rising throughout. The memoized soft learner (the default's on more than
    50,000 rows) stays at four when a merge is judged one pass after it is made (``REFINE = 1``):
    each step 1 leaves the tails' responsibilities where they are, and a merge widens a large
    cluster for all of them before they move to the clusters they came from."""
    import bnpzoo.inference.stick_mixture.vmm as vmm

    rng = np.random.default_rng(0)
    z = np.repeat([0, 1, 2], 10_000)
    centres = np.array([-10.0, 0.0, 10.0])
    x = torch.as_tensor(centres[z] + rng.normal(size=z.size))[:, None]
    labels = torch.as_tensor(np.where(np.abs(x[:, 0].numpy() - centres[z]) > 3, 3, z))
    family = gaussian_family("full")
    prior = ComponentPrior(mean=x.mean(0), mean_precision=1.0, covariance=x.var(0)[None], dof=1.0)

    def fit():
        return fit_vmm(x, labels, 50, family=family, prior=prior, hard=hard, merge_moves=True, max_iter=200,
                       batch_size=batch_size)

    refined = fit()
    assert refined.means.shape[0] == 3 and refined.converged
    _monotone(refined)
    if not hard and batch_size is not None:
        monkeypatch.setattr(vmm, "REFINE", 1)
        kept = fit()
        assert kept.means.shape[0] == 4 and kept.objective_trace[-1] < refined.objective_trace[-1]


@pytest.mark.parametrize("alpha, discount", [(1.0, 0.0), (5.0, 0.0), (1.0, 0.5), (0.3, 0.25), (-0.2, 0.5)])
def test_the_expected_number_of_clusters_is_the_restaurants(alpha, discount):
    """``expected_clusters`` against 4,000 simulated Pitman-Yor restaurants of 60 customers (a new
    table with probability (alpha + d T) / (alpha + i)), to four standard errors; and
    ``truncation_tail`` against the sticks' own draws."""
    from bnpzoo.inference.stick_mixture.sticks import expected_clusters, truncation_tail

    rng = np.random.default_rng(0)
    tables = np.ones(4000)
    for i in range(1, 60):
        tables += rng.random(4000) < (alpha + discount * tables) / (alpha + i)
    assert abs(expected_clusters(60, alpha, discount) - tables.mean()) < 4 * tables.std() / np.sqrt(4000)
    k = np.arange(1, 10)
    v = rng.beta(1 - discount, alpha + k * discount, size=(20000, 9))
    rest = np.prod(1 - v, axis=1)
    assert abs(truncation_tail(10, alpha, discount) - rest.mean()) < 4 * rest.std() / np.sqrt(20000)


def test_the_progress_bar_shows_each_iterations_parts(capsys):
    x = blobs(n=400, d=2, k=3, seed=1).X
    DPGMM(random_state=0, verbose=True).fit(x)  # full covariances: merges each iteration, births once settled
    shown = capsys.readouterr().err
    assert "vmm" in shown and "objective=" in shown
    assert all(f"{part}=" in shown for part in ("pass", "births", "merges"))


def test_every_merge_that_raises_the_bound_alone_is_made_in_one_iteration():
    """Three 1-D clusters each started as two halves: the three merges raise the memoized bound
    independently, so the first iteration's merge step makes all three (a pair was once skipped
    when its own gain fell short of the merges chosen before it: one merge an iteration)."""
    rng = np.random.default_rng(0)
    z = np.repeat([0, 1, 2], 2000)
    x = torch.as_tensor(np.array([-10.0, 0.0, 10.0])[z] + rng.normal(size=z.size))[:, None]
    halves = torch.as_tensor(2 * z + (x[:, 0].numpy() > np.array([-10.0, 0.0, 10.0])[z]))
    prior = ComponentPrior(mean=x.mean(0), mean_precision=1.0, covariance=x.var(0)[None], dof=1.0)
    fit = fit_vmm(x, halves, 6, family=gaussian_family("full"), prior=prior, hard=False, merge_moves=True,
                  max_iter=2, pruning_precision=None)  # the first pass measures the overlaps
    assert fit.means.shape[0] == 3


def test_births_are_proposed_again_only_once_the_clusters_holding_rows_change(monkeypatch):
    """After a round of births that keeps none, the merges that fold away clusters the start emptied
    (under half a row) do not start another round: only a change in the clusters that hold rows does."""
    import bnpzoo.inference.stick_mixture.vmm as vmm

    starts, propose, start = [], vmm.propose_births, vmm._fit_from

    def recorded(x, assignments, *args, **kwargs):
        born = propose(x, assignments, *args, **kwargs)
        starts[-1].append((int((assignments.counts >= vmm.HOLDS_ROWS).sum()), born is None))
        return born

    def started(*args, **kwargs):  # each of the fit's starts (the base measure's schedules) on its own
        starts.append([])
        return start(*args, **kwargs)

    monkeypatch.setattr(vmm, "propose_births", recorded)
    monkeypatch.setattr(vmm, "_fit_from", started)
    rng = np.random.default_rng(103)  # 10 clusters in 16-D with random covariances
    sizes = rng.multinomial(5000, rng.dirichlet(np.full(10, 2.0)))
    x = np.concatenate([rng.normal(0, 3, 16) + rng.normal(size=(m, 16)) @ (np.linalg.qr(rng.normal(size=(16, 16)))[0]
                        * np.exp(rng.uniform(np.log(0.2), np.log(2.0), 16))).T for m in sizes]).astype(np.float32)
    DPGMM(random_state=3).fit(x)
    assert any(starts)
    for rounds in starts:
        for (live, kept_none), (next_live, _) in zip(rounds, rounds[1:]):
            assert not kept_none or next_live != live


def test_a_division_whose_rest_is_no_statistic_of_rows_is_not_proposed():
    """``division_statistics`` with soft shares: the first piece is the record's statistics of the
    cluster less the other pieces' present shares. Where the record holds less of the cluster than
    its members' shares now do (a stochastic learner's record is of past visits), the rest is no
    statistic of rows (a negative count of ones): None, not an improper factor."""
    from types import SimpleNamespace

    from bnpzoo.families import BetaBernoulliFamily
    from bnpzoo.inference.stick_mixture.vmm import Shares, division_statistics

    family, rows = BetaBernoulliFamily(), torch.tensor([[1.0, 0.0]] * 4 + [[0.0, 1.0]] * 4, dtype=torch.float64)
    prior = ComponentPrior(mean=torch.full((2,), 0.5, dtype=torch.float64), mean_precision=1.0,
                           covariance=torch.eye(2, dtype=torch.float64), dof=2.0)
    piece = torch.tensor([0] * 4 + [1] * 4)
    shares = Shares(family, prior, None, None, held=torch.ones(8, 1, dtype=torch.float64))
    for recorded, proposed in ((1.0, True), (0.2, False)):  # the record holds all, or a fifth, of the members' share
        stats = family.statistics(rows, recorded * torch.ones(8, 1, dtype=torch.float64), prior)
        assignments = SimpleNamespace(stats=stats, scale=1.0)
        divided = division_statistics(rows, piece, 0, assignments, family, prior, shares)
        assert (divided is not None) == proposed
        if proposed:
            assert bool(family.valid(family.natural(divided, prior)).all())
            torch.testing.assert_close(divided["count"], torch.tensor([4.0, 4.0], dtype=torch.float64))
