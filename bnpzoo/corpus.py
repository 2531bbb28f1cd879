"""Grouped corpora for the topic models: documents as lists of tokens, a group for each.

Sources:
    a .txt file             one document a line, whitespace-separated tokens used as they are
                            (no lower-casing, no stop words, no frequency filter)
    a count matrix          documents x words (.csv / .npy, given with groups): non-negative
                            integer counts; word j is the token "w<j>"
    digits-bags             scikit-learn's 1,797 8x8 digits, each a bag of pixel tokens "p00".."p63"
                            whose counts are the intensities 0..16, grouped by class (the set-up of
                            [Coupled-DP] section 5.2, with images for scenes)

Groups (and labels) are files of integers, one a line, aligned with the documents. Every
failure is a ValueError that names the file and the line, row or entry at fault.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class Corpus:
    name: str
    docs: list[list[str]]
    groups: np.ndarray | None = None
    labels: np.ndarray | None = None

    def vocabulary(self) -> list[str]:
        """Distinct tokens in order of first appearance."""
        return list(dict.fromkeys(token for doc in self.docs for token in doc))

    def token_arrays(self, vocab: list[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(document index, word index) of every token, flat; tokens outside ``vocab`` dropped."""
        index = {token: i for i, token in enumerate(vocab if vocab is not None else self.vocabulary())}
        pairs = [(d, index[t]) for d, doc in enumerate(self.docs) for t in doc if t in index]
        arr = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        return arr[:, 0], arr[:, 1]


def as_words(docs) -> list:
    """Token lists with every token a word: 7 and "7" are the same word. A document that is not a
    list (one string) is left for the caller to refuse."""
    return [[str(token) for token in doc] if isinstance(doc, (list, tuple)) else doc for doc in docs]


def read_corpus(path) -> Corpus:
    """A .txt corpus: one document a line; an empty line is an error, not an empty document."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"corpus {path} does not exist")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise ValueError(f"corpus {path} is not UTF-8 text ({err.reason} at byte {err.start})") from None
    if not lines:
        raise ValueError(f"corpus {path} is empty")
    docs = [line.split() for line in lines]
    empty = [i for i, doc in enumerate(docs, start=1) if not doc]
    if empty:
        shown = ", ".join(map(str, empty[:5])) + (" ..." if len(empty) > 5 else "")
        raise ValueError(f"corpus {path}: line {shown} is empty (every line must be a document)")
    return Corpus(path.name, docs)


def read_integers(path, n: int, *, what: str, of: str, minimum: int | None = None) -> np.ndarray:
    """One integer a line, exactly ``n`` of them (``what`` and ``of`` name them in errors)."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"{what} file {path} does not exist")
    values = []
    for i, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            values.append(int(line.strip()))
        except ValueError:
            raise ValueError(f"{what} file {path}: line {i} is not an integer: {line.strip()[:40]!r}") from None
        if minimum is not None and values[-1] < minimum:
            raise ValueError(f"{what} file {path}: line {i} is {values[-1]}, below {minimum}")
    if len(values) != n:
        raise ValueError(f"{what} file {path} has {len(values)} {what} for {n} {of}")
    return np.asarray(values, dtype=np.int64)


def counts_to_corpus(counts, name: str, token=lambda j: f"w{j}") -> Corpus:
    """A documents x words count matrix as a corpus; column j is the token ``token(j)``
    ("w0", "w1", ... by default)."""
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim != 2 or 0 in counts.shape:
        raise ValueError(f"{name}: a count matrix must be a non-empty documents x words array, "
                         f"got shape {counts.shape}")
    bad = ~np.isfinite(counts) | (counts < 0) | (counts != np.round(counts))
    if bad.any():
        row, col = map(int, np.argwhere(bad)[0])
        raise ValueError(f"{name}: counts must be non-negative integers; row {row + 1}, column {col + 1} is "
                         f"{float(counts[row, col])!r}")
    empty = np.flatnonzero(counts.sum(1) == 0)
    if empty.size:
        raise ValueError(f"{name}: document (row) {empty[0] + 1} has no tokens")
    names = [token(j) for j in range(counts.shape[1])]
    docs = [[names[j] for j in np.repeat(np.arange(counts.shape[1]), row.astype(np.int64))] for row in counts]
    return Corpus(name, docs)


def digits_bags() -> Corpus:
    from sklearn.datasets import load_digits

    raw = load_digits()
    bags = counts_to_corpus(raw.data, "digits-bags", token=lambda j: f"p{j:02d}")
    bags.groups = bags.labels = raw.target.astype(np.int64)
    return bags
