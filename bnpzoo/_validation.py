"""Input and hyperparameter checks: every failure is a ValueError that names the problem."""

import math
import numbers
import os
import warnings

import numpy as np
import torch

from bnpzoo import mapped
from bnpzoo.inference import data_parallel


class Interval:
    """A number of ``kind`` (int or real) in a range; ``None`` allowed when ``optional``."""

    def __init__(self, kind, low=None, high=None, *, low_open=False, high_open=False, optional=False):
        self.kind, self.low, self.high = kind, low, high
        self.low_open, self.high_open, self.optional = low_open, high_open, optional

    def describe(self) -> str:
        lo = "-inf" if self.low is None else self.low
        hi = "inf" if self.high is None else self.high
        left = "(" if self.low_open or self.low is None else "["
        right = ")" if self.high_open or self.high is None else "]"
        text = f"{'an integer' if self.kind is int else 'a number'} in {left}{lo}, {hi}{right}"
        return text + (" or None" if self.optional else "")

    def accepts(self, value) -> bool:
        if value is None:
            return self.optional
        kind = numbers.Integral if self.kind is int else numbers.Real
        if isinstance(value, bool) or not isinstance(value, kind) or not np.isfinite(value):
            return False
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        return self.high is None or (value < self.high or (not self.high_open and value == self.high))


class OneOf:
    def __init__(self, *options):
        self.options = options

    def describe(self) -> str:
        return "one of " + ", ".join(repr(o) for o in self.options)

    def accepts(self, value) -> bool:
        return any(value is o or (type(value) is type(o) and value == o) for o in self.options)


class AnyOf:
    """A value that one of ``constraints`` accepts (a number or a named choice)."""

    def __init__(self, *constraints):
        self.constraints = constraints
        self.optional = any(getattr(c, "optional", False) for c in constraints)

    def describe(self) -> str:
        return " or ".join(c.describe() for c in self.constraints)

    def accepts(self, value) -> bool:
        return any(c.accepts(value) for c in self.constraints)

    @staticmethod
    def kind(text: str):
        """A command line's value: a number where it reads as one, else the word."""
        try:
            return float(text)
        except ValueError:
            return text


class Scale:
    """A positive finite number, or a non-empty 1-D array of them (one per feature), or None."""

    kind = float
    optional = True

    def describe(self) -> str:
        return "a positive number, one per feature, or None"

    def accepts(self, value) -> bool:
        if value is None:
            return True
        try:
            arr = np.asarray(value.detach().cpu() if isinstance(value, torch.Tensor) else value, dtype=float)
        except (TypeError, ValueError):
            return False
        return arr.ndim <= 1 and arr.size > 0 and bool(np.isfinite(arr).all() and (arr > 0).all()) and \
            not isinstance(value, bool)


class Satisfies:
    """A value that ``test`` accepts, ``description`` saying what that is (read from a command line
    as a string)."""

    kind = str

    def __init__(self, description: str, test, *, optional: bool):
        self.description, self.test, self.optional = description, test, optional

    def describe(self) -> str:
        return self.description

    def accepts(self, value) -> bool:
        return bool(self.test(value))


FOLDER = Satisfies("a folder's path or None", optional=True,
                   test=lambda value: value is None or (isinstance(value, (str, os.PathLike)) and str(value) != ""))
FUNCTION = Satisfies("a function or None", lambda value: value is None or callable(value), optional=True)
WORDS = Satisfies("a list of words", optional=False, test=lambda value: isinstance(value, (list, tuple, set, frozenset))
                  and all(isinstance(word, str) for word in value))


SEED = Interval(int, 0, 2**32 - 1, optional=True)  # random_state: any int numpy and Python's seeders take


def check_params(params: dict, constraints: dict) -> None:
    """Raise ValueError naming the first argument outside its declared range."""
    for name, constraint in constraints.items():
        value = params[name]
        if not constraint.accepts(value):
            raise ValueError(f"{name} must be {constraint.describe()}, got {value!r}")


# the largest |x| a fit in each dtype takes: squared distances sum D squares, which must stay finite
SAFE_MAGNITUDE = {torch.float32: 1e15, torch.float64: 1e150}


# the smallest largest-|x| a fit in each dtype takes: a cluster's precision, 1 / variance, must stay
# finite (float32's largest number is 3e38); rows scaled to 1e-30 fit in float32 as one cluster with
# every covariance exactly 0 (float64: 2 clusters, NMI 1.000)
SAFE_SMALLNESS = {torch.float32: 1e-15, torch.float64: 1e-140}


# how far (in its own spread) data may sit from zero for a fit in each dtype: distances expanded as
# |x|^2 - 2 x.m + |m|^2 lose (offset / spread)^2 x eps of the spread; blobs of 8 features with
# spread 9 fit to NMI 1.000 in float32 up to an offset of 1e3 (0.71 at 1e4), in float64 up to 1e8
SAFE_OFFSET = {torch.float32: 1e2, torch.float64: 1e7}


