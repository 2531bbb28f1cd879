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
    ("1,2\n3\n", None, "line 2 has 1 columns where the rows above have 2"),
    ("a,b\n1,2\n3,4,5\n", None, "line 3 has 3 columns"),
    ("a,b\n1,2\n3,inf\n", None, r"line 3, column 2 \('b'\) is 'inf', not a finite number"),
    ("1,2\nNaN,4\n", None, "line 2, column 1 is 'NaN', not a finite number"),
    ("1,2\nx,4\n", None, "line 2, column 1 is not a number: 'x'"),
    ("a,b\n1,2\n3,x\n", None, r"line 3, column 2 \('b'\) is not a number"),
    ("1,,3\n4,5,6\n", None, "line 1, column 2 is empty"),  # a missing value, not a header
    ("1,2\n3,4\n", "0\n", "1 labels for 2 rows"),
    ("1,2\n3,4\n", "0\nb\n", "integer"),
    ("", None, "empty"),
])
def test_corrupt_files_name_the_problem(tmp_path, content, labels, message):
    with pytest.raises(ValueError, match=message):
        load_written(tmp_path, "x.csv", content, labels=labels)


@pytest.mark.parametrize("content, rows", [
    ("\ufeff1,2\n3,4\n", [[1, 2], [3, 4]]),  # a byte-order mark: no header, both rows kept
    ("\ufeffa,b\n1,2\n", [[1, 2]]),
    (",a,b\n0,1.5,2\n1,3,4\n2,5,6\n", [[1.5, 2], [3, 4], [5, 6]]),  # pandas' to_csv: its index dropped
    ("id,a\n7,1\n9,2\n", [[7, 1], [9, 2]]),  # a named column of other numbers is data
    ('"a","b"\n1,2\n', [[1, 2]]),
])
def test_csv_headers_are_found_by_rule_and_pandas_index_columns_are_not_features(tmp_path, content, rows):
    (tmp_path / "x.csv").write_text(content, encoding="utf-8")
    assert data.load(str(tmp_path / "x.csv")).X.tolist() == rows


def test_a_csv_written_by_pandas_loads_as_its_frame(tmp_path):
    import pandas as pd

    frame = pd.DataFrame(np.random.default_rng(0).normal(size=(20, 3)), columns=["x", "y", "z"])
    frame.to_csv(tmp_path / "x.csv")
    assert np.allclose(data.load(str(tmp_path / "x.csv")).X, frame.to_numpy())


def test_a_csv_that_is_not_utf8_is_named(tmp_path):
    (tmp_path / "latin.csv").write_bytes("a,b\n1,caf\xe9\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin.csv is not UTF-8 text \(byte 9"):
        data.load(str(tmp_path / "latin.csv"))


def test_a_npy_file_that_holds_no_array_is_named(tmp_path):
    (tmp_path / "x.npy").write_bytes(b"not an array")
    with pytest.raises(ValueError, match=r"x.npy is not a numeric .npy array"):
        data.load(str(tmp_path / "x.npy"))
