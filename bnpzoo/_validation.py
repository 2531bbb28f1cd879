"""Input and hyperparameter checks: every failure is a ValueError that names the problem."""

import numbers

import numpy as np
import torch


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


def check_params(params: dict, constraints: dict) -> None:
    """Raise ValueError naming the first argument outside its declared range."""
    for name, constraint in constraints.items():
        value = params[name]
        if not constraint.accepts(value):
            raise ValueError(f"{name} must be {constraint.describe()}, got {value!r}")


def check_array(X, *, name="X", dtype=torch.float32, device=None, n_features=None) -> torch.Tensor:
    """A finite, non-empty 2-D float tensor (rows = samples) on ``device``."""
    if isinstance(X, torch.Tensor):
        t = X.detach()
    else:
        try:
            arr = np.asarray(X)
            if arr.dtype.kind != "f":
                arr = arr.astype(np.float64)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{name} must be a numeric array: {err}") from None
        t = torch.from_numpy(arr.astype(arr.dtype.newbyteorder("="), copy=False))
    if t.ndim != 2:
        raise ValueError(f"{name} must be 2-D (samples x features), got shape {tuple(t.shape)}")
    if t.shape[0] == 0 or t.shape[1] == 0:
        raise ValueError(f"{name} is empty: shape {tuple(t.shape)}")
    if not t.is_floating_point():
        t = t.to(torch.float64)
    # a sum is finite exactly when no entry is NaN or inf, unless it overflows: one fast reduction,
    # and the entry-wise checks only when it fails
    if not torch.isfinite(t.sum()) and not torch.isfinite(t).all():
        raise ValueError(f"{name} contains {'NaN' if torch.isnan(t).any() else 'inf'}")
    if n_features is not None and t.shape[1] != n_features:
        raise ValueError(f"{name} has {t.shape[1]} features, the model was fitted with {n_features}")
    return t.to(device=device, dtype=dtype)
