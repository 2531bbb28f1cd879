"""The coupled latent-DP Gibbs sampler: each step keeps the joint distribution, and Geweke's
joint-distribution test (successive-conditional against marginal-conditional) passes."""

import copy
from dataclasses import replace
from functools import cache, partial

import numpy as np
import pyro
import pytest
import torch

from bnpzoo.inference.coupled import cells as coupled_cells
from bnpzoo.inference.coupled import gibbs
from bnpzoo.inference.coupled import parallel as parallel_steps
from bnpzoo.models.coupled_dp import model

GROUPS = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
Q = torch.tensor([[0.9, 0.4], [0.3, 0.8]], dtype=torch.float64)
FAMILIES = {"categorical": dict(vocab_size=3), "gaussian": dict(dim=2, prior_shape=3.0, prior_rate=2.0)}
# alpha_s is sampled, under a prior whose draws stay away from underflow (section 5.1's
# Gamma(0.1, 0.1) puts much of its mass below 1e-300); the step is the same for any Gamma prior
ALPHA_PRIOR = (3.0, 1.5)


def _draw(family, groups=GROUPS, **options):
    """(state, data) drawn from the program itself."""
    options = dict(FAMILIES[family], **options)
    trace = pyro.poutine.trace(model).get_trace(None, groups=groups, q=Q, atoms_per_source=2, alpha_prior=ALPHA_PRIOR,
                                                family=family, **options)
    x = trace.nodes["x"]["value"]
    return gibbs.state_from_trace(trace, _problem(family, x, groups, **options)), x


POOL = {"categorical": 3000, "gaussian": 1000}  # as many draws as the one-step tests take


@cache
def _pool(family):
    """Exact draws of the joint, made once under their own seed and shared by the one-step tests:
    each test's check holds on any set of exact draws, and drawing from the program (5 ms a draw)
    was most of their time."""
    outer = pyro.util.get_rng_state()
    pyro.set_rng_seed(1)
    draws = [_draw(family) for _ in range(POOL[family])]
    pyro.util.set_rng_state(outer)
    return draws


def _exact_draws(family, n):
    """n of the shared exact draws (state, x), as copies a step may change."""
    assert n <= POOL[family]
    return (copy.deepcopy(draw) for draw in _pool(family)[:n])


def _problem(family, x, groups=GROUPS, **options):
    extra = {k: v for k, v in dict(FAMILIES[family], **options).items() if k != "dim"}
    return gibbs.Problem(x=x, groups=groups, q=Q, atoms_per_source=2, family=family, alpha_prior=ALPHA_PRIOR, **extra)


# the document level: two documents in each group, b = 2, or b sampled (under a prior whose
# draws span 0.1 to 10)
DOCUMENTS = dict(documents=torch.tensor([0, 0, 1, 1, 2, 2, 3, 3]), doc_concentration=2.0)
SAMPLED_B = dict(DOCUMENTS, doc_concentration=None, doc_concentration_prior=(2.0, 1.0))


def _document_statistics(state, x):
    """The words' statistics, the tables per token, and how often two tokens of one document share
    an atom (what theta_d adds); b and b against the tables, where b is sampled."""
    same_doc = DOCUMENTS["documents"][:, None] == DOCUMENTS["documents"][None, :]
    shared = (state.z[:, None] == state.z[None, :])[same_doc & ~torch.eye(len(state.z), dtype=torch.bool)]
    tables = state.tables.sum() / len(state.z)
    sampled = [] if state.doc_concentration is None else [state.doc_concentration / (1 + state.doc_concentration),
                                                          tables / (1 + state.doc_concentration)]
    return torch.cat([_statistics("categorical", state, x), torch.stack([tables, shared.double().mean(), *sampled])])


def _regenerate(family, state):
    """x ~ p(x | z, atoms): the data half of a successive-conditional step (words: the sampler
    collapses the topics, so x ~ p(x | z) with fresh topics from their Dirichlet(1) prior)."""
    if family == "categorical":
        phi = torch.distributions.Dirichlet(torch.ones(3)).sample((2 * Q.shape[1],))
        return torch.distributions.Categorical(phi[state.z]).sample()
    p = state.params
    return p["mean"][state.z] + p["precision"][state.z].rsqrt() * torch.randn_like(p["mean"][state.z])


