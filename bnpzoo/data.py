"""Data sets: the embedded ones by name, and files (.csv / .npy, rows = samples) by path.

Embedded::

    digits                  scikit-learn's 1,797 8x8 handwritten digits, pixels scaled to [0, 1]
    blobs[:n=..,d=..,k=..,seed=..,spread=..,noise=gaussian|laplace]
                            k clusters in d dimensions, generated here: centres ~ N(0, spread^2 I),
                            independent unit-variance Gaussian (or Laplace) noise per feature
    digits-bags             a corpus: see bnpzoo.corpus (also .txt files, and count matrices
                            given with groups)
    digits-proportions[:noise=20]
                            each digit's 64 pixel intensities as proportions (ops.normalise_histograms,
                            floor 0.05), in 5 groups of consecutive rows; noise=m appends m irrelevant
                            parts drawn from one common Dirichlet
    hdp-gd[:n=..,seed=..]   grouped proportions drawn from models.hdp_gd (hdp_gd_sample)

Labels come with the embedded sets; for files, from ``labels`` (one integer a line). The grouped
proportion sets carry ``groups`` too; for files, ``groups`` gives them.
"""

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bnpzoo.corpus import Corpus, counts_to_corpus, digits_bags, generated_topics, read_corpus, read_integers

BLOBS_DEFAULTS = {"n": 2000, "d": 2, "k": 6, "seed": 0, "spread": 10.0, "noise": "gaussian"}
NOISE = {"gaussian": lambda rng, size: rng.normal(size=size),
         "laplace": lambda rng, size: rng.laplace(scale=2**-0.5, size=size)}  # unit variance


@dataclass
class Dataset:
    name: str
    X: np.ndarray
    labels: np.ndarray | None = None
    groups: np.ndarray | None = None


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


def digits_proportions(noise: int = 0, n_groups: int = 5, floor: float = 0.05, seed: int = 0) -> Dataset:
    """digits as proportion vectors in ``n_groups`` groups of consecutive rows (scikit-learn's
    digits come in writer order, so the groups differ in handwriting). With ``noise`` = m > 0 the
    64 pixel parts take half the mass and m irrelevant parts the other half, drawn for every row
    from one Dirichlet(1, ..., 1) of m + 1 parts (the last joins the remainder)."""
    import torch

    from bnpzoo.ops import normalise_histograms

    base = digits()
    y = normalise_histograms(torch.from_numpy(base.X.astype(np.float64)), floor).numpy()[:, :-1]
    if noise:
        extra = np.random.default_rng(seed).dirichlet(np.ones(int(noise) + 1), size=y.shape[0])[:, :-1]
        y = np.concatenate([0.5 * y, 0.5 * extra], 1)
    groups = np.arange(y.shape[0]) * n_groups // y.shape[0]
    return Dataset("digits-proportions" + (f":noise={noise}" if noise else ""), y, base.labels, groups)


def hdp_gd_sample(n: int = 2000, seed: int = 0, *, relevant: int = 16, irrelevant: int = 8,
                  group_atoms=((0, 1, 2, 3), (0, 1, 4), (0, 2, 5, 6), (1, 3, 5, 6)), prior=(2.0, 0.1)) -> Dataset:
    """Proportions drawn from ``models.hdp_gd``: one group per entry of ``group_atoms`` (the global
    atoms it uses, shared unevenly), equal weights within a group, features 1..``relevant``
    relevant (saliency 1) and the rest irrelevant (saliency 0); the Beta parameters from the Gamma
    ``prior`` (shape, rate). Labels are the global atoms; X the compositions (float64): the D
    proportions and, as a last column, the rest 1 - sum Y, which is often too small to recover
    from the sum."""
    import pyro
    import torch

    from bnpzoo.models.hdp_gd import model
    from bnpzoo.ops import inverse_geometric_transform

    n_groups, t = len(group_atoms), max(len(a) for a in group_atoms)
    atoms = 1 + max(max(a) for a in group_atoms)
    w = torch.tensor([list(a) + [a[0]] * (t - len(a)) for a in group_atoms])
    # equal weights over each group's own atoms: pi'_t = 1 / (size - t), then nothing
    pi = torch.tensor([[1.0 / (len(a) - s) if s < len(a) - 1 else 1.0 for s in range(t - 1)] for a in group_atoms])
    saliency = torch.cat([torch.ones(relevant), torch.zeros(irrelevant)])
    groups = torch.arange(n) * n_groups // n
    pyro.set_rng_seed(seed)
    one_hot = torch.nn.functional.one_hot(w, atoms).float()
    conditioned = pyro.poutine.condition(model, data={"w": one_hot, "pi": pi.clamp(max=1 - 1e-7), "saliency": saliency})
    trace = pyro.poutine.trace(conditioned).get_trace(
        None, groups, n_groups=n_groups, truncation=atoms, group_truncation=t, parameter_prior=prior,
        dim=relevant + irrelevant)
    x = trace.nodes["x"]["value"].double().clamp(1e-12, 1 - 1e-12)
    labels = w[groups, trace.nodes["z"]["value"].squeeze(-1)]
    y, rest = inverse_geometric_transform(x)
    return Dataset(f"hdp-gd:n={n},seed={seed}", torch.cat([y, rest[:, None]], 1).numpy(), labels.numpy(),
                   groups.numpy())


