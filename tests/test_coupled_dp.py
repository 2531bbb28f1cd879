"""``bnpzoo.CoupledDP``: fitting both families, perplexity, save/load, the CLI model."""

import json
import re
import warnings

import numpy as np
import pyro
import pytest
import torch

from bnpzoo import ConvergenceWarning, CoupledDP
from bnpzoo.cli import main
from bnpzoo.corpus import read_corpus
from bnpzoo.metrics import nmi

TOPICS = [["apple", "pear", "plum", "fig"], ["car", "bus", "train", "tram"], ["red", "blue", "green", "pink"]]


def _corpus(seed=0, docs_per_group=15):
    """Six groups; group t writes from topic t mod 3 only, so groups t and t + 3 share a topic
    (the model mixes per group: every word of group t is a draw from D_t)."""
    rng = np.random.default_rng(seed)
    docs, groups = [], []
    for t in range(6):
        for _ in range(docs_per_group):
            docs.append(list(rng.choice(TOPICS[t % 3], size=12)))
            groups.append(t)
    return docs, np.array(groups)


def test_topics_are_recovered_and_scored_by_perplexity():
    docs, groups = _corpus()
    est = CoupledDP(config="m-ldp", truncation=6, beta=0.1, max_iter=40, warmup=40, random_state=0).fit(docs, groups)
    assert est.n_groups_ == 6 and est.q_.shape == (6, 7)
    assert est.samples_["log_joint"].shape == (1, 40) and torch.isfinite(est.samples_["log_joint"]).all()
    # every atom that holds data is one topic (a topic may have copies, in different latent DPs)
    vocab = est.vocabulary_
    mass = np.stack([est.topic_word_[:, [vocab.index(w) for w in topic]].sum(1) for topic in TOPICS], 1)
    big = est.weights_ > 0.05
    assert (mass[big].max(1) > 0.9).all() and set(mass[big].argmax(1).tolist()) == {0, 1, 2}
    held_out, _ = _corpus(seed=1)
    # 12 words, 4 per topic, one topic per document: close to 4, far from the uniform 12
    assert est.perplexity(held_out) < 5
    assert est.tokens_per_second_ > 0 and est.n_tokens_ == 6 * 15 * 12


def test_the_blocked_label_step_recovers_the_topics_with_thinning():
    """label_step="blocked" samples the (group, word) cells' label counts; thin sweeps per sample."""
    docs, groups = _corpus()
    est = CoupledDP(config="m-ldp", truncation=6, beta=0.1, label_step="blocked", max_iter=20, warmup=20, thin=3,
                    random_state=0).fit(docs, groups)
    assert est.samples_["log_joint"].shape == (1, 20) and est.n_iter_ == 120
    assert est.n_tokens_ == 6 * 15 * 12 and est.weights_.sum() == pytest.approx(1.0)
    held_out, _ = _corpus(seed=1)
    assert est.perplexity(held_out) < 5


@pytest.mark.filterwarnings("ignore::bnpzoo.ConvergenceWarning")  # 5 samples a chain
def test_chains_run_in_worker_processes_where_the_machine_has_the_cores(monkeypatch):
    """pyro.infer.MCMC draws the chains in worker processes when num_chains <= cpu_count - 1 (here
    forced): spawned, as a forked worker hangs in torch's thread pool, and their states come back."""
    import pyro.infer.mcmc.api

    monkeypatch.setattr(pyro.infer.mcmc.api.mp, "cpu_count", lambda: 8)
    torch.rand(2**22).exp().sum()  # torch's thread pool started in this process, as by any large op
    docs, groups = _corpus()
    est = CoupledDP(truncation=4, max_iter=5, warmup=5, num_chains=2, random_state=0).fit(docs, groups)
    assert est.samples_["log_joint"].shape == (2, 5) and np.isfinite(est.rhat_)
    assert est.weights_.sum() == pytest.approx(1.0)


def test_rows_given_as_tuples_of_numbers_are_rows_not_documents():
    rng = np.random.default_rng(0)
    x, groups = np.concatenate([rng.normal(-4, 1, (40, 2)), rng.normal(4, 1, (40, 2))]), np.arange(80) % 2
    make = lambda: CoupledDP(truncation=4, max_iter=6, warmup=2, random_state=0)
    as_tuples = make().fit([tuple(row) for row in x.tolist()], groups)
    assert as_tuples.vocabulary_ is None and np.array_equal(as_tuples.means_, make().fit(x, groups).means_)


