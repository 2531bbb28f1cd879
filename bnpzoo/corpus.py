"""Grouped corpora for the topic models: documents as lists of tokens, a group for each.

In Python a topic model takes documents in any of the usual forms (``to_documents``): a sparse
count matrix with its vocabulary, raw texts (``tokenize``), gensim's bags of words with its
dictionary, or token lists.

Sources::

    a .txt file             one document a line, whitespace-separated tokens used as they are
                            (no lower-casing, no stop words, no frequency filter)
    a count matrix          documents x words (.csv / .npy, given with groups): non-negative
                            integer counts; word j is the token "w<j>", or
                            the j-th word of a header line of words
    topics                  a corpus drawn from a topic model with known topics (generated_topics)
    digits-bags             scikit-learn's 1,797 8x8 digits, each a bag of pixel tokens "p00".."p63"
                            whose counts are the intensities 0..16, grouped by class (the set-up of
                            [Coupled-DP] section 5.2, with images for scenes)

Groups (and labels) are files of integers, one a line, aligned with the documents. Every
failure is a ValueError that names the file and the line, row or entry at fault.
"""

import numbers
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse


@dataclass
class Corpus:
    name: str
    docs: list[list[str]]
    groups: np.ndarray | None = None
    labels: np.ndarray | None = None
    topics: np.ndarray | None = None  # generated corpora: the true topics (K, V), word j the token "w<j>"

    def vocabulary(self) -> list[str]:
        """Distinct tokens in order of first appearance."""
        return list(dict.fromkeys(token for doc in self.docs for token in doc))

    def token_arrays(self, vocab: list[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(document index, word index) of every token, flat; tokens outside ``vocab`` dropped."""
        index = {token: i for i, token in enumerate(vocab if vocab is not None else self.vocabulary())}
        # one pass, straight into arrays (8 bytes a token, not a tuple per token)
        lengths = np.fromiter((sum(1 for t in doc if t in index) for doc in self.docs), np.int64, len(self.docs))
        words = np.fromiter((index[t] for doc in self.docs for t in doc if t in index), np.int64, int(lengths.sum()))
        return np.repeat(np.arange(len(self.docs), dtype=np.int64), lengths), words


def as_words(docs) -> list:
    """Token lists with every token a word: 7 and "7" are the same word. A document that is not a
    list (one string) is left for the caller to refuse; a missing token (None, NaN) is refused,
    where ``str`` would make it the word "None"."""
    def word(token, d, i):
        if isinstance(token, str) or (isinstance(token, numbers.Real) and np.isfinite(token)):
            return str(token)
        raise ValueError(f"X[{d}][{i}] is {token!r}: a token must be a string (or a number, taken as a word); "
                         "drop the missing tokens")

    return [doc if isinstance(doc, list) and all(type(token) is str for token in doc)
            else [word(token, d, i) for i, token in enumerate(doc)] if isinstance(doc, (list, tuple)) else doc
            for d, doc in enumerate(docs)]


def as_sequence(X):
    """X as a list where it holds documents in another container (a pandas Series, a 1-D numpy
    array of strings or objects, a generator or another iterator); X itself otherwise. One string
    is refused (it would be read as a corpus of one-letter documents), and so is a mapping (its keys
    would be the documents)."""
    if isinstance(X, str):
        shown = repr(X) if len(X) <= 30 else repr(X[:30]) + "..."
        raise ValueError(f"X is one string ({shown}): a corpus is a sequence of documents; give [X] for one document")
    if isinstance(X, Mapping):
        raise ValueError(f"X is a {type(X).__name__}: a corpus is a sequence of documents (texts, token lists, "
                         "bags of words); give list(X.values()) if its values are the documents")
    kind = getattr(getattr(X, "dtype", None), "kind", None)
    if kind in ("U", "S", "O") and getattr(X, "ndim", 0) == 1 and hasattr(X, "tolist"):  # numpy, pandas
        return X.tolist()
    if hasattr(X, "__next__"):  # a generator or another iterator: read once
        return list(X)
    return X


def group_labels(groups) -> tuple[np.ndarray, np.ndarray]:
    """(the sorted distinct labels, each entry's index among them) of one group label per document
    or row: integers or names (strings), as a list, an array or a pandas Series; a missing label
    (None, NaN) is refused, naming its entry."""
    groups = list(groups) if hasattr(groups, "__next__") else groups
    if getattr(getattr(groups, "dtype", None), "kind", None) in ("i", "u") and np.ndim(groups) == 1:
        return np.unique(np.asarray(groups), return_inverse=True)  # an integer array: no look at each entry
    values = np.asarray(groups.tolist() if hasattr(groups, "tolist") else list(groups), dtype=object)
    if values.ndim != 1:
        raise ValueError(f"groups must be one label a document (or row), a 1-D sequence; got shape {values.shape}")
    for i, value in enumerate(values):
        if not isinstance(value, (str, numbers.Integral)) or isinstance(value, bool):
            raise ValueError(f"groups[{i}] is {value!r}: group labels must be integers or names (strings); "
                             "give every document (row) its group")
    if len({isinstance(value, str) for value in values}) > 1:
        first = next(i for i, value in enumerate(values) if isinstance(value, str) != isinstance(values[0], str))
        raise ValueError(f"groups mixes names and integers (groups[0] is {values[0]!r}, groups[{first}] is "
                         f"{values[first]!r}): give every label as a name or every one as an integer")
    kept = values.astype(str if len(values) and isinstance(values[0], str) else np.int64)
    return np.unique(kept, return_inverse=True)


def fitted_positions(fitted, groups) -> tuple[np.ndarray, object]:
    """(each entry's position among a fit's sorted labels ``fitted``, the first label that is not one
    of them or None), by one sorted search: the group axis of a fit's entries for new documents (rows)."""
    values, index = group_labels(groups)
    fitted = np.asarray(fitted)
    position = np.searchsorted(fitted, values).clip(0, len(fitted) - 1) if values.dtype.kind == fitted.dtype.kind \
        else np.zeros(len(values), dtype=np.int64)  # names against numbers: none is fitted
    unseen = fitted[position] != values
    return position[index], (values[unseen][0].item() if unseen.any() else None)


# the most tokens a corpus may hold: 8 bytes a token in every array the sampler keeps
MAX_TOKENS = 2**31


TOKEN_PATTERN = re.compile(r"(?u)\b\w\w+\b")  # scikit-learn's CountVectorizer's default: words of 2+ characters


def stop_word_set(stop_words) -> frozenset:
    """None: no stop words; "english": scikit-learn's list (318 words); else the words given."""
    if stop_words is None:
        return frozenset()
    if isinstance(stop_words, str):
        if stop_words != "english":
            raise ValueError(f"stop_words must be None, 'english' or a list of words, got {stop_words!r}")
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        return frozenset(ENGLISH_STOP_WORDS)
    return frozenset(stop_words)


def tokenize(text: str) -> list[str]:
    """The default tokenizer: the lower-cased words of two or more letters or digits, as
    scikit-learn's ``CountVectorizer`` finds them by default (so a text and its count row hold the
    same tokens)."""
    return TOKEN_PATTERN.findall(text.lower())


def _namer(vocabulary, size: int, what: str):
    """Word id -> token: ``vocabulary[id]`` (a list, an array such as ``get_feature_names_out()``,
    a mapping such as gensim's ``Dictionary``), or "w<id>" without one."""
    if vocabulary is None:
        return lambda j: f"w{j}"
    if hasattr(vocabulary, "__len__") and not hasattr(vocabulary, "keys") and len(vocabulary) < size:
        raise ValueError(f"vocabulary has {len(vocabulary)} words for {what} of {size}")

    def name(j):
        try:
            return str(vocabulary[j])
        except (KeyError, IndexError):
            raise ValueError(f"vocabulary has no word for id {j} ({what})") from None

    return name


def _is_bag_of_words(doc) -> bool:
    return (isinstance(doc, (list, tuple)) and len(doc) > 0 and all(
        isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], numbers.Integral)
        and isinstance(pair[1], numbers.Real) for pair in doc))


def _check_count(value, where: str) -> int:
    if not (np.isfinite(value) and value >= 0 and value == round(value)):
        raise ValueError(f"counts must be non-negative integers; {where} is {value!r} (weights such as "
                         "TfidfVectorizer's are not counts: give CountVectorizer's)")
    return int(value)


def keeps_token_order(X) -> bool:
    """Whether X's documents hold their tokens in text order: not a count matrix's rows nor gensim's
    bags of words, which list a document's words once each, with counts."""
    return not (scipy.sparse.issparse(X) or (isinstance(X, (list, tuple)) and any(_is_bag_of_words(d) for d in X)))


def to_documents(X, vocabulary=None, tokenizer=None, stop_words=None) -> list | None:
    """Documents in any of a topic model's usual forms as token lists, or None where X is not text:

    - a sparse documents x words count matrix (scipy, as ``CountVectorizer().fit_transform`` gives),
      word j named ``vocabulary[j]`` (``get_feature_names_out()``), each document's tokens in
      column order;
    - raw strings, split by ``tokenizer`` (default ``tokenize``);
    - gensim's bag-of-words documents, lists of (id, count), word ids named by ``vocabulary`` (its
      ``Dictionary``);
    - token lists (strings; numbers are words too: 7 and "7" are one word), as they are, unless
      every list holds numbers and all have one length (numeric rows given as lists).

    Without a vocabulary word j is "w<j>". ``stop_words`` (``stop_word_set``) are dropped from
    every form. Counts that are not non-negative integers are refused, naming the entry."""
    drop = stop_word_set(stop_words)
    keep = (lambda doc: [token for token in doc if token not in drop]) if drop else (lambda doc: doc)
    X = as_sequence(X)
    if scipy.sparse.issparse(X):
        return [keep(doc) for doc in _count_matrix_documents(X, vocabulary)]
    if not isinstance(X, (list, tuple)) or not X:
        return None
    if all(isinstance(doc, str) for doc in X):
        split = tokenize if tokenizer is None else tokenizer
        return [keep(list(split(doc))) for doc in X]
    texts = [isinstance(doc, str) for doc in X]
    if any(texts):
        if 2 * sum(texts) > len(X):  # mostly texts: name the entry that is not one
            odd = texts.index(False)
            raise ValueError(f"X[{odd}] is {X[odd]!r}, not a text, among texts: every document must be a string "
                             "(drop the missing ones, or fill them with '')")
        raise ValueError(f"X[{texts.index(True)}] is a string among token lists: give every document as a text or "
                         "every one as a list of tokens")
    if any(_is_bag_of_words(doc) for doc in X):
        return [keep(doc) for doc in _bag_of_words_documents(X, vocabulary)]
    if not all(isinstance(doc, (list, tuple)) for doc in X):
        return None
    # lists that all hold numbers and are all one length are numeric rows; ragged ones, documents of word ids
    if all(isinstance(token, numbers.Real) for doc in X for token in doc) and len({len(doc) for doc in X}) == 1 \
            and len(X[0]) > 0:  # (empty lists are empty documents)
        return None
    return [keep(doc) for doc in as_words(X)]


def _count_matrix_documents(X, vocabulary) -> list:
    """A sparse documents x words count matrix's documents as token lists, each in column order."""
    counts = scipy.sparse.csr_matrix(X)
    counts.sum_duplicates()
    bad = ~(np.isfinite(counts.data) & (counts.data >= 0) & (counts.data == np.round(counts.data)))
    if bad.any():
        row = int(np.searchsorted(counts.indptr, np.flatnonzero(bad)[0], side="right") - 1)
        _check_count(float(counts.data[bad][0]), f"row {row}, column {int(counts.indices[bad][0])}")
    name = _namer(vocabulary, counts.shape[1], f"a matrix of {counts.shape[1]} columns")
    names = np.array([name(j) for j in range(counts.shape[1])], dtype=object)
    repeats = counts.data.astype(np.int64)
    if repeats.sum() > MAX_TOKENS:
        at = int(np.argmax(repeats))
        row = int(np.searchsorted(counts.indptr, at, side="right") - 1)
        raise ValueError(f"X counts {int(repeats.sum()):,} tokens, more than a corpus may hold ({MAX_TOKENS:,}); "
                         f"its largest count is {int(repeats[at]):,} (row {row}, column "
                         f"{int(counts.indices[at])}): give counts of tokens")
    tokens = np.repeat(names[counts.indices], repeats)  # every document's, in column order
    rows = np.repeat(np.arange(counts.shape[0]), np.diff(counts.indptr))
    ends = np.cumsum(np.bincount(rows, weights=repeats, minlength=counts.shape[0]).astype(np.int64))
    return [tokens[end - length:end].tolist() for end, length in zip(ends, np.diff(ends, prepend=0))]


def _bag_of_words_documents(X, vocabulary) -> list:
    """gensim's bag-of-words documents (lists of (id, count)) as token lists."""
    for d, doc in enumerate(X):
        if not (len(doc) == 0 or _is_bag_of_words(doc)):
            raise ValueError(f"X[{d}] is not a bag of words, a list of (id, count) pairs like the others")
    ids = [int(i) for doc in X for i, _ in doc]
    if min(ids) < 0:
        raise ValueError(f"bag-of-words ids must be non-negative, got {min(ids)}")
    name = _namer(vocabulary, max(ids) + 1, "the bag-of-words ids")
    return [[token for i, c in doc for token in [name(int(i))] * _check_count(c, f"X[{d}] word id {i}")]
            for d, doc in enumerate(X)]


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


def read_integers(path, n: int, *, what: str, of: str, minimum: int | None = None, names: bool = False) -> np.ndarray:
    """One integer a line, exactly ``n`` of them (``what`` and ``of`` name them in errors); with
    ``names``, a file in which no line is an integer is read as names (strings), one a line (a file
    of both is refused, as ``group_labels`` refuses them mixed)."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"{what} file {path} does not exist")
    lines = [(i, line.strip()) for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
             if line.strip()]
    if len(lines) != n:
        raise ValueError(f"{what} file {path} has {len(lines)} {what} for {n} {of}")
    if names and not any(re.fullmatch(r"[+-]?\d+", line) for _, line in lines):
        return np.asarray([line for _, line in lines], dtype=str)
    values = []
    for i, line in lines:
        try:
            values.append(int(line))
        except ValueError:
            raise ValueError(f"{what} file {path}: line {i} is not an integer: {line[:40]!r}"
                             + (" (give every line a name or every one an integer)" if names else "")) from None
        if minimum is not None and values[-1] < minimum:
            raise ValueError(f"{what} file {path}: line {i} is {values[-1]}, below {minimum}")
    return np.asarray(values, dtype=np.int64)


def counts_to_corpus(counts, name: str, vocabulary=None) -> Corpus:
    """A documents x words count matrix as a corpus; column j is the token ``vocabulary[j]`` ("w<j>"
    without a vocabulary)."""
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
    word = _namer(vocabulary, counts.shape[1], f"{name}'s {counts.shape[1]} columns")
    names = [word(j) for j in range(counts.shape[1])]
    docs = [[names[j] for j in np.repeat(np.arange(counts.shape[1]), row.astype(np.int64))] for row in counts]
    return Corpus(name, docs)


def digits_bags() -> Corpus:
    from sklearn.datasets import load_digits

    raw = load_digits()
    bags = counts_to_corpus(raw.data, "digits-bags", [f"p{j:02d}" for j in range(raw.data.shape[1])])
    bags.groups = bags.labels = raw.target.astype(np.int64)
    return bags


def generated_topics(n_tokens: int = 100_000, *, n_groups: int = 10, n_topics: int = 50, vocab_size: int = 5000,
                     doc_length: int = 100, seed: int = 0) -> Corpus:
    """A grouped corpus drawn from an HDP-like topic model whose topics are known (``topics``):
    topics phi_k ~ Dir(0.05) over ``vocab_size`` words; global topic weights g ~ Dir(1); each
    group's weights D_t ~ Dir(10 g), so groups share topics in different proportions; each
    document's theta_d ~ Dir(D_t) (b = 1, ``CoupledDP``'s default) and 1 + Poisson(doc_length - 1)
    tokens, z ~ theta_d, w ~ phi_z. Documents are dealt to groups in turn; about ``n_tokens``
    tokens in all. Word j is the token "w<j>"; ``labels`` holds each document's most frequent topic."""
    if min(n_tokens, n_groups, n_topics, vocab_size, doc_length) < 1:
        raise ValueError("n_tokens, n_groups, n_topics, vocab_size and doc_length must be >= 1")
    rng = np.random.default_rng(seed)
    topics = rng.dirichlet(np.full(vocab_size, 0.05), n_topics)
    group_weights = rng.dirichlet(10 * rng.dirichlet(np.ones(n_topics)), n_groups)
    lengths = 1 + rng.poisson(doc_length - 1, max(1, round(n_tokens / doc_length)))
    groups = np.arange(len(lengths)) % n_groups
    names = np.asarray([f"w{j}" for j in range(vocab_size)], dtype=object)
    docs, main = [], np.empty(len(lengths), dtype=np.int64)
    for first in range(0, len(lengths), 10_000):  # documents in chunks: memory a chunk's, not the corpus's
        part = slice(first, first + 10_000)
        theta = rng.gamma(group_weights[groups[part]]).clip(min=np.finfo(float).tiny)
        doc = np.repeat(np.arange(len(theta)), lengths[part])
        z = _draw_rows(rng, theta, doc)
        words = _draw_rows(rng, topics, z)
        main[part] = np.bincount(doc * n_topics + z, minlength=len(theta) * n_topics).reshape(-1, n_topics).argmax(1)
        docs += [names[ids].tolist() for ids in np.split(words, np.cumsum(lengths[part])[:-1])]
    return Corpus(f"topics:{n_tokens}", docs, groups=groups.astype(np.int64), labels=main, topics=topics)


def _draw_rows(rng, probs, rows):
    """One draw from row rows[i] of ``probs`` (R, C) for each i, by one binary search: row r's
    cumulative sums shifted by r make one increasing sequence."""
    shifted = (np.cumsum(probs, 1) / probs.sum(1, keepdims=True) + np.arange(len(probs))[:, None]).ravel()
    flat = np.searchsorted(shifted, rows + rng.random(len(rows)), side="right")
    return (flat - rows * probs.shape[1]).clip(0, probs.shape[1] - 1)
