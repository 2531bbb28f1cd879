"""The topic model on text as people hold it: its input forms, coherence, top words, new documents'
proportions and the prevalence figure (``bnpzoo.corpus.to_documents``, ``bnpzoo.coherence``,
``CoupledDP``'s results)."""

import json
import random

import numpy as np
import pytest
import scipy.sparse

from bnpzoo import CoupledDP
from bnpzoo.cli import main
from bnpzoo.coherence import npmi_coherence, window_counts
from bnpzoo.corpus import to_documents, tokenize
from bnpzoo.plots import close

THEMES = [["apple", "pear", "plum", "fig"], ["car", "bus", "train", "tram"], ["red", "blue", "green", "pink"]]


def _texts(seed=0, per_group=12):
    """Three groups of short texts, each text on one theme: group t's on theme t, a quarter of them
    on the next theme."""
    rng = np.random.default_rng(seed)
    texts, groups = [], []
    for t in range(3):
        for _ in range(per_group):
            theme = THEMES[(t + (rng.random() < 0.25)) % 3]
            texts.append("The " + " ".join(rng.choice(theme, 12)) + ", and a 7.")
            groups.append(t)
    return texts, np.array(groups)


def _fit(X, groups, random_state=0, **kwargs):
    """Stop words out ("the", "and" are in every text), sweeps enough for the themes on every seed."""
    return CoupledDP(truncation=6, beta=0.1, max_iter=60, warmup=60, stop_words="english",
                     random_state=random_state).fit(X, groups, **kwargs)


def test_every_form_of_a_corpus_is_the_same_documents():
    texts, _ = _texts()
    tokens = [tokenize(text) for text in texts]
    vocabulary = sorted({token for doc in tokens for token in doc})
    column = {word: j for j, word in enumerate(vocabulary)}
    counts = np.zeros((len(tokens), len(vocabulary)), dtype=np.int64)
    for d, doc in enumerate(tokens):
        for token in doc:
            counts[d, column[token]] += 1
    in_word_order = [sorted(doc, key=column.get) for doc in tokens]
    bags = [[(column[w], int(c)) for w, c in zip(*np.unique(doc, return_counts=True))] for doc in tokens]
    assert to_documents(texts) == tokens
    assert to_documents(scipy.sparse.csr_matrix(counts), vocabulary) == in_word_order
    assert to_documents(scipy.sparse.csc_matrix(counts).astype(float), np.array(vocabulary)) == in_word_order
    assert to_documents(bags, dict(enumerate(vocabulary))) == in_word_order
    assert to_documents(scipy.sparse.csr_matrix(counts[:, :2]))[0] == ["w0"] * counts[0, 0] + ["w1"] * counts[0, 1]
    assert to_documents(texts, stop_words="english")[0][0] != "the"
    assert "and" not in to_documents(texts, stop_words=["and"])[0]
    assert to_documents(texts, tokenizer=str.split)[0][0] == "The"
    assert to_documents([[1.0, 2.0], [3.0, 4.0]]) is None and to_documents([[1, 2], [3]]) == [["1", "2"], ["3"]]


def test_the_default_tokenizer_splits_as_countvectorizer_does():
    text = "Don't panic: 42 towels, THE café's end-of-line; a b"
    pytest.importorskip("sklearn")
    from sklearn.feature_extraction.text import CountVectorizer

    assert tokenize(text) == CountVectorizer().build_analyzer()(text)


@pytest.mark.parametrize("X, vocabulary, message", [
    (scipy.sparse.csr_matrix(np.array([[1.0, 0.5]])), None, r"row 0, column 1 is 0.5.*TfidfVectorizer"),
    (scipy.sparse.csr_matrix(np.array([[1.0, -2.0]])), None, r"row 0, column 1 is -2.0"),
    ([[(0, 1), (1, 2.5)]], None, r"X\[0\] word id 1 is 2.5"),
    ([[(0, 1)], ["a"]], None, r"X\[1\] is not a bag of words"),
    (["a text", ["tokens"]], None, r"X\[0\] is a string among token lists"),
    (scipy.sparse.csr_matrix(np.ones((1, 3))), ["a", "b"], "vocabulary has 2 words for a matrix of 3 columns"),
])
def test_counts_that_are_not_counts_are_refused_by_name(X, vocabulary, message):
    with pytest.raises(ValueError, match=message):
        to_documents(X, vocabulary)