def _statistics(family, state, x, groups=GROUPS):
    squash = lambda v: v / (1 + v.abs())  # noqa: E731  bounded, so means have finite variance
    source_mass = torch.zeros_like(state.alpha).index_add_(0, state.source, state.weight)[state.source]
    common = [state.coeffs[:, 0].mean(), state.inherit.mean(), (state.source == 0).double().mean(),
              squash(state.weight).mean(), (state.z == 0).double().mean(),
              (state.source[state.z] == 0).double().mean(), (state.z < 2).double().mean(), squash(state.alpha).mean(),
              (state.z[groups == 0, None] == state.z[None, groups == 1]).double().mean(),  # shared across groups
              (torch.bincount(state.z, minlength=state.weight.shape[0]) > 0).double().mean(),  # atoms used
              # labels against the coefficients, weights and concentrations they were drawn with (a
              # step that draws one of these from its prior keeps every marginal above)
              state.coeffs[groups, state.source[state.z]].mean(), (state.weight / source_mass)[state.z].mean(),
              squash(state.alpha[state.source[state.z]]).mean()]
    if family == "categorical":
        specific = [(x == 0).double().mean(), (x[groups == 0, None] == x[None, groups == 1]).double().mean()]
    else:
        specific = [squash(x[:, 0]).mean(), squash(state.params["mean"]).mean(),
                    squash(state.params["precision"]).mean()]
    return torch.stack(common + specific)


@pytest.fixture(autouse=True)
def _float64():
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


COMMON_NAMES = ["coefficient 0", "inherited mass", "share of atoms from source 0", "weight", "z = 0",
                "z from source 0", "z < 2", "alpha", "z shared across groups", "atoms used", "coefficient of z",
                "weight of z", "alpha of z"]
FAMILY_NAMES = {"categorical": ["x = 0", "x shared across groups"], "gaussian": ["x", "atom mean", "atom precision"]}
DOCUMENT_NAMES = ["tables per token", "tokens of a document sharing an atom"]
SAMPLED_B_NAMES = ["b / (1 + b)", "tables per token / (1 + b)"]
LAYOUT_NAMES = ["atoms per group", "share of a group's largest atom"]


def _names(family="categorical", documents=False):
    """The names of ``_statistics`` (and ``_document_statistics``'s, for documents; "sampled" with b)."""
    names = COMMON_NAMES + FAMILY_NAMES[family]
    return names + (DOCUMENT_NAMES + (SAMPLED_B_NAMES if documents == "sampled" else []) if documents else [])


def _paired_z_scores(changes, names):
    """{statistic: mean over standard error of its paired change}, for the statistics that moved:
    a failure names them."""
    changes = torch.stack(changes).numpy()
    assert changes.shape[1] == len(names), (changes.shape, names)
    moved = changes.std(0) > 0
    z = changes.mean(0)[moved] / (changes.std(0)[moved] / np.sqrt(len(changes)))
    return dict(zip(np.asarray(names)[moved].tolist(), np.round(z, 2).tolist()))


def _largest(z: dict) -> float:
    return max(map(abs, z.values()))


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("step", gibbs.STEPS, ids=lambda f: f.__name__)
def test_each_step_keeps_the_joint_distribution(family, step):
    if family == "categorical" and step is gibbs.update_atoms:
        pytest.skip("the sampler collapses the word topics: step 4 does nothing")
    """From exact draws of the joint, one step gives exact draws again: the paired change of
    every statistic has mean zero (4 standard errors, as many comparisons are made here)."""
    changes = []
    for state, x in _exact_draws(family, 1000):
        before = _statistics(family, state, x)
        changes.append(_statistics(family, step(_problem(family, x), state), x) - before)
    z = _paired_z_scores(changes, _names(family))
    assert len(z) and _largest(z) < 4, z


@pytest.mark.parametrize("step", [pytest.param(step, marks=[] if step is gibbs.update_labels else pytest.mark.slow)
                                  for step in gibbs.STEPS if step is not gibbs.update_atoms], ids=lambda f: f.__name__)
@pytest.mark.parametrize("options", [DOCUMENTS, SAMPLED_B], ids=["b-fixed", "b-sampled"])
def test_each_step_keeps_the_joint_distribution_with_the_document_level(step, options):
    """As above, on the document level's joint of the labels, the tables (Antoniak's auxiliaries),
    b where it is sampled, and the coupled latents, theta_d integrated out. Steps 2-7 are the group
    model's, fed the tables: they run in the slow set; step 1 (labels, cell moves, tables, b) in
    the default one."""
    changes = []
    for _ in range(1000):
        state, x = _draw("categorical", **options)
        before = _document_statistics(state, x)
        changes.append(_document_statistics(step(_problem("categorical", x, **options), state), x) - before)
    z = _paired_z_scores(changes, _names(documents="sampled" if options is SAMPLED_B else True))
    assert len(z) and _largest(z) < 4, z