def _parse_options(spec: str, defaults: dict, what: str) -> dict:
    """``name:key=value,...`` into the keyword arguments ``defaults`` lists, typed like them."""
    options = dict(defaults)
    if ":" in spec:
        for item in spec.split(":", 1)[1].split(","):
            key, _, value = item.partition("=")
            if key not in defaults or not value:
                raise ValueError(f"{what} option {item!r} is not one of {', '.join(k + '=...' for k in defaults)}")
            try:
                options[key] = type(defaults[key])(value)
            except ValueError:
                raise ValueError(f"{what} option {key} must be a number, got {value!r}") from None
    return options


def read_labels(path, n_rows: int) -> np.ndarray:
    """One integer a line, as many lines as the data has rows."""
    return read_integers(path, n_rows, what="labels", of="rows")


def load_file(path) -> np.ndarray:
    """The rows of a .csv or .npy file as a 2-D float array (a .npy of floats mapped, not read)."""
    return load_table(path)[0]


def load_table(path) -> tuple[np.ndarray, list[str] | None]:
    """``load_file``'s array, and a CSV header's column names (None: no header, or a .npy file)."""
    path, names = Path(path), None
    if not path.exists():
        raise ValueError(f"data file {path} does not exist")
    if path.suffix == ".npy":
        try:  # read in place: a fit streams a large file instead of loading it (``bnpzoo.mapped``)
            X = np.load(path, mmap_mode="r", allow_pickle=False)
        except ValueError:  # arrays that cannot be mapped (objects), refused by the plain load
            try:
                X = np.load(path, allow_pickle=False)
            except (ValueError, OSError, EOFError) as err:
                raise ValueError(f"data file {path} is not a numeric .npy array ({err})") from None
        if X.dtype.kind == "f" and X.ndim in (1, 2):
            return (X if X.ndim == 2 else X[:, None]), None
    elif path.suffix == ".csv":
        X, names = _read_csv(path)
    else:
        raise ValueError(f"data file {path}: expected .csv or .npy, got {path.suffix or 'no suffix'!r}")
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[:, None]
    return X, names


def _number(field: str) -> float | None:
    try:
        return float(field)
    except ValueError:
        return None