def test_a_count_matrix_bags_of_words_and_texts_fit_as_documents():
    texts, groups = _texts()
    from sklearn.feature_extraction.text import CountVectorizer

    vectorizer = CountVectorizer(stop_words="english")  # as the fits drop them
    counts = vectorizer.fit_transform(texts)
    vocabulary = vectorizer.get_feature_names_out()
    from_matrix = _fit(counts, groups, vocabulary=vocabulary)
    assert from_matrix.documents_ and from_matrix.n_tokens_ == counts.sum()
    bags = [list(zip(row.indices.tolist(), row.data.tolist())) for row in counts]
    from_bags = _fit(bags, groups, vocabulary=list(vocabulary))
    # the same documents in the same token order: the same draws
    assert from_bags.vocabulary_ == from_matrix.vocabulary_
    np.testing.assert_array_equal(from_bags.topic_word_, from_matrix.topic_word_)
    from_texts = _fit(texts, groups)
    assert sorted(from_texts.vocabulary_) == sorted(vocabulary)
    for est in (from_matrix, from_texts):  # the themes come out, whatever the form
        top = [set(words[:4]) for words in est.top_words(4)]
        assert all(set(theme) in top for theme in THEMES), top
    # perplexity takes every form too (completion splits each document's tokens in their order: a count
    # row gives them in word order)
    column = {word: j for j, word in enumerate(vocabulary)}
    tokens = to_documents(texts[:6], stop_words="english")
    in_word_order = [sorted(doc, key=column.get) for doc in tokens]
    assert from_matrix.perplexity(counts[:6], vocabulary) == from_matrix.perplexity(in_word_order)
    assert from_matrix.perplexity(texts[:6]) == from_matrix.perplexity(tokens)


def test_listed_topics_top_words_coherence_and_new_documents_proportions():
    texts, groups = _texts()
    est = _fit(texts, groups)
    shares = np.asarray(est.weights_)
    assert est.n_topics_ == int((shares >= 0.01).sum()) >= 3
    assert len(est.top_words(5)) == est.n_topics_ and len(est.top_words(5, topics="all")) == est.n_clusters_
    docs = to_documents(texts, stop_words="english")
    np.testing.assert_allclose(est.coherence_, npmi_coherence(est.top_words(10), docs))
    np.testing.assert_allclose(est.coherence(texts[:12]), npmi_coherence(est.top_words(10), docs[:12]))  # a reference
    new = ["plum fig pear apple plum", "tram bus car", "nothing known here"]
    theta = est.transform(new, topics="all")
    assert theta.shape == (3, est.n_clusters_) and np.allclose(theta.sum(1), 1)
    listed = est.transform(new)  # the columns of top_words(): the listed topics, largest first
    assert listed.shape == (3, est.n_topics_) and np.array_equal(listed, theta[:, :est.n_topics_])
    # a theme may have copies (atoms of different latent DPs): the fruit text's share on the fruit topics
    fruit = [k for k, words in enumerate(est.top_words(4, "all")) if set(words) == set(THEMES[0])]
    assert theta[0, fruit].sum() > 0.8 and theta[1].argmax() not in fruit
    np.testing.assert_allclose(theta[2], est.weights_)  # no known word: the corpus's mixture itself
    in_group = est.transform(["nothing known here"], groups=[1], topics="all")  # the group's mixture
    np.testing.assert_allclose(in_group[0], est.group_weights_[1])
    with pytest.raises(ValueError, match="fitted groups"):
        est.transform(["plum"], groups=[7])


def test_a_saved_topic_model_keeps_its_listing_coherence_and_tokenizer(tmp_path):
    texts, groups = _texts()
    est = CoupledDP(truncation=6, max_iter=20, warmup=20, random_state=0, tokenizer=str.split).fit(texts, groups)
    est.save(tmp_path / "topics.pt")
    with pytest.raises(ValueError, match="tokenizer= again"):
        CoupledDP.load(tmp_path / "topics.pt")
    loaded = CoupledDP.load(tmp_path / "topics.pt", tokenizer=str.split)
    assert loaded.n_topics_ == est.n_topics_ and loaded.top_words(5) == est.top_words(5)
    np.testing.assert_array_equal(loaded.coherence_, est.coherence_)
    np.testing.assert_array_equal(loaded.transform(texts[:4]), est.transform(texts[:4]))