@pytest.mark.parametrize("label_step", ["parallel", "uncollapsed", "approximate"])
@pytest.mark.parametrize("options", [DOCUMENTS, SAMPLED_B, {}], ids=["b-fixed", "b-sampled", "group-level"])
def test_the_parallel_label_steps_keep_the_joint_distribution(options, label_step, monkeypatch):
    """Step 1 partially collapsed (topics drawn, documents, or tokens at the group level, in
    parallel), uncollapsed (topics and every document's proportions drawn, every token at once), or
    collapsed against stale counts on one thread (one share: exact): as above."""
    monkeypatch.setattr(parallel_steps, "threads", lambda: 1)
    documents = ("sampled" if options is SAMPLED_B else True) if options else False
    statistics = _document_statistics if documents else partial(_statistics, "categorical")
    changes = []
    for _ in range(1000):
        state, x = _draw("categorical", **options)
        before = statistics(state, x)
        problem = _problem("categorical", x, label_step=label_step, **options)
        changes.append(statistics(gibbs.update_labels(problem, state), x) - before)
    z = _paired_z_scores(changes, _names(documents=documents))
    assert len(z) and _largest(z) < 4, z


LONG_GROUPS = torch.tensor([0] * 8 + [1] * 8)
LONG_DOCUMENTS = dict(documents=torch.tensor([0] * 8 + [1] * 8), doc_concentration=0.5, beta=0.1)


@pytest.mark.parametrize("label_step", ["collapsed", "parallel", "uncollapsed"])
def test_the_label_steps_keep_how_a_long_document_shares_its_atoms(label_step):
    """One document of 8 tokens in each group, b = 0.5 and beta = 0.1, where a document's own labels
    and its words weigh most in each of its tokens' draws: the one-step test on the share of a
    document's token pairs on one atom, the tables, and the labels. (Drawing theta_d from its prior
    instead of its conditional gave |z| 2.7 at most in the Geweke test of two-token documents with
    beta = 1, 20,000 draws; here 4.75 with 1,000 draws.)"""
    same_document = LONG_DOCUMENTS["documents"][:, None] == LONG_DOCUMENTS["documents"][None, :]
    pairs = same_document & ~torch.eye(len(LONG_GROUPS), dtype=torch.bool)

    def statistics(state, x):
        shared = (state.z[:, None] == state.z[None, :])[pairs].double().mean()
        return torch.stack([shared, state.tables.sum() / len(state.z), (state.z == 0).double().mean(),
                            (state.z[:, None] == state.z[None, :])[x[:, None] == x[None, :]].double().mean()])

    changes = []
    for _ in range(2000):
        state, x = _draw("categorical", groups=LONG_GROUPS, **LONG_DOCUMENTS)
        before = statistics(state, x)
        problem = _problem("categorical", x, groups=LONG_GROUPS, label_step=label_step, **LONG_DOCUMENTS)
        changes.append(statistics(gibbs.update_labels(problem, state), x) - before)
    z = _paired_z_scores(changes, ["pairs of a document on one atom", "tables per token", "z = 0",
                                   "tokens of one word on one atom"])
    assert len(z) == 4 and _largest(z) < 4, z


@pytest.mark.parametrize("documents", [pytest.param(False, marks=pytest.mark.slow), True], ids=["groups", "documents"])
@pytest.mark.parametrize("block", [(n,) for n in coupled_cells.COUNT_STEPS.tolist()], ids=str)
def test_each_compiled_count_step_keeps_the_joint_distribution(block, documents):
    """The compiled steps 2, 3, 5, 6 that a sweep runs on the counts where no token moves run (the
    document level, or words with split_merge_moves=0; ``coupled_gibbs.counts_sweep``): from exact
    draws of the joint each gives exact draws again."""
    options = DOCUMENTS if documents else {}
    statistics = _document_statistics if documents else partial(_statistics, "categorical")
    names = _names(documents=documents)
    changes = []
    for _ in range(1000):
        state, x = _draw("categorical", **options)
        before = statistics(state, x)
        problem = _problem("categorical", x, split_merge_moves=0, **options)
        changes.append(statistics(gibbs.counts_sweep(problem, state, block), x) - before)
    z = _paired_z_scores(changes, names)
    assert len(z) and _largest(z) < 4, z