def _read_csv(path: Path) -> tuple[np.ndarray, list[str] | None]:
    """The numbers of a CSV file and its header's column names (None without a header): numbers
    separated by commas, in UTF-8 (a byte-order mark is skipped). The first line is a header when
    none of its fields is a number and one is not empty (a data row with an empty field is a
    missing value, an error, never a header). pandas' ``to_csv`` index column (an
    empty first header field over the row numbers 0, 1, ...) is dropped, not taken as a feature.
    Every error names the file, the line and, where there is a header, the column."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as err:
        byte = err.object[err.start:err.start + 1]
        raise ValueError(f"data file {path} is not UTF-8 text (byte {err.start}: {byte!r}): save it as UTF-8 CSV") \
            from None
    lines = [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise ValueError(f"data file {path} is empty")
    first = [field.strip().strip('"') for field in lines[0][1].split(",")]
    header = None
    if all(_number(field) is None for field in first) and any(first):
        header, lines = first, lines[1:]
    rows = []
    for number, line in lines:
        fields = [field.strip() for field in line.split(",")]
        row = [_number(field) for field in fields]
        bad = [c for c, value in enumerate(row) if value is None or not math.isfinite(value)]
        if bad:
            column = bad[0]
            field = fields[column]
            name = f" ({header[column]!r})" if header and column < len(header) and header[column] else ""
            problem = ("is empty (a missing value: fill or drop it)" if not field else
                       f"is not a number: {field[:30]!r}" if row[column] is None else
                       f"is {field[:30]!r}, not a finite number (a missing value: fill or drop it)")
            raise ValueError(f"data file {path}: line {number}, column {column + 1}{name} {problem}")
        if rows and len(row) != len(rows[0]):
            raise ValueError(f"data file {path}: line {number} has {len(row)} columns where the rows above have "
                             f"{len(rows[0])}")
        rows.append(row)
    if not rows:
        raise ValueError(f"data file {path} has no data rows")
    X = np.array(rows)
    if header is not None and header[0] in ("", "Unnamed: 0") and np.array_equal(X[:, 0], np.arange(len(X))):
        X, header = X[:, 1:], header[1:]  # pandas' index
    return X, header


def load(spec: str, labels=None, groups=None, *, as_corpus: bool | None = None) -> Dataset | Corpus:
    """An embedded data set by name (``digits``, ``blobs[:...]``, ...) or a .csv / .npy path; or a
    corpus (``bnpzoo.corpus``): ``digits-bags``, a .txt path, or a .csv / .npy count matrix given
    with ``groups``.

    Parameters
    ----------
    spec : a name (``docs/guide.md``, "Data the command line reads") or a file path.
    labels, groups : paths of files with one integer a line (a row's label, a row's or document's
        group), or None.
    as_corpus : whether a .csv / .npy file given with groups is a documents x words count matrix
        (None: yes) or rows in groups.

    Returns
    -------
    ``Dataset`` (``X``, ``labels``, ``groups``, ``name``) or ``Corpus`` (documents, vocabulary,
    groups).
    """
    counts = groups is not None and spec.endswith((".csv", ".npy")) and as_corpus is not False
    if spec in ("digits-bags", "topics") or spec.startswith("topics:") or spec.endswith(".txt") or counts:
        corpus = _load_corpus(spec)
        n = len(corpus.docs)
        if groups is not None:
            corpus.groups = read_integers(groups, n, what="groups", of="documents", minimum=0, names=True)
        if labels is not None:
            corpus.labels = read_integers(labels, n, what="labels", of="documents")
        return corpus
    if spec == "digits":
        data = digits()
    elif spec == "blobs" or spec.startswith("blobs:"):
        data = blobs(**_parse_options(spec, BLOBS_DEFAULTS, "blobs"))
    elif spec == "digits-proportions" or spec.startswith("digits-proportions:"):
        data = digits_proportions(**_parse_options(spec, {"noise": 0, "seed": 0}, "digits-proportions"))
    elif spec == "hdp-gd" or spec.startswith("hdp-gd:"):
        data = hdp_gd_sample(**_parse_options(spec, {"n": 2000, "seed": 0}, "hdp-gd"))
    elif spec.endswith((".csv", ".npy")):
        data = Dataset(Path(spec).name, load_file(spec))
    else:
        raise ValueError(f"unknown data {spec!r}: use digits, blobs[:n=..,d=..,k=..,seed=..], digits-bags, "
                         "topics[:n=..,groups=..,topics=..,vocab=..,length=..,seed=..], "
                         "digits-proportions[:noise=..], hdp-gd[:n=..,seed=..], or a .csv/.npy/.txt path")
    if labels is not None:
        data.labels = read_labels(labels, data.X.shape[0])
    if groups is not None:
        data.groups = read_integers(groups, data.X.shape[0], what="groups", of="rows", minimum=0, names=True)
    return data


TOPICS_DEFAULTS = {"n": 100_000, "groups": 10, "topics": 50, "vocab": 5000, "length": 100, "seed": 0}


def _load_corpus(spec: str) -> Corpus:
    if spec == "digits-bags":
        return digits_bags()
    if spec == "topics" or spec.startswith("topics:"):
        o = _parse_options(spec, TOPICS_DEFAULTS, "topics")
        return generated_topics(o["n"], n_groups=o["groups"], n_topics=o["topics"], vocab_size=o["vocab"],
                                doc_length=o["length"], seed=o["seed"])
    if spec.endswith(".txt"):
        return read_corpus(spec)
    counts, words = load_table(spec)
    vocabulary = words if words and all(words) and len(set(words)) == len(words) else None  # a header of words
    return counts_to_corpus(counts, Path(spec).name, vocabulary)