def test_the_prevalence_figure_shows_each_group_s_topics(tmp_path):
    texts, groups = _texts()
    est = _fit(texts, 1990 + groups)
    fig = est.plot_prevalence(tmp_path / "prevalence.png")
    assert (tmp_path / "prevalence.png").stat().st_size > 10_000
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["1990", "1991", "1992"]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert len(labels) == est.n_topics_ and all(len(label.split()) == 4 for label in labels)  # "k:" and 3 words
    shares = ax.images[0].get_array()
    counts = np.asarray(est.group_counts_)
    np.testing.assert_allclose(shares, counts[:, :est.n_topics_] / counts.sum(1, keepdims=True))
    assert (shares.sum(1) <= 1 + 1e-9).all() and (shares.sum(1) > 0.9).all()
    # each group's largest topic is its own theme
    for t in range(3):
        assert set(est.top_words(4)[int(np.argmax(shares[t]))]) == set(THEMES[t])
    close(fig)


def _brute_force_windows(texts, words, window_size):
    """gensim's sliding update, token by token: each slide drops the token at the left edge, adds the
    new one at the right."""
    single, joint, windows = np.zeros(len(words)), np.zeros((len(words), len(words))), 0
    for text in texts:
        starts = max(1, len(text) - window_size + 1)
        held = set(text[:window_size])
        for s in range(starts):
            if s:
                held.discard(text[s - 1])
                held.add(text[s + window_size - 1])
            windows += 1
            ids = [i for i, w in enumerate(words) if w in held]
            single[ids] += 1
            joint[np.ix_(ids, ids)] += 1
    return single, joint, windows


@pytest.mark.parametrize("window_size", [1, 3, 10, 50])
def test_window_counts_follow_gensim_s_sliding_update(window_size):
    rng = random.Random(window_size)
    vocab = list("abcdefgh")
    texts = [[rng.choice(vocab) for _ in range(rng.randint(0, 30))] for _ in range(25)]
    words = ["a", "b", "c", "z"]
    ours = window_counts(texts, words, window_size)
    expected = _brute_force_windows(texts, words, window_size)
    for a, b in zip(ours, expected):
        np.testing.assert_array_equal(a, b)


def test_npmi_is_one_for_words_always_together_and_minus_one_for_words_never_together():
    texts = [["a", "b", "x", "x"], ["c", "d", "x", "x"]] * 5
    missing = []
    scores = npmi_coherence([["a", "b"], ["a", "c"], ["a", "q"]], texts, window_size=4, missing=missing)
    # never together: ln(eps / P(a) P(c)) / -ln(eps), eps = 1e-12
    assert scores[0] == pytest.approx(1.0) and scores[1] == pytest.approx(-1 + np.log(4) / -np.log(1e-12))
    assert scores[2] == -1.0 and missing == ["q"]


def test_npmi_matches_gensim_s_c_npmi():
    gensim = pytest.importorskip("gensim")  # the bench extra
    from gensim.corpora import Dictionary
    from gensim.models.coherencemodel import CoherenceModel
    from gensim.test.utils import datapath

    with open(datapath("lee_background.cor"), encoding="utf-8") as file:
        texts = [tokenize(line) for line in file]
    dictionary = Dictionary(texts)
    rng = np.random.default_rng(0)
    common = [w for w, i in dictionary.token2id.items() if dictionary.dfs[i] >= 5]
    topics = [list(rng.choice(common, 10, replace=False)) for _ in range(4)]
    topics.append([w for w in dict.fromkeys(texts[3]) if w in common][:10])  # words of one text: coherent
    for window_size in (10, 40):
        reference = CoherenceModel(topics=topics, texts=texts, dictionary=dictionary, coherence="c_npmi",
                                   window_size=window_size, topn=10).get_coherence_per_topic()
        np.testing.assert_allclose(npmi_coherence(topics, texts, window_size), reference, atol=0.01)
    assert gensim.__version__


def test_the_cli_reports_coherence_and_draws_the_prevalence(tmp_path, capsys):
    texts, groups = _texts()
    (tmp_path / "train.txt").write_text("\n".join(" ".join(tokenize(t)) for t in texts) + "\n")
    (tmp_path / "groups.txt").write_text("\n".join(str(2000 + g) for g in groups) + "\n")
    argv = ["fit", "coupled-dp", "--data", str(tmp_path / "train.txt"), "--groups", str(tmp_path / "groups.txt"),
            "--truncation", "6", "--iters", "30", "--warmup", "30", "--plot", str(tmp_path / "topics.png")]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "coherence" in printed and (tmp_path / "topics.png").stat().st_size > 10_000
    topic_lines = [line for line in printed.splitlines() if line.startswith("topic")]
    assert topic_lines and all("NPMI" in line for line in topic_lines)
    assert main(argv + ["--json"]) == 0
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert record["k_used"] == record["n_topics"] <= record["atoms_used"]
    assert -1 <= record["coherence"] <= 1 and len(record["topic_coherence"]) == record["n_topics"]
