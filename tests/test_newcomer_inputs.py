"""What a new user passes and what it should give (issue 62): documents and group labels in the
containers people hold them in, errors that name the argument and the entry, the CLI's help."""

import io
import json
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse

from bnpzoo import DPGMM, CoupledDP
from bnpzoo.cli import main
from bnpzoo.corpus import group_labels, to_documents
from bnpzoo.progress import progress
from bnpzoo.registry import MODELS

TEXTS = ["apple pear plum fig", "pear plum fig apple", "car bus train tram", "bus train tram car"] * 3
NAMES = ["fruit", "fruit", "transport", "transport"] * 3


def _fit(X, groups, **kwargs):
    return CoupledDP(truncation=4, max_iter=10, warmup=10, random_state=0).fit(X, groups, **kwargs)


@pytest.mark.parametrize("container", [pd.Series, np.array, iter, lambda t: (text for text in t)])
def test_texts_in_any_container_are_the_documents_of_a_list(container):
    assert to_documents(container(TEXTS)) == to_documents(TEXTS)


def test_token_lists_from_pandas_split_are_documents():
    assert to_documents(pd.Series(TEXTS).str.split()) == [text.split() for text in TEXTS]


@pytest.mark.parametrize("X, message", [
    ("the cat sat", r"X is one string \('the cat sat'\): .* give \[X\]"),
    (["a b", "b c", float("nan"), "c d"], r"X\[2\] is nan, not a text"),
    ([["a", None], ["b"]], r"X\[0\]\[1\] is None: a token must be a string"),
    ([["a", float("nan")], ["b"]], r"X\[0\]\[1\] is nan"),
    ({"first": "a b", "second": "c d"}, r"X is a dict: a corpus is a sequence of documents .* list\(X.values\(\)\)"),
])
def test_documents_that_are_not_name_the_entry(X, message):
    with pytest.raises(ValueError, match=message):
        to_documents(X)


def test_empty_token_lists_are_empty_documents_not_numbers():
    assert to_documents([[]] * 10) == [[]] * 10
    with pytest.raises(ValueError, match="the corpus has no tokens"):
        _fit([[]] * 10, [0, 1] * 5)


def test_a_count_too_large_for_memory_is_refused_before_allocating():
    counts = scipy.sparse.csr_matrix(np.array([[1, 2], [3, 1e12]]))
    with pytest.raises(ValueError, match=r"largest count is 1,000,000,000,000 \(row 1, column 1\)"):
        to_documents(counts)


def test_group_names_are_kept_in_the_fit_its_transform_and_its_save(tmp_path):
    est = _fit(pd.Series(TEXTS), pd.Series(NAMES))
    assert est.group_values_ == ["fruit", "transport"]
    by_name = est.transform(TEXTS[:2], groups=["transport", "fruit"], topics="all")
    by_index = est.group_weights_[[1, 0]]
    np.testing.assert_allclose(est.transform(["nothing known"], groups=["transport"], topics="all")[0], by_index[0])
    assert by_name.shape == (2, est.n_clusters_)
    est.save(tmp_path / "m.pt")
    assert CoupledDP.load(tmp_path / "m.pt").group_values_ == ["fruit", "transport"]
    with pytest.raises(ValueError, match="fitted groups"):
        est.transform(TEXTS[:1], groups=["sport"])


@pytest.mark.parametrize("groups, message", [
    (["a", None, "b"], r"groups\[1\] is None"),
    ([0, "b", 1], r"groups mixes names and integers \(groups\[0\] is 0, groups\[1\] is 'b'\)"),
    ([0.5, 1.0, 2.0], r"groups\[0\] is 0.5"),
])
def test_bad_group_labels_name_the_entry(groups, message):
    with pytest.raises(ValueError, match=message):
        group_labels(groups)


def test_integer_group_labels_are_unchanged():
    values, index = group_labels(np.array([3, 1, 3, 2]))
    assert values.tolist() == [1, 2, 3] and index.tolist() == [2, 0, 2, 1]


def test_scores_before_a_fit_raise_not_fitted():
    from sklearn.exceptions import NotFittedError

    for method in ("perplexity", "transform", "coherence"):
        with pytest.raises(NotFittedError):
            getattr(CoupledDP(), method)(TEXTS)


