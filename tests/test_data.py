import numpy as np
import pytest

from bnpzoo import data
from conftest import load_written


def test_digits_are_scaled_to_unit_interval(digits):
    assert digits.X.shape == (1797, 64) and digits.X.min() == 0 and digits.X.max() == 1
    assert set(np.unique(digits.labels)) == set(range(10))


def test_blobs_options_and_reproducibility():
    a = data.load("blobs:n=500,d=3,k=4,seed=7")
    b = data.load("blobs:n=500,d=3,k=4,seed=7")
    assert a.X.shape == (500, 3) and np.array_equal(a.X, b.X) and a.labels.max() < 4
    with pytest.raises(ValueError, match="blobs option"):
        data.load("blobs:size=3")
    with pytest.raises(ValueError, match="noise"):
        data.load("blobs:noise=cauchy")


def test_laplace_blobs_have_unit_variance_and_the_laplace_tails():
    ds = data.load("blobs:n=40000,d=2,k=1,spread=1,noise=laplace")
    x = ds.X - ds.X.mean(0)
    assert np.allclose(x.var(0), 1.0, rtol=0.05)
    assert np.allclose((x**4).mean(0) / x.var(0) ** 2, 6.0, rtol=0.1)  # the Laplace's kurtosis
    assert ds.name.endswith("noise=laplace")


def test_csv_with_header_and_labels(tmp_path):
    (tmp_path / "x.csv").write_text("a,b\n1,2\n3,4\n5,6\n")
    (tmp_path / "y.txt").write_text("0\n1\n1\n")
    ds = data.load(str(tmp_path / "x.csv"), labels=tmp_path / "y.txt")
    assert ds.X.shape == (3, 2) and ds.labels.tolist() == [0, 1, 1]


@pytest.mark.parametrize("content, labels, message", [
    ("1,2\n3\n", None, "columns"),
    ("1,2\nx,4\n", None, "not numeric"),
    ("1,2\n3,4\n", "0\n", "1 labels for 2 rows"),
    ("1,2\n3,4\n", "0\nb\n", "integer"),
    ("", None, "empty"),
])
def test_corrupt_files_name_the_problem(tmp_path, content, labels, message):
    with pytest.raises(ValueError, match=message):
        load_written(tmp_path, "x.csv", content, labels=labels)