def test_save_and_load_keep_the_topics(tmp_path):
    docs, groups = _corpus()
    est = CoupledDP(truncation=4, max_iter=5, warmup=5, random_state=1).fit(docs, groups)
    est.save(tmp_path / "m.pt")
    back = CoupledDP.load(tmp_path / "m.pt")
    assert np.array_equal(back.topic_word_, est.topic_word_) and back.vocabulary_ == est.vocabulary_
    assert back.perplexity(docs[:5]) == est.perplexity(docs[:5])


def test_the_gaussian_family_finds_the_clusters_of_each_group():
    rng = np.random.default_rng(0)
    centres = np.array([[-6.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    groups = np.repeat(np.arange(3), 60)
    labels = (groups + rng.integers(2, size=groups.shape)) % 3  # group t: clusters t and t + 1
    X = centres[labels] + rng.normal(size=(len(labels), 2))
    est = CoupledDP(config="s-ldp", truncation=8, alpha=1.0, prior_shape=2.0, prior_rate=2.0, prior_kappa=0.01,
                    max_iter=100, warmup=200, random_state=0).fit(X, groups)
    predicted = est.predict(X, groups)
    # within each group the clusters are found; across groups a cluster may be held by copies of
    # one atom in different latent DPs (q = 0.5: a group inherits only part of H)
    assert min(nmi(labels[groups == t], predicted[groups == t]) for t in range(3)) > 0.95
    assert 3 <= est.n_clusters_ <= 6
    with pytest.raises(ValueError, match="fitted groups"):
        est.predict(X[:2], [0, 7])


def test_the_document_level_recovers_topics_that_documents_mix_within_a_group():
    """Every document draws from one of the three topics at random, so each group mixes all three:
    with documents=True the topics come out one by one, and held-out documents are scored as
    single-topic ones (perplexity near 4, the words of one topic; the median of three chains, as
    one chain's perplexity spreads from 4.4 to 5.6 over seeds); without the document level the
    atoms mix the topics."""
    rng = np.random.default_rng(0)
    docs = [list(rng.choice(TOPICS[rng.integers(3)], size=12)) for _ in range(90)]
    groups = np.repeat(np.arange(6), 15)
    est, *others = [CoupledDP(config="m-ldp", truncation=6, beta=0.1, documents=True, max_iter=200, warmup=100,
                              random_state=seed).fit(docs, groups) for seed in range(3)]
    plain = CoupledDP(config="m-ldp", truncation=6, beta=0.1, documents=False, max_iter=40, warmup=40,
                      random_state=0).fit(docs, groups)
    vocab = est.vocabulary_
    mass = np.stack([est.topic_word_[:, [vocab.index(w) for w in topic]].sum(1) for topic in TOPICS], 1)
    big = est.weights_ > 0.05
    assert (mass[big].max(1) > 0.9).all() and set(mass[big].argmax(1).tolist()) == {0, 1, 2}
    held_out = [list(rng.choice(TOPICS[rng.integers(3)], size=12)) for _ in range(12)]
    perplexity = float(np.median([model.perplexity(held_out) for model in (est, *others)]))
    assert perplexity < 5 and plain.perplexity(held_out) > perplexity + 2
    with pytest.raises(ValueError, match="real vectors"):
        CoupledDP(documents=True).fit(np.zeros((4, 2)), [0, 0, 1, 1])
    with pytest.raises(ValueError, match="collapsed"):
        CoupledDP(documents=True, label_step="blocked").fit(docs, groups)


def test_the_document_level_is_the_default_for_words_and_off_for_vectors():
    docs, groups = _corpus(docs_per_group=2)
    assert CoupledDP(truncation=4, max_iter=2, warmup=0, random_state=0).fit(docs, groups).documents_
    assert not CoupledDP(truncation=4, max_iter=2, warmup=0, label_step="blocked", random_state=0).fit(
        docs, groups).documents_
    assert not CoupledDP(truncation=4, max_iter=2, warmup=0, documents=False, random_state=0).fit(
        docs, groups).documents_
    x = np.random.default_rng(0).normal(size=(12, 2))
    assert not CoupledDP(max_iter=2, warmup=0, random_state=0).fit(x, np.arange(12) % 2).documents_


def test_alpha_is_one_with_the_document_level_and_sampled_at_the_group_level_by_default():
    docs, groups = _corpus(docs_per_group=2)
    fit = lambda **options: CoupledDP(truncation=4, max_iter=6, warmup=0, random_state=0,  # noqa: E731
                                      **options).fit(docs, groups).samples_["alpha"]
    assert (fit() == 1.0).all()
    assert fit(documents=False).unique().numel() > 1 and fit(alpha="sampled").unique().numel() > 1
    assert (fit(alpha=2.5) == 2.5).all()
    with pytest.raises(ValueError, match="alpha must be a number in \\(0, inf\\) or None or one of 'sampled'"):
        CoupledDP(alpha="often").fit(docs, groups)


def test_chains_that_disagree_say_how_many_sweeps_to_run(monkeypatch):
    """Chains whose log joints disagree (here two chains of 20 samples centred 5 standard deviations
    apart, as the fit's summaries: whether a few sweeps of a real fit mix depends on its draws):
    R-hat above 1.1, and the warning names a larger max_iter."""

    docs, groups = _corpus(docs_per_group=2)
    est = CoupledDP(truncation=4, max_iter=20, warmup=0, num_chains=2, random_state=0).fit(docs, groups)
    noise = np.random.default_rng(0).normal(size=(2, 20))
    monkeypatch.setattr(est, "samples_", {"log_joint": noise + [[0.0], [5.0]]})
    with pytest.warns(ConvergenceWarning, match=r"have not mixed: R-hat of the log joint is .* max_iter=\d+") as caught:
        est._check_mixing()
    assert est.rhat_ > 1.1
    assert int(re.search(r"max_iter=(\d+)", str(caught[0].message)).group(1)) > est.max_iter


def test_preparing_the_sampler_leaves_the_fit_s_draws_as_they_were():
    """``prepare`` compiles the loops on a few tokens before sampling; the generator it drew from
    is put back, so the fit equals one on an already-compiled sampler."""
    from bnpzoo.inference.coupled import gibbs as coupled_gibbs
    from bnpzoo.inference.coupled.kernel import prepare

    docs, groups = _corpus(docs_per_group=2)
    problem = coupled_gibbs.Problem(x=torch.arange(24) % 6, groups=torch.arange(24) // 12, q=torch.ones(2, 1),
                                    atoms_per_source=4, vocab_size=6, documents=torch.arange(24) // 6)
    before = torch.get_rng_state()
    assert prepare(problem) >= 0 and torch.equal(torch.get_rng_state(), before)
    first = CoupledDP(truncation=4, max_iter=3, warmup=0, random_state=0).fit(docs, groups)
    second = CoupledDP(truncation=4, max_iter=3, warmup=0, random_state=0).fit(docs, groups)
    assert torch.equal(first.samples_["log_joint"], second.samples_["log_joint"])


def test_the_compile_notice_reads_numba_s_cache(tmp_path):
    """Once a fit has run the sampler is cached (every chain runs ``move_atoms``, whichever loops
    its data need besides); with an empty cache folder it is not, and verbose says it compiles."""
    import os
    import subprocess
    import sys

    from bnpzoo.inference.coupled.kernel import sampler_cached

    docs, groups = _corpus(docs_per_group=2)
    CoupledDP(truncation=4, max_iter=2, warmup=0, random_state=0).fit(docs, groups)
    assert sampler_cached()
    check = "from bnpzoo.inference.coupled.kernel import sampler_cached; print(sampler_cached())"
    fresh = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True,
                           env=dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path)))
    assert fresh.stdout.strip() == "False"


def _write_corpus(folder):
    """train.txt (6 groups of 5 documents), groups.txt and a held-out test.txt, for the CLI."""
    docs, groups = _corpus(docs_per_group=5)
    (folder / "train.txt").write_text("\n".join(" ".join(d) for d in docs) + "\n")
    (folder / "groups.txt").write_text("\n".join(map(str, groups)) + "\n")
    (folder / "test.txt").write_text("\n".join(" ".join(d) for d in _corpus(seed=2, docs_per_group=2)[0]) + "\n")


def test_the_cli_prints_the_topics_and_saves_the_model(tmp_path, capsys):
    _write_corpus(tmp_path)
    argv = ["fit", "coupled-dp", "--data", str(tmp_path / "train.txt"), "--groups", str(tmp_path / "groups.txt"),
            "--test-data", str(tmp_path / "test.txt"), "--truncation", "5", "--iters", "30", "--save",
            str(tmp_path / "model.pt")]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert "held-out perplexity" in out[0] and "document level on" in out[0]
    topics = [line for line in out if line.startswith("topic ")]
    loaded = CoupledDP.load(tmp_path / "model.pt")
    assert len(topics) == min(10, loaded.n_topics_) and loaded.n_topics_ == int((loaded.weights_ >= 0.01).sum())
    top = loaded.vocabulary_[int(loaded.topic_word_[0].argmax())]
    assert top == topics[0].split(": ")[1].split()[0]
    assert f"{loaded.perplexity(read_corpus(str(tmp_path / 'test.txt'))):.1f}" in out[0]


def test_a_sampled_document_concentration_is_kept_and_traced():
    docs, groups = _corpus(docs_per_group=3)
    est = CoupledDP(truncation=4, doc_concentration=None, max_iter=6, warmup=2, random_state=0).fit(docs, groups)
    assert est.doc_concentration_ > 0 and est.samples_["doc_concentration"].shape == (1, 6)
    assert float(est.samples_["doc_concentration"][0, -1]) == pytest.approx(est.doc_concentration_)
    assert CoupledDP(truncation=4, max_iter=2, warmup=0, random_state=0).fit(docs, groups).doc_concentration_ == 1.0


def test_a_full_atom_pool_is_not_silent():
    """Three topics: with s-ldp's one latent DP of 2 atoms and no warm-up (in which the pool would
    grow) every atom holds data, and the fit says which setting to raise; with 12 atoms it stays
    silent."""
    docs, groups = _corpus(docs_per_group=4)
    with pytest.warns(UserWarning, match="larger truncation"):
        fit = CoupledDP(config="s-ldp", truncation=2, beta=0.1, max_iter=10, warmup=0, random_state=0).fit(docs, groups)
    assert fit.truncation_ == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        CoupledDP(config="s-ldp", truncation=12, beta=0.1, max_iter=10, warmup=10, random_state=0).fit(docs, groups)


@pytest.mark.parametrize("args, message", [
    (dict(X=[["a", "b"], ["c"]], groups=None), "needs groups"),
    (dict(X=[["a", "b"], ["c"]], groups=[0]), "1 entries for 2 documents"),
    (dict(X=[["a", "b"], ["c"]], groups=[0.5, 1.0]), "integers"),
    (dict(X=[["a", "b"], "c d"], groups=[0, 1]), r"X\[1\] is a string among token lists"),
    (dict(X=["a b", "c"], groups=[0, 1]), "the corpus has no tokens"),  # the default tokenizer: 2+ letters
])
def test_bad_input_is_named(args, message):
    with pytest.raises(ValueError, match=message):
        CoupledDP(max_iter=1, warmup=0).fit(args["X"], args["groups"])


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="config"):
        CoupledDP(config="nope").fit([["a"]], [0])
    with pytest.raises(ValueError, match="truncation"):
        CoupledDP(truncation=0).fit([["a"]], [0])