def offset_ratio(t: torch.Tensor, rows: int = 10_000) -> float:
    """max_d |mean_d| / rms spread over (at most ``rows``) evenly spaced rows, in float64; 0 when
    the rows do not vary."""
    sample = mapped.take(t, torch.arange(0, t.shape[0], max(1, t.shape[0] // rows))).to(torch.float64)
    spread = float(sample.var(0, correction=0).mean().sqrt())
    return float(sample.mean(0).abs().max()) / spread if spread > 0 else 0.0


def is_stream(X) -> bool:
    """Whether X is a stream of batches (a generator, an iterator, a DataLoader: an iterable that is not
    itself array-like) rather than one array; lists and tuples are arrays, as in scikit-learn, and a
    sparse matrix is one (refused by ``check_array``)."""
    return hasattr(X, "__iter__") and not isinstance(X, (np.ndarray, torch.Tensor, list, tuple, str, bytes)) \
        and not hasattr(X, "__array__") and not _is_sparse(X)


def _is_sparse(X) -> bool:
    """A scipy sparse matrix or array, or a torch sparse tensor."""
    return (hasattr(X, "tocsr") and hasattr(X, "nnz")) or (isinstance(X, torch.Tensor) and X.layout != torch.strided)


def batch_features(batch):
    """A stream's batch as rows: the batch, or the first entry of a (features, labels, ...) tuple, as
    a DataLoader over a TensorDataset yields them."""
    if isinstance(batch, (tuple, list)) and batch and isinstance(batch[0], (np.ndarray, torch.Tensor)) \
            and batch[0].ndim == 2:
        return batch[0]
    return batch


def _column(X, index: int) -> str:
    """A column by its index, and by its name where X has names (a pandas DataFrame)."""
    names = getattr(X, "columns", None)
    return f"column {index}" + (f" ({names[index]!r})" if names is not None and index < len(names) else "")


class NotNumericError(ValueError, TypeError):
    """Data that holds something other than numbers: a ValueError, as every bad input of bnpzoo's,
    and a TypeError, as scikit-learn's estimator checks expect of an object that is no number."""


def _as_float(arr: np.ndarray, name: str, X=None) -> np.ndarray:
    """An integer, boolean or object array as float64; a cell that is no number is named by its row
    and column (object arrays: pandas' mixed columns, lists with None or text)."""
    try:
        return arr.astype(np.float64)
    except (TypeError, ValueError) as err:
        if arr.ndim == 2:
            for (row, column), value in np.ndenumerate(arr):
                try:
                    float(value)
                except (TypeError, ValueError):
                    raise NotNumericError(f"{name} must be a numeric array: row {row}, {_column(X, column)} holds "
                                          f"{value!r}, which is no number ({err}); drop or encode that "
                                          "column") from None
        raise NotNumericError(f"{name} must be a numeric array: {err}") from None


def check_array(X, *, name="X", dtype=torch.float32, device=None, n_features=None, widen=False,
                group=None, owner="the model") -> torch.Tensor:
    """A finite, non-empty 2-D real tensor (rows = samples) on ``device``, whose entries a fit in
    ``dtype`` can square and sum (``SAFE_MAGNITUDE``); complex, date and duration input is refused.
    ``widen``: data that sits further from zero than ``SAFE_OFFSET`` of its spreads is returned in
    float64, with a warning, when float32 would lose it, and refused when float64 would; in a
    data-parallel fit over ``group`` (X one rank's rows) the ranks decide by the largest offset.
    The standard failures say what scikit-learn's ``check_array`` says (its checks match on it),
    followed by the fix; ``owner`` names the fitted estimator in the feature-count error."""
    t = _as_tensor(X, name)
    if t.ndim != 2:
        raise ValueError(f"{name} must be 2-D (samples x features), got shape {tuple(t.shape)}" + (
            ": Reshape your data either using array.reshape(-1, 1) if your data has a single feature or "
            "array.reshape(1, -1) if it contains a single sample" if t.ndim == 1 else ""))
    for axis, what in enumerate(("sample", "feature")):
        if t.shape[axis] == 0:
            raise ValueError(f"{name} is empty: Found array with 0 {what}(s) (shape={tuple(t.shape)}) while a "
                             "minimum of 1 is required.")
    if not t.is_floating_point():
        t = t.to(torch.float64)
    # the extremes are NaN or inf exactly when some entry is, and they bound what the fit will
    # square; found block by block (a mapped file's pages handed back after each), one host sync
    largest = float(torch.stack([torch.maximum(-low, high) for low, high in
                                 (torch.aminmax(t[rows]) for rows in mapped.passes(t, t.shape[1]))]).max())
    if not math.isfinite(largest):
        bad = (~torch.isfinite(t)).nonzero()
        row, column = (int(i) for i in bad[0])
        kind = "NaN" if torch.isnan(t[row, column]) else "inf"
        raise ValueError(f"{name} contains {kind}: row {row}, {_column(X, column)}"
                         + (f" and {len(bad) - 1} more entries" if len(bad) > 1 else "")
                         + "; drop or impute them first (the models take no missing values)")
    limit = SAFE_MAGNITUDE.get(dtype, float("inf"))
    if largest > limit:
        raise ValueError(f"{name} has values up to {largest:.3g}, beyond what a {str(dtype).split('.')[-1]} fit "
                         f"can square without overflow (about {limit:.0e}): rescale X (divide it by a constant)"
                         + (" or fit with dtype='float64'" if dtype == torch.float32 else ""))
    if n_features is not None and t.shape[1] != n_features:
        raise ValueError(f"{name} has {t.shape[1]} features, but {owner} is expecting {n_features} features as input "
                         "(the columns it was fitted on)")
    if widen:
        dtype = _widened(t, largest, name, dtype, group)
    out = t.to(device=device, dtype=dtype)
    if out.is_inference():  # made under torch.inference_mode(): a fit's autograd cannot use it as it is
        out = out.clone()
    if out is not t:  # a copy in memory: the file's pages are no longer needed
        mapped.release(t)
    return out


def _as_tensor(X, name: str) -> torch.Tensor:
    """X as a tensor (an array's memory shared, a mapped file's kept mapped), refusing sparse,
    complex, date and duration input and what is not numeric."""
    if _is_sparse(X):
        raise ValueError(f"{name} is sparse: bnpzoo's estimators take dense arrays (the clusters' means and "
                         f"spreads are dense): give {name}.toarray(), or {name}.to_dense() for a torch tensor")
    if isinstance(X, torch.Tensor):
        t = X.detach()
        if t.is_complex():
            raise ValueError(f"Complex data not supported: {name} is complex; give real numbers (the real and "
                             "imaginary parts as columns, if both matter)")
    else:
        try:
            arr = np.asarray(X)
        except (TypeError, ValueError) as err:
            raise NotNumericError(f"{name} must be a numeric array: {err}") from None
        if arr.dtype.kind in "cmM":
            raise ValueError(("Complex data not supported: " if arr.dtype.kind == "c" else "")
                             + f"{name} has dtype {arr.dtype}: give real numbers"
                             + (" (the real and imaginary parts as columns, if both matter)"
                                if arr.dtype.kind == "c" else " (convert dates or durations to numbers first)"))
        if arr.dtype.kind != "f":
            arr = _as_float(arr, name, X)
        native = arr.astype(arr.dtype.newbyteorder("="), copy=False)
        if any(stride < 0 for stride in native.strides):  # X[::-1]: torch takes no negative strides
            native = np.ascontiguousarray(native)
        with warnings.catch_warnings():  # a read-only file's memory map: bnpzoo never writes into X
            warnings.filterwarnings("ignore", "The given NumPy array is not writable")
            t = mapped.attach(torch.from_numpy(native), native)
    return t


def _widened(t, largest: float, name: str, dtype, group):
    """The precision a fit of ``t`` needs: float64, with a warning, where ``dtype`` would lose data
    whose largest magnitude is ``largest`` or that sits far from zero (over every rank of ``group``);
    refused where float64 would."""
    if 0 < largest < SAFE_SMALLNESS[torch.float64]:
        raise ValueError(f"{name} has values no larger than {largest:.3g}, too small for a fit's precisions (1 / "
                         "variance) even in float64: rescale X (multiply it by a constant)")
    if 0 < largest < SAFE_SMALLNESS.get(dtype, 0.0):
        warnings.warn(f"{name} has values no larger than {largest:.3g}, too small for a {str(dtype).split('.')[-1]} "
                      "fit's precisions (1 / variance): fitting in float64 (rescale X, multiply it by a constant, to "
                      "fit in float32)", UserWarning, stacklevel=4)
        dtype = torch.float64
    ratio = data_parallel.largest(offset_ratio(t), group)
    if ratio > SAFE_OFFSET[torch.float64]:
        raise ValueError(f"{name} sits {ratio:.1e} times its spread from zero, beyond what a fit in float64 "
                         f"resolves: centre it first (X - X.mean(0))")
    if ratio > SAFE_OFFSET.get(dtype, float("inf")):
        warnings.warn(f"{name} sits {ratio:.1e} times its spread from zero, where a {str(dtype).split('.')[-1]} "
                      "fit cannot tell its clusters apart: fitting in float64 (centre X, X - X.mean(0), to fit "
                      "in float32)", UserWarning, stacklevel=4)
        dtype = torch.float64
    return dtype