def test_the_document_concentration_step_keeps_the_joint_distribution_and_moves_b():
    """b alone, given the labels and tables (``update_doc_concentration``), on documents of four
    tokens: from exact draws of the joint it gives exact draws again, and b moves. The statistics
    pair b with the tables per token, which the joint correlates: a step that drew b from its
    prior fails (|z| 5.3), and one off by one table in the Gamma's shape (|z| 9.5)."""
    groups = torch.tensor([0] * 8 + [1] * 8)
    options = dict(SAMPLED_B, documents=torch.arange(16) // 4, alpha=5.0)
    statistics = lambda s: torch.stack([s.doc_concentration / (1 + s.doc_concentration),  # noqa: E731
                                        s.tables.sum() / 16 / (1 + s.doc_concentration)])
    changes, moved = [], 0
    for _ in range(2000):
        state, x = _draw("categorical", groups, **options)
        after = gibbs.update_doc_concentration(_problem("categorical", x, groups, **options), state)
        changes.append(statistics(after) - statistics(state))
        moved += bool(after.doc_concentration != state.doc_concentration)
    z = _paired_z_scores(changes, SAMPLED_B_NAMES)
    assert len(z) == 2 and _largest(z) < 4 and moved == 2000, z


@pytest.mark.parametrize("draws", [3000, pytest.param(12000, marks=pytest.mark.slow)])
def test_the_document_cell_moves_keep_the_joint_distribution_and_move(draws):
    """The block moves alone (each document's tokens on one atom moving together), on documents of
    four tokens and alpha = 5 (weights spread over the atoms): from exact draws of the joint they
    give exact draws again, and they do move cells. The statistics are of D_t(z), which the moves'
    proposal (j ~ D_t) would bias were its ratio wrong: dropping that ratio gives |z| up to 3.4 in
    3000 draws (so the slow run's 12,000 catch it), the sampler as it is about 1."""
    groups = torch.tensor([0] * 8 + [1] * 8)
    options = dict(documents=torch.arange(16) // 4, doc_concentration=2.0, alpha=5.0)
    changes, moved = [], 0
    for _ in range(draws):
        state, x = _draw("categorical", groups, **options)
        mix = gibbs.mixing_weights(state.coeffs, state.inherit, state.weight, state.source, 2)
        after = gibbs.move_document_cells(_problem("categorical", x, groups, **options), state)
        stats = lambda s: torch.stack([mix[groups, s.z].mean(), mix[groups, s.z].log().mean(),  # noqa: E731
                                       (mix[groups, s.z] > 0.5).double().mean(), s.tables.sum() / 16])
        changes.append(stats(after) - stats(state))
        moved += bool((after.z != state.z).any())
    z = _paired_z_scores(changes, ["D_t(z)", "ln D_t(z)", "D_t(z) > 1/2", "tables per token"])
    assert _largest(z) < 4 and moved > draws / 3, (z, moved)


def test_the_document_levels_label_likelihood_is_the_dirichlet_multinomial_and_pins_to_d_t():
    """ln p(z | D, b) with theta_d integrated out is pyro's DirichletMultinomial of each document's
    counts less its multinomial coefficient; as b grows it tends to sum ln D_t(z), and every token
    opens a table, so the coupled steps see the labels themselves."""
    state, x = _draw("categorical", **DOCUMENTS)
    problem = _problem("categorical", x, **DOCUMENTS)
    mix = gibbs.mixing_weights(state.coeffs, state.inherit, state.weight, state.source, 2)
    expected = 0.0
    for d in range(4):
        z_d = state.z[DOCUMENTS["documents"] == d]
        reach = mix[GROUPS[2 * d]] > 0  # D_t(k) = 0: never drawn, and outside the Dirichlet's support
        counts = torch.bincount(z_d, minlength=4).double()[reach]
        dm = pyro.distributions.DirichletMultinomial(2.0 * mix[GROUPS[2 * d]][reach], total_count=len(z_d))
        expected += dm.log_prob(counts) - torch.lgamma(counts.sum() + 1) + torch.lgamma(counts + 1).sum()
    assert torch.allclose(gibbs.label_log_likelihood(problem, state), expected)
    pinned = replace(problem, doc_concentration=1e9)
    without = _problem("categorical", x)
    assert torch.allclose(gibbs.label_log_likelihood(pinned, state), gibbs.label_log_likelihood(without, state),
                          rtol=1e-6)
    assert torch.equal(gibbs.with_tables(pinned, state).tables, gibbs.label_counts(without, state.z))


def _group_layout(state, groups):
    """(atoms in use per group, the share of its largest atom): what the split-merge moves change."""
    counts = torch.zeros(2, state.weight.shape[0])
    counts.index_put_((groups, state.z), torch.ones(len(groups)), accumulate=True)
    return torch.stack([(counts > 0).double().sum(1).mean(), (counts.max(1).values / counts.sum(1)).mean()])


@pytest.mark.parametrize("step, moves, draws", [
    (gibbs.update_coefficients, 0, 2000), (gibbs.update_coefficients, 4, 2000), (gibbs.update_weights, 4, 2000),
    # the pair's selection probability shifts the statistics by about 2 standard errors in 2000 draws
    pytest.param(gibbs.update_coefficients, 4, 8000, marks=pytest.mark.slow)], ids=lambda v: getattr(v, "__name__", v))
def test_split_merge_moves_keep_the_joint_distribution(step, moves, draws):
    """Steps 3 and 6 with their split-merge moves, on groups of ten tokens of two words (so that
    groups spread over atoms of both sources): from exact draws of the joint they give exact draws
    again, and the moves do change how many atoms a group uses."""
    groups = torch.tensor([0] * 10 + [1] * 10)
    changes, layout_changed = [], 0
    for _ in range(draws):
        state, x = _draw("categorical", groups, vocab_size=2)
        before = torch.cat([_statistics("categorical", state, x, groups), _group_layout(state, groups)])
        moved = step(_problem("categorical", x, groups, vocab_size=2, split_merge_moves=moves), state)
        changes.append(torch.cat([_statistics("categorical", moved, x, groups), _group_layout(moved, groups)]) - before)
        layout_changed += bool((changes[-1][-2:] != 0).any())
    z = _paired_z_scores(changes, _names() + LAYOUT_NAMES)
    assert _largest(z) < 4, z
    assert (layout_changed > draws / 5) == (moves > 0), layout_changed


def _as_cells(state, x, groups=GROUPS):
    """A words problem and its state as (group, word) cells with (C, K) label counts."""
    v = FAMILIES["categorical"]["vocab_size"]
    words, cell_groups, multiplicity = gibbs.cells(x, groups, v)
    problem = _problem("categorical", words, cell_groups, multiplicity=multiplicity)
    cell = torch.searchsorted(cell_groups * v + words, groups * v + x)  # cells are sorted by group * V + word
    counts = torch.zeros(len(words), problem.sizes[2]).index_put_((cell, state.z), torch.ones(len(x)), accumulate=True)
    return problem, replace(state, z=counts)


def _as_tokens(problem, state):
    """(state with token labels, x, groups) from a cells state, tokens in cell order (every
    statistic is blind to the order of a group's tokens)."""
    per_cell = state.z.long()
    atoms = torch.arange(per_cell.shape[1]).repeat(per_cell.shape[0])
    z = torch.repeat_interleave(atoms, per_cell.flatten())
    return (replace(state, z=z), torch.repeat_interleave(problem.x, problem.multiplicity),
            torch.repeat_interleave(problem.groups, problem.multiplicity))


def test_cells_give_the_same_counts_and_log_joint_as_tokens():
    from bnpzoo.inference.coupled.kernel import log_joint

    for _ in range(20):
        state, x = _draw("categorical")
        problem, cell_state = _as_cells(state, x)
        tokens = _problem("categorical", x)
        assert problem.multiplicity.sum() == len(x) and len(problem.x) <= len(x)
        assert torch.equal(gibbs.label_counts(problem, cell_state.z), gibbs.label_counts(tokens, state.z))
        assert torch.equal(gibbs.word_counts(problem, cell_state.z), gibbs.word_counts(tokens, state.z))
        assert torch.allclose(log_joint(problem, cell_state), log_joint(tokens, state))
        back, x_back, groups_back = _as_tokens(problem, cell_state)
        assert torch.equal(gibbs.label_counts(tokens, back.z), gibbs.label_counts(tokens, state.z))
        assert torch.equal(torch.sort(x_back).values, torch.sort(x).values) and torch.equal(groups_back, GROUPS)


# the compiled atom steps integrate the coefficients out, so each keeps the joint with step 3 after it
CELL_BLOCKS = [(n, 3) if n in coupled_cells.ATOM_STEPS else (n,) for n in coupled_cells.STEPS.tolist()]
CELL_STEPS = [gibbs.update_labels] + [partial(gibbs.cells_sweep, steps=block) for block in CELL_BLOCKS]


@pytest.mark.parametrize("step", CELL_STEPS, ids=["blocked-labels"] + [f"compiled-{b}" for b in CELL_BLOCKS])
def test_each_step_on_cells_keeps_the_joint_distribution(step):
    """On cells: step 1 as ``update_labels`` runs it (topics drawn, one multinomial per cell), and
    each step or block of the compiled sweep (``inference.coupled.cells``). From exact draws of the
    joint each gives exact draws again; the label steps do move the labels. (3000 draws: with 1000,
    step 5 scoring its candidates without the ln G(alpha q) of the integrated coefficients passed.)"""
    changes = []
    for state, x in _exact_draws("categorical", 3000):
        problem, state = _as_cells(state, x)
        before = _statistics("categorical", *_as_tokens(problem, state))
        changes.append(_statistics("categorical", *_as_tokens(problem, step(problem, state))) - before)
    z = _paired_z_scores(changes, _names())
    labels = step is gibbs.update_labels or step.keywords["steps"] == (1,)
    assert len(z) >= (5 if labels else 1) and _largest(z) < 4, z


def geweke_z_scores(family, draws=3000, batch=100, cells=False, documents=False, label_step="collapsed"):
    """{statistic: (marginal mean - successive mean) / standard error}; the successive
    chain's error comes from batch means, which account for its autocorrelation. ``cells``: words
    sampled as (group, word) cells, with the blocked label step; ``documents``: the document level
    ("sampled": with b sampled); ``label_step``: words' step 1 (``gibbs.Problem``)."""
    options = (SAMPLED_B if documents == "sampled" else DOCUMENTS) if documents else {}
    statistics = _document_statistics if documents else partial(_statistics, family)
    marginal = torch.stack([statistics(*_draw(family, **options)) for _ in range(draws)]).numpy()
    state, x = _draw(family, **options)
    successive = []
    moves = {"split_merge_moves": 5} if family == "categorical" else {}  # words: with the split-merge moves
    for _ in range(draws):
        if cells:  # the cells change with x: rebuilt every time, labels carried over as counts
            problem, cell_state = _as_cells(state, x)
            state, x, _ = _as_tokens(problem, gibbs.sweep(problem, cell_state))
        else:
            state = gibbs.sweep(_problem(family, x, **moves, **options, label_step=label_step), state)
        x = _regenerate(family, state)
        successive.append(statistics(state, x))
    successive = torch.stack(successive).numpy()
    batches = successive.reshape(-1, batch, successive.shape[1]).mean(1)
    error = np.sqrt(marginal.var(0) / draws + batches.var(0) / len(batches))
    z = (marginal.mean(0) - successive.mean(0)) / error
    return dict(zip(_names(family, documents), np.round(z, 2).tolist()))


@pytest.mark.slow
@pytest.mark.parametrize("family, cells, documents, label_step, draws", [
    ("categorical", False, False, "collapsed", 20000), ("gaussian", False, False, "collapsed", 20000),
    ("categorical", True, False, "collapsed", 20000), ("categorical", False, True, "collapsed", 20000),
    ("categorical", False, "sampled", "collapsed", 20000),
    *[("categorical", False, documents, step, 20000) for step in ("parallel", "uncollapsed")
      for documents in (True, "sampled")],
    # the group level without split-merge moves: the atoms' owners change seldom, and 20 batch means
    # of 1,000 draws gave them |z| from 0.2 to 3.7 over random states; 40 batches gave the largest
    # |z| 1.6, 2.4 and 3.4 on three (uncollapsed), and 80 batches are taken
    *[("categorical", False, False, step, 80000) for step in ("parallel", "uncollapsed")]],
    ids=["categorical", "gaussian", "categorical-cells", "categorical-documents", "categorical-documents-b-sampled",
         "categorical-documents-parallel", "categorical-documents-b-sampled-parallel",
         "categorical-documents-uncollapsed", "categorical-documents-b-sampled-uncollapsed", "categorical-parallel",
         "categorical-uncollapsed"])
def test_geweke_joint_distribution_test_passes(family, cells, documents, label_step, draws):
    z = geweke_z_scores(family, draws=draws, batch=1000, cells=cells, documents=documents, label_step=label_step)
    assert _largest(z) < 3, z


@pytest.mark.filterwarnings("ignore:num_chains=2 is more than available_cpu")
def test_the_kernel_runs_under_pyro_mcmc_and_exports_to_arviz(chains_in_this_process):
    from pyro.infer import MCMC

    from bnpzoo.diagnostics import arviz
    from bnpzoo.inference.coupled.kernel import CoupledGibbsKernel

    az = arviz()

    _, x = _draw("categorical")
    kernel = CoupledGibbsKernel(_problem("categorical", x))
    mcmc = MCMC(kernel, num_samples=30, warmup_steps=10, num_chains=2, disable_progbar=True)
    mcmc.run()
    samples = mcmc.get_samples(group_by_chain=True)
    assert samples["log_joint"].shape == (2, 30) and torch.isfinite(samples["log_joint"]).all()
    assert samples["atoms_per_group"].shape == (2, 30, 2) and samples["atoms_per_source"].shape == (2, 30, 2)
    # every observation sits on some atom: each group uses between 1 and its 4 observations' worth
    assert ((samples["atoms_per_group"] >= 1) & (samples["atoms_per_group"] <= 4)).all()
    assert len(kernel.chain_states) == 2
    idata = az.from_pyro(mcmc)
    assert idata.posterior["log_joint"].shape == (2, 30)
    assert np.isfinite(float(az.rhat(idata, var_names=["log_joint"])["log_joint"]))


@pytest.mark.parametrize("family", FAMILIES)
def test_the_kernels_log_joint_is_the_programs(family):
    """The kernel scores the latent sites with the program and the data sites by counts; the
    program's own full trace gives the same number (words: phi integrated out, checked by its
    Dirichlet-multinomial form)."""
    from bnpzoo.inference.coupled.kernel import log_joint

    state, x = _draw(family)
    problem = _problem(family, x)
    kwargs = dict(groups=GROUPS, q=Q, atoms_per_source=2, alpha_prior=ALPHA_PRIOR, family=family, **FAMILIES[family])
    values = {"source": state.source, "weight": state.weight, "coeffs": state.coeffs.unsqueeze(-2),
              "inherit": state.inherit, "z": state.z, "alpha": state.alpha, **state.params}
    trace = pyro.poutine.trace(pyro.condition(model, data=values)).get_trace(x, **kwargs)
    trace.compute_log_prob()
    expected = sum(site["log_prob_sum"] for name, site in trace.nodes.items()
                   if site["type"] == "sample" and name not in ("phi", "x"))
    if family == "gaussian":
        expected = expected + trace.nodes["x"]["log_prob_sum"]
    else:  # p(x | z) = prod_k Dir-Mult(n_k.; beta = 1) over V = 3 words, in closed form
        counts = torch.zeros(4, 3).index_put_((state.z, x), torch.ones(len(x)), accumulate=True)
        expected = expected + (torch.lgamma(torch.tensor(3.0)) - torch.lgamma(counts.sum(1) + 3)).sum() \
            + torch.lgamma(counts + 1).sum()
    assert torch.allclose(log_joint(problem, state), expected)


def test_a_sampled_document_concentration_adds_its_prior_to_the_log_joint():
    """With b sampled the log joint is the one with b fixed at the state's value plus ln Gamma(b)."""
    from bnpzoo.inference.coupled.kernel import log_joint

    state, x = _draw("categorical", **SAMPLED_B)
    b = float(state.doc_concentration)
    sampled, fixed = _problem("categorical", x, **SAMPLED_B), _problem("categorical", x, **dict(SAMPLED_B,
                                                                                              doc_concentration=b))
    prior = torch.distributions.Gamma(*map(torch.tensor, SAMPLED_B["doc_concentration_prior"])).log_prob(
        torch.tensor(b))
    assert torch.allclose(log_joint(sampled, state), log_joint(fixed, state) + prior)


def test_atom_moves_stay_exact_when_magnitudes_span_hundreds_of_orders():
    """With a small alpha, weights and coefficients run down to the smallest floats, next to
    values near 1. Step 5 keeps running sums of W_ts and Z_t; were they kept by adding and
    subtracting, removing a value near 1 would leave rounding residue far larger than the tiny
    rest, and the step would make moves that cost thousands of nats. A Gibbs draw lands 30 nats
    below its starting point with probability below (owners x inheritance patterns x atoms) e^-30."""
    from bnpzoo.inference.coupled.kernel import log_joint

    groups = torch.tensor([0] * 30 + [1] * 30)
    worst = 0.0
    for _ in range(150):
        trace = pyro.poutine.trace(model).get_trace(None, groups=groups, q=Q, atoms_per_source=3, alpha=0.02,
                                                    vocab_size=3)
        problem = gibbs.Problem(x=trace.nodes["x"]["value"], groups=groups, q=Q, atoms_per_source=3, alpha=0.02,
                                vocab_size=3)
        state = gibbs.state_from_trace(trace, problem)
        for _ in range(5):
            moved = gibbs.update_sources(problem, state)
            worst = max(worst, float(log_joint(problem, state) - log_joint(problem, moved)))
            moved = gibbs.update_coefficients(problem, gibbs.update_labels(problem, moved))
            state = gibbs.update_weights(problem, moved)
    assert worst < 30, worst


def test_the_averaged_topics_are_the_mean_over_each_atoms_current_life():
    """Over three kept sweeps, atom 0 lives throughout, atom 1 empties at the second sweep and holds
    other words after it, atoms 2 and 3 never hold a token: the topics average each atom's counts
    over the sweeps since it last held none, and fall back to the labels where it has no such sweep."""
    state, x = _draw("categorical")
    problem = _problem("categorical", x)
    sweeps = [torch.tensor([0, 0, 1, 1, 0, 1, 0, 1]), torch.zeros(8, dtype=torch.long),
              torch.tensor([0, 1, 0, 0, 1, 0, 0, 0])]
    counts = []
    for z in sweeps:
        state = gibbs.average_topics(problem, replace(state, z=z))
        counts.append(gibbs.word_counts(problem, z))
    assert state.topic_lives.tolist() == [3, 1, 0, 0]
    expected = torch.stack([sum(c[0] for c in counts) / 3, *counts[2][1:]]) + problem.beta
    assert torch.allclose(gibbs.topic_word(problem, state), expected / expected.sum(1, keepdim=True))
    plain = counts[2] + problem.beta  # without kept sweeps: the labels alone
    assert torch.allclose(gibbs.topic_word(problem, replace(state, topic_sums=None)),
                          plain / plain.sum(1, keepdim=True))


def test_the_word_counts_of_the_labels_last_asked_for_are_kept_until_they_change():
    _, x = _draw("categorical")
    problem = _problem("categorical", x)
    z = torch.tensor([0, 0, 1, 1, 0, 1, 0, 1])
    first = gibbs.word_counts(problem, z)
    assert gibbs.word_counts(problem, z) is first  # kept
    z[0] = 1  # changed in place: counted again
    again = gibbs.word_counts(problem, z)
    assert again is not first and again[1, x[0]] == first[1, x[0]] + 1 and again[0, x[0]] == first[0, x[0]] - 1
    assert torch.equal(gibbs.word_counts(problem, z.clone()), again)  # other labels, the same counts


def test_document_blocks_cover_the_corpus_and_processes_share_whole_blocks():
    from bnpzoo.inference.coupled.parallel import document_blocks, own_blocks

    lengths = np.random.default_rng(0).integers(1, 300, 500)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    blocks = document_blocks(starts, block_tokens=1000)
    assert blocks[0] == 0 and blocks[-1] == len(lengths) and (np.diff(blocks) > 0).all()
    tokens = np.diff(starts[blocks])
    assert (tokens[:-1] >= 1000).all() and (tokens[:-1] < 1000 + lengths.max()).all()
    for size in (1, 2, 3, 7):
        shares = [own_blocks(blocks, rank, size) for rank in range(size)]
        assert shares[0][1] == 0 and shares[-1][2] == len(lengths)
        assert all(a[2] == b[1] for a, b in zip(shares, shares[1:]))  # contiguous, no document twice
        assert all(blocks[first] == lo for first, lo, _ in shares)


def test_an_uncollapsed_chain_starts_from_a_collapsed_chain_on_part_of_the_corpus(monkeypatch):
    """``kernel.subset_start`` on a quarter of a generated corpus: the collapsed chain runs on whole
    documents holding the tokens asked for, its labels are kept (each (atom, word) count of the
    start is at least the subset's), every label is an atom of the pool, and the tables are those
    of the labels (m_tk >= 1 exactly where group t has tokens on atom k, and at most those tokens)."""
    from bnpzoo import CoupledDP
    from bnpzoo.corpus import generated_topics
    from bnpzoo.inference.coupled import kernel

    corpus = generated_topics(8_000, n_groups=2, n_topics=4, vocab_size=100, seed=0)
    estimator = CoupledDP()
    x, groups, values, vocab, documents, _ = estimator._observations(corpus, None)
    problem = gibbs.Problem(x=x, groups=groups, q=estimator._q(len(values)), atoms_per_source=4, vocab_size=len(vocab),
                            beta=0.01, alpha=1.0, documents=documents, label_step="uncollapsed")
    chains = []

    class Recorded(kernel.CoupledGibbsKernel):
        def setup(self, *args, **kwargs):
            chains.append(self)
            super().setup(*args, **kwargs)

    monkeypatch.setattr(kernel, "CoupledGibbsKernel", Recorded)
    monkeypatch.setattr(kernel, "SUBSET_TOKENS", 2_000)
    monkeypatch.setattr(kernel, "SUBSET_SWEEPS", 5)
    state = kernel.subset_start(problem)
    (subset,) = chains
    lengths = torch.bincount(subset.problem.documents)
    assert 2_000 <= len(subset.problem.x) < 2_000 + lengths.max() and (lengths > 0).all()
    assert set(lengths.tolist()) <= set(torch.bincount(documents).tolist())  # whole documents
    full = gibbs.resized(problem, state)
    assert len(state.z) == len(x) and 0 <= int(state.z.min()) and int(state.z.max()) < full.sizes[2]
    assert (gibbs.word_counts(full, state.z) >= gibbs.word_counts(subset.problem, subset.state.z)).all()
    counts = gibbs.label_counts(full, state.z)
    assert torch.equal(state.tables > 0, counts > 0) and (state.tables <= counts).all()