def test_the_cli_fits_a_text_corpus_and_scores_held_out_documents(tmp_path, capsys):
    _write_corpus(tmp_path)
    argv = ["fit", "coupled-dp", "--inference", "gibbs", "--data", str(tmp_path / "train.txt"), "--groups",
            str(tmp_path / "groups.txt"), "--test-data", str(tmp_path / "test.txt"), "--config", "sngp",
            "--truncation", "5", "--iters", "30", "--warmup", "20", "--num-chains", "2", "--json"]
    with warnings.catch_warnings(record=True) as caught:  # 2 chains on fewer cores: sequential, as documented
        warnings.simplefilter("always")
        assert main(argv) == 0
    assert not [w for w in caught if "num_chains" in str(w.message)]
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert record["model"] == "coupled-dp" and record["n"] == 6 * 5 * 12 and record["d"] == 12
    assert 1 < record["perplexity"] < 12 and record["tokens_per_second"] > 0 and record["iterations"] == 50
    assert record["rhat"] is not None and np.isfinite(record["rhat"])


@pytest.mark.parametrize("documents", [None, pytest.param(torch.tensor([0, 0, 1, 2, 2, 3]), marks=pytest.mark.slow)],
                         ids=["groups", "documents-b-1e6"])
def test_one_latent_dp_inherited_in_full_predicts_like_a_dp_mixture(documents):
    """q = 1 with one latent DP is the (truncated) DP mixture: D_t = H for every group. Its
    posterior predictive p(x_new | x), estimated by the sampler, matches the DP mixture's with
    the same finite Dirichlet(alpha / L) weights, computed exactly by enumerating every labelling.
    With the document level and b = 1e6, theta_d is pinned to D_t and the same holds."""
    import itertools

    from bnpzoo.inference.coupled import gibbs
    from bnpzoo.models.coupled_dp import model

    pyro.set_rng_seed(0)
    x, groups = torch.tensor([0, 0, 1, 2, 2, 2]), torch.tensor([0, 0, 0, 1, 1, 1])
    vocab, atoms, alpha, beta = 3, 3, 1.5, 0.5
    # exact: p(z) p(x | z) with weights ~ Dir(alpha / L) and topics ~ Dir(beta), both integrated out
    def dirichlet_multinomial(counts, conc):
        return (torch.lgamma(torch.tensor(conc * len(counts))) - torch.lgamma(counts.sum() + conc * len(counts))
                + (torch.lgamma(counts + conc) - torch.lgamma(torch.tensor(conc))).sum())

    exact = torch.zeros(vocab)
    total = 0.0
    for z in itertools.product(range(atoms), repeat=len(x)):
        z = torch.tensor(z)
        sizes = torch.bincount(z, minlength=atoms).double()
        words = torch.zeros(atoms, vocab, dtype=torch.float64)
        words.index_put_((z, x), torch.ones(len(x), dtype=torch.float64), accumulate=True)
        weight = torch.exp(dirichlet_multinomial(sizes, alpha / atoms)
                           + sum(dirichlet_multinomial(words[k], beta) for k in range(atoms)))
        new_atom = (sizes + alpha / atoms) / (len(x) + alpha)
        exact += weight * (new_atom[:, None] * (words + beta) / (words.sum(1, keepdim=True) + vocab * beta)).sum(0)
        total += weight
    exact /= total
    problem = gibbs.Problem(x=x, groups=groups, q=torch.ones(2, 1, dtype=torch.float64), atoms_per_source=atoms,
                            vocab_size=vocab, beta=beta, alpha=alpha, documents=documents, doc_concentration=1e6)
    trace = pyro.poutine.trace(model).get_trace(None, **problem.model_kwargs)
    state = gibbs.update_labels(problem, gibbs.state_from_trace(trace, problem))
    estimate = torch.zeros(vocab, dtype=torch.float64)
    draws = 6000
    for i in range(draws + 500):
        state = gibbs.sweep(problem, state)
        if i >= 500:
            weights = state.weight / state.weight.sum()
            estimate += (weights[:, None] * gibbs.topic_word(problem, state)).sum(0)
    estimate /= draws
    assert torch.allclose(estimate, exact.double(), atol=0.01), (estimate, exact)