def test_a_count_matrix_scored_without_its_vocabulary_warns():
    counts = scipy.sparse.csr_matrix(np.random.default_rng(0).poisson(1, (12, 6)) + 1)
    est = _fit(counts, [0, 1] * 6, vocabulary=list("abcdef"))
    with pytest.warns(UserWarning, match="none of the transform documents' words .*'w0'.*vocabulary="):
        est.transform(counts[:2])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est.transform(counts[:2], vocabulary=list("abcdef"))


def test_transform_s_columns_are_the_listed_topics():
    est = _fit(TEXTS, NAMES)
    listed = est.transform(TEXTS[:3])
    assert listed.shape == (3, est.n_topics_) == (3, len(est.top_words()))
    np.testing.assert_array_equal(listed, est.transform(TEXTS[:3], topics="all")[:, :est.n_topics_])
    with pytest.raises(ValueError, match="topics must be 'listed'"):
        est.transform(TEXTS[:3], topics="some")


def test_a_parameter_of_the_wrong_type_is_named_before_the_fit():
    with pytest.raises(ValueError, match=r"truncation must be an integer in \[1, inf\), got '50'"):
        DPGMM(truncation="50").fit(np.zeros((10, 2)))


def test_a_date_column_is_a_value_error_naming_the_column():
    frame = pd.DataFrame({"a": np.arange(20.0), "when": pd.date_range("2020", periods=20)})
    with pytest.raises(ValueError, match=r"column 1 \('when'\) holds Timestamp"):
        DPGMM().fit(frame)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_a_model_s_help_describes_every_option_with_its_default(model, capsys):
    assert main(["fit", model, "--help"]) == 0
    out = capsys.readouterr().out
    for flag, name, kwargs in MODELS[model].options():
        assert flag in out
        text = kwargs["help"]
        assert len(text.split("[")[0].strip()) > 10, f"{flag} has no description"  # the docstring's sentence
        assert "default" in text


def test_the_cli_says_what_it_wrote_and_prints_no_python(tmp_path, capsys):
    saved, labels = tmp_path / "model.pt", tmp_path / "labels.txt"
    assert main(["fit", "dp-gmm", "--data", "blobs:n=300,d=2,k=3", "--save", str(saved),
                 "--labels-out", str(labels)]) == 0
    err = capsys.readouterr().err
    assert f"wrote the fitted model to {saved}" in err and f"wrote 300 rows' clusters to {labels}" in err
    assert main(["fit", "coupled-dp", "--data", "topics:n=60,groups=3,topics=12,vocab=60,length=20",
                 "--iters", "10"]) == 0
    out = capsys.readouterr().out
    assert "est." not in out and "top_words()" not in out


def test_a_progress_bar_ends_at_what_was_done():
    shown = io.StringIO()
    with progress(total=500, file=shown) as bar:
        for _ in range(4):
            bar.update(1)
    assert bar.total == bar.n == 4
    assert "4/4" in shown.getvalue().splitlines()[-1].split("\r")[-1]


def test_the_json_line_is_unchanged_by_the_wrote_lines(tmp_path, capsys):
    assert main(["fit", "dp-gmm", "--data", "blobs:n=200,d=2,k=2", "--json", "--save", str(tmp_path / "m.pt")]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out.strip().splitlines()[-1])["model"] == "dp-gmm"


@pytest.mark.parametrize("random_state", range(5))
def test_rows_too_small_for_float32_are_fitted_in_float64_with_a_warning(random_state):
    rng = np.random.default_rng(random_state)
    groups = np.repeat([0, 1], 100)
    X = (rng.normal(size=(200, 2)) + 10 * groups[:, None]) * 1e-30
    with pytest.warns(UserWarning, match="too small for a float32 fit's precisions .* fitting in float64"):
        est = DPGMM(random_state=random_state).fit(X)
    assert est.n_clusters_ == 2 and np.unique(est.predict(X)[groups == 0]).size == 1
    with pytest.raises(ValueError, match="too small for a fit's precisions .* even in float64"):
        DPGMM().fit(X * 1e-150)


