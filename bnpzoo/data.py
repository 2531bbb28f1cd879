"""Data sets: the embedded ones by name, and files (.csv / .npy, rows = samples) by path.

Embedded:
    digits                  scikit-learn's 1,797 8x8 handwritten digits, pixels scaled to [0, 1]
    blobs[:n=..,d=..,k=..,seed=..,spread=..,noise=gaussian|laplace]
                            k clusters in d dimensions, generated here: centres ~ N(0, spread^2 I),
                            independent unit-variance Gaussian (or Laplace) noise per feature
    digits-bags             a corpus: see ``bnpzoo.corpus`` (also .txt files, and count matrices
                            given with groups)
Labels come with the embedded sets; for files, from ``labels`` (one integer a line).
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bnpzoo.corpus import Corpus, counts_to_corpus, digits_bags, read_corpus, read_integers

BLOBS_DEFAULTS = {"n": 2000, "d": 2, "k": 6, "seed": 0, "spread": 10.0, "noise": "gaussian"}
NOISE = {"gaussian": lambda rng, size: rng.normal(size=size),
         "laplace": lambda rng, size: rng.laplace(scale=2**-0.5, size=size)}  # unit variance


@dataclass
class Dataset:
    name: str
    X: np.ndarray
    labels: np.ndarray | None = None


def digits() -> Dataset:
    from sklearn.datasets import load_digits

    raw = load_digits()
    return Dataset("digits", raw.data.astype(np.float32) / 16.0, raw.target.astype(np.int64))


def blobs(n=2000, d=2, k=6, seed=0, spread=10.0, noise="gaussian") -> Dataset:
    """n points from k clusters with unit-variance ``noise`` (gaussian or laplace), equal weights."""
    for name, value, low in (("n", n, 1), ("d", d, 1), ("k", k, 1)):
        if int(value) != value or value < low:
            raise ValueError(f"blobs: {name} must be an integer >= {low}, got {value}")
    if not spread > 0:
        raise ValueError(f"blobs: spread must be > 0, got {spread}")
    if noise not in NOISE:
        raise ValueError(f"blobs: noise must be one of {', '.join(NOISE)}, got {noise!r}")
    rng = np.random.default_rng(int(seed))
    centres = rng.normal(0.0, spread, size=(int(k), int(d)))
    labels = rng.integers(0, int(k), size=int(n))
    X = centres[labels] + NOISE[noise](rng, (int(n), int(d)))
    name = f"blobs:n={n},d={d},k={k},seed={seed}" + (f",noise={noise}" if noise != "gaussian" else "")
    return Dataset(name, X.astype(np.float32), labels)


def _parse_blobs(spec: str) -> dict:
    options = dict(BLOBS_DEFAULTS)
    if ":" in spec:
        for item in spec.split(":", 1)[1].split(","):
            key, _, value = item.partition("=")
            if key not in BLOBS_DEFAULTS or not value:
                raise ValueError(f"blobs option {item!r} is not one of {', '.join(k + '=...' for k in BLOBS_DEFAULTS)}")
            if key == "noise":
                options[key] = value
                continue
            try:
                options[key] = float(value) if key == "spread" else int(value)
            except ValueError:
                raise ValueError(f"blobs option {key} must be a number, got {value!r}") from None
    return options


def read_labels(path, n_rows: int) -> np.ndarray:
    """One integer a line, as many lines as the data has rows."""
    return read_integers(path, n_rows, what="labels", of="rows")


def load_file(path) -> np.ndarray:
    path = Path(path)
    if not path.exists():
        raise ValueError(f"data file {path} does not exist")
    if path.suffix == ".npy":
        X = np.load(path, allow_pickle=False)
    elif path.suffix == ".csv":
        X = _read_csv(path)
    else:
        raise ValueError(f"data file {path}: expected .csv or .npy, got {path.suffix or 'no suffix'!r}")
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[:, None]
    return X


def _read_csv(path: Path) -> np.ndarray:
    """Numbers separated by commas; a first line that is not numeric is taken as a header."""
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    if not lines:
        raise ValueError(f"data file {path} is empty")
    try:
        [float(tok) for tok in lines[0].split(",")]
    except ValueError:
        lines = lines[1:]
    rows = []
    for i, line in enumerate(lines, start=1):
        try:
            rows.append([float(tok) for tok in line.split(",")])
        except ValueError:
            raise ValueError(f"data file {path}: row {i} is not numeric: {line[:60]!r}") from None
    if not rows:
        raise ValueError(f"data file {path} has no data rows")
    if len({len(r) for r in rows}) != 1:
        raise ValueError(f"data file {path}: rows have different numbers of columns")
    return np.array(rows)


def load(spec: str, labels=None, groups=None) -> Dataset | Corpus:
    """An embedded data set by name (``digits``, ``blobs[:...]``) or a .csv / .npy path; or a
    corpus (``bnpzoo.corpus``): ``digits-bags``, a .txt path, or a .csv / .npy count matrix given
    with ``groups``."""
    if spec == "digits-bags" or spec.endswith(".txt") or (groups is not None and spec.endswith((".csv", ".npy"))):
        corpus = _load_corpus(spec)
        n = len(corpus.docs)
        if groups is not None:
            corpus.groups = read_integers(groups, n, what="groups", of="documents", minimum=0)
        if labels is not None:
            corpus.labels = read_integers(labels, n, what="labels", of="documents")
        return corpus
    if spec == "digits":
        data = digits()
    elif spec == "blobs" or spec.startswith("blobs:"):
        data = blobs(**_parse_blobs(spec))
    elif spec.endswith((".csv", ".npy")):
        data = Dataset(Path(spec).name, load_file(spec))
    else:
        raise ValueError(f"unknown data {spec!r}: use digits, blobs[:n=..,d=..,k=..,seed=..], digits-bags, "
                         "or a .csv/.npy/.txt path")
    if labels is not None:
        data.labels = read_labels(labels, data.X.shape[0])
    return data


def _load_corpus(spec: str) -> Corpus:
    if spec == "digits-bags":
        return digits_bags()
    if spec.endswith(".txt"):
        return read_corpus(spec)
    return counts_to_corpus(load_file(spec), Path(spec).name)