def test_a_pool_that_warm_up_fills_grows_and_the_kept_samples_leave_room(random_state):
    """One atom per latent DP to start (11 atoms for a corpus of 20 topics): warm-up grows the pool
    (``gibbs.grown``) until its labels use less than 95 % of it, and nothing warns."""
    from bnpzoo.corpus import generated_topics

    corpus = generated_topics(20_000, n_topics=20, vocab_size=300, seed=random_state)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        grown = CoupledDP(truncation=1, max_iter=10, warmup=60, random_state=random_state).fit(corpus)
    pool = grown.truncation_ * grown.q_.shape[1]
    assert grown.truncation_ > 2 and grown.samples_["atoms_per_source"].sum(-1).max() < pool


@pytest.mark.parametrize("label_step", ["parallel", "uncollapsed"])
def test_the_label_steps_that_draw_topics_apply_to_words(label_step):
    with pytest.raises(ValueError, match="applies to words, not real vectors"):
        CoupledDP(label_step=label_step, max_iter=2, warmup=0).fit(np.zeros((6, 2)), np.arange(6) % 2)


def test_a_gpu_fit_takes_words_with_the_uncollapsed_step():
    """device="cuda": refused where there is no GPU; where there is one, refused for real vectors
    and for the label steps that run on the CPU."""
    docs, groups = [["a", "b"], ["b", "c"]] * 3, [0, 1] * 3
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available here"):
            CoupledDP(device="cuda").fit(docs, groups)
        return
    for wrong in ({"label_step": "collapsed"}, {"label_step": "parallel"}):
        with pytest.raises(ValueError, match="with label_step='uncollapsed'"):
            CoupledDP(device="cuda", **wrong).fit(docs, groups)
    with pytest.raises(ValueError, match="with label_step='uncollapsed'"):
        CoupledDP(device="cuda").fit(np.zeros((6, 2)), np.arange(6) % 2)