def test_the_cli_takes_group_names_and_keeps_them_in_the_figure(tmp_path, capsys):
    (tmp_path / "c.txt").write_text("\n".join(TEXTS) + "\n")
    (tmp_path / "g.txt").write_text("\n".join(NAMES) + "\n")
    figure = tmp_path / "prevalence.png"
    assert main(["fit", "coupled-dp", "--data", str(tmp_path / "c.txt"), "--groups", str(tmp_path / "g.txt"),
                 "--iters", "10", "--plot", str(figure)]) == 0
    assert figure.exists() and f"wrote the prevalence figure to {figure}" in capsys.readouterr().err
    from bnpzoo.data import load

    assert sorted(set(load(str(tmp_path / "c.txt"), groups=tmp_path / "g.txt", as_corpus=True).groups)) == \
        ["fruit", "transport"]


@pytest.mark.parametrize("random_state", range(3))
def test_hdp_gd_takes_group_names_and_keeps_them(random_state):
    from bnpzoo import HDPGD
    from bnpzoo.data import hdp_gd_sample

    ds = hdp_gd_sample(n=200, seed=1, relevant=2, irrelevant=1)
    names = np.array(["north", "south", "east", "west"])[np.asarray(ds.groups) % 4]
    by_name = HDPGD(max_iter=5, random_state=random_state).fit(ds.X, list(names))
    assert list(by_name.groups_) == ["east", "north", "south", "west"]
    # the same fit as with the names' positions in sorted order as integer labels
    codes = np.searchsorted(by_name.groups_, names)
    by_code = HDPGD(max_iter=5, random_state=random_state).fit(ds.X, codes)
    assert np.array_equal(by_name.labels_, by_code.labels_)
    assert np.array_equal(by_name.predict(ds.X, names), by_code.predict(ds.X, codes))
    with pytest.raises(ValueError, match="group 'up' was not in the fit"):
        by_name.predict(ds.X[:1], ["up"])
    with pytest.raises(ValueError, match="was not in the fit"):
        by_name.predict(ds.X[:1], [0])


def test_a_csv_count_matrix_s_header_of_words_is_its_vocabulary(tmp_path):
    """Not dropped as a header of feature names, leaving the topics to print as w0 w5 w3."""
    from bnpzoo.data import load

    words = ["apple", "pear", "stone", "rock"]
    (tmp_path / "counts.csv").write_text(",".join(words) + "\n3,2,0,0\n0,0,4,1\n1,0,2,2\n")
    (tmp_path / "g.txt").write_text("0\n1\n1\n")
    corpus = load(str(tmp_path / "counts.csv"), groups=tmp_path / "g.txt", as_corpus=True)
    assert corpus.docs[0] == ["apple"] * 3 + ["pear"] * 2 and corpus.docs[1] == ["stone"] * 4 + ["rock"]
    (tmp_path / "plain.csv").write_text("3,2,0,0\n0,0,4,1\n1,0,2,2\n")  # no header: w0, w1, ...
    assert load(str(tmp_path / "plain.csv"), groups=tmp_path / "g.txt", as_corpus=True).docs[1] == ["w2"] * 4 + ["w3"]


@pytest.mark.parametrize("random_state", range(5))
def test_the_laplace_mixture_s_default_iterations_let_it_converge(random_state):
    from bnpzoo import PYPGGM

    assert PYPGGM()._iterations() == 500 and PYPGGM(likelihood="laplace")._iterations() == 2000
    assert PYPGGM(likelihood="laplace", max_iter=30)._iterations() == 30
    rng = np.random.default_rng(random_state)
    X = np.concatenate([rng.laplace(0, 1, (150, 3)), rng.laplace(12, 1, (150, 3))])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ConvergenceWarning
        est = PYPGGM(likelihood="laplace", random_state=random_state).fit(X)
    assert est.converged_ and est.n_clusters_ == 2


@pytest.mark.parametrize("argv", [["fit", "hdp-gd", "--data", "digits"], ["fit", "dp-gmm", "--data", "digits",
                                                                          "--inference", "online-vi"],
                                  ["fit", "dp-gmm", "--data", "nothere.csv"], ["fit", "dp-gmm", "--alpha", "x"]])
def test_every_command_line_error_is_one_line_naming_bnpzoo(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("bnpzoo") and "\n" not in err and "Traceback" not in err, err


def test_group_labels_from_a_generator_are_read_once():
    est = _fit(TEXTS, (name for name in NAMES))
    assert est.group_values_ == ["fruit", "transport"]
    assert est.transform(TEXTS[:2], groups=iter(["transport", "fruit"])).shape[0] == 2
