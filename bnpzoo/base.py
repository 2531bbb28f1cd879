"""What bnpzoo's estimators share.

``Estimator``: parameters (``_parameter_constraints``, one place for allowed values, checked when
``fit`` starts), their checks, save/load of the tensors listed in ``_fitted_attributes`` and of
the learner's state that resumes a stream (``_resume_state``, with the RNG states of
``ops.get_rng_state``), and the work of a step that sets a fit's threads (``_step_work``,
``bnpzoo.threads``).

``MixtureEstimator`` adds prediction, scoring and ArviZ for mixtures of numeric rows: a subclass
implements ``fit``, ``_log_joint_table(x)`` (ln pi_k + ln f(x_n | theta_k), an N x K tensor), and
``_posterior_draws(num_draws, rng)`` and ``_draw_log_likelihood(x, draw)`` for ArviZ.
"""

import functools
import inspect
import numbers
import warnings
from pathlib import Path

import numpy as np
import torch

from bnpzoo._validation import check_array, check_params
from bnpzoo.mapped import passes
from bnpzoo.ops import softmax_

FORMAT_VERSION = 1
PREDICT_ROWS = 16384  # rows per block in predict_proba: the block's table stays in cache


class ConvergenceWarning(UserWarning):
    """A fit that stopped at ``max_iter`` before its convergence test passed, or a sampler whose
    chains have not mixed."""


def warn_if_unconverged(estimator, limit: int, reason: str | None = None, stacklevel: int = 5) -> None:
    """ConvergenceWarning, as scikit-learn's estimators give it, when ``estimator.converged_`` is
    False after ``fit``, which ran ``limit`` iterations (its ``max_iter`` or the learner's default):
    the learner's ``reason`` (a sampler's: its chains have not mixed), else that the convergence
    test had not passed; the default ``stacklevel`` points at the caller of a ``fit`` wrapped by
    ``fit_threads`` and ``keeps_caller_state``."""
    if not estimator.converged_:
        warnings.warn(reason or f"{type(estimator).__name__}(inference={estimator.inference!r}) stopped after {limit} "
                      f"iterations (max_iter) before its convergence test passed (tol={estimator.tol:g}): the fit "
                      f"may still move; raise max_iter to let it finish", ConvergenceWarning, stacklevel=stacklevel)


def as_numpy(value):
    """A fitted value as the caller sees it: tensors as numpy arrays (on the CPU: the same memory,
    no copy), through dicts; anything else as it is."""
    if isinstance(value, dict):
        return {k: as_numpy(v) for k, v in value.items()}
    return value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else value


class FittedTensor:
    """A fitted parameter that bnpzoo's own code keeps as a torch tensor on the fit's device, in
    the estimator's ``tensors_`` dict, and that a caller reads as a numpy array (scikit-learn's
    convention): ``est.means_`` is numpy, ``est.tensors_["means_"]`` the tensor. Assignments store
    into ``tensors_``; a dict of tensors reads as a dict of arrays."""

    def __init__(self, default=None, *, has_default=False):
        self.default, self.has_default = default, has_default

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        tensors = obj.__dict__.get("tensors_", {})
        if self.name in tensors:
            return as_numpy(tensors[self.name])
        if self.has_default:
            return self.default
        raise AttributeError(f"{type(obj).__name__} has no {self.name}: it is set by fit")

    def __set__(self, obj, value):
        obj.__dict__.setdefault("tensors_", {})[self.name] = value


def _to_cpu(value):
    """A fitted value as ``torch.load(weights_only=True)`` reads it: tensors on the CPU, numpy
    arrays as tagged tensors (``_from_saved`` turns them back), through dicts, lists and tuples
    (a learner's state: a fit on a GPU saves a file that loads anywhere)."""
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_cpu(v) for v in value)
    if isinstance(value, np.ndarray) and value.dtype == object:  # feature names
        return {"names": [str(v) for v in value]}
    if isinstance(value, np.ndarray):
        return {"ndarray": torch.from_numpy(np.ascontiguousarray(value))}
    return value.detach().cpu() if isinstance(value, torch.Tensor) else value


def _from_saved(value):
    if isinstance(value, dict) and set(value) == {"ndarray"}:
        return value["ndarray"].cpu().numpy()  # a load mapped elsewhere
    if isinstance(value, dict) and set(value) == {"names"}:
        return np.asarray(value["names"], dtype=object)
    if isinstance(value, dict):
        return {k: _from_saved(v) for k, v in value.items()}
    return value


class offered_if:
    """A method that exists only where ``reason(self)`` is None: elsewhere reading it raises an
    AttributeError with that reason (scikit-learn's ``available_if``, which tools read through
    ``hasattr``, with the reason as the message)."""

    def __init__(self, reason):
        self.reason = reason

    def __call__(self, method):
        self.method = method
        functools.update_wrapper(self, method)
        return self

    def __get__(self, obj, owner=None):
        if obj is None:
            return self.method
        reason = self.reason(obj)
        if reason is not None:
            raise AttributeError(reason)
        return self.method.__get__(obj, owner)


class Estimator:
    _parameter_constraints: dict = {}
    _fitted_attributes: tuple = ()
    _fitted_marker = "n_clusters_"  # the attribute every fit sets
    _fit_call = "fit(X)"

    def __sklearn_tags__(self):
        """scikit-learn's tags (its ``clone``, ``check_estimator``, ``GridSearchCV`` and ``Pipeline``
        read them): a clusterer that needs no target, of dense, finite, real input."""
        from sklearn.utils import InputTags, Tags, TargetTags  # scikit-learn loads on first use: a fast CLI start

        return Tags(estimator_type="clusterer", target_tags=TargetTags(required=False), input_tags=InputTags())

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, self._fitted_marker)

    # -- parameters ------------------------------------------------------------------------
    @classmethod
    def _param_names(cls):
        return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]

    def _store(self, arguments: dict) -> None:
        """``__init__``'s one job: keep each argument as it was given (``_store(locals())``)."""
        for name in self._param_names():
            setattr(self, name, arguments[name])

    def get_params(self, deep=True) -> dict:
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params):
        for name, value in params.items():
            if name not in self._param_names():
                raise ValueError(f"unknown parameter {name!r} for {type(self).__name__}")
            setattr(self, name, value)
        return self

    def __repr__(self):
        """Every parameter, a program by its module path (``bnpzoo.models.dp_gmm.model``), not its address."""
        shown = lambda v: f"{v.__module__}.{v.__qualname__}" if callable(v) and hasattr(v, "__qualname__") else repr(v)
        return f"{type(self).__name__}({', '.join(f'{k}={shown(v)}' for k, v in self.get_params().items())})"

    def _rows_per_step(self, n: int) -> int:
        """Rows a learner's step touches: all of them, or a minibatch (overridden)."""
        return n

    def _step_work(self, X) -> float:
        """rows x clusters x features of one step (``bnpzoo.threads.fit_threads``)."""
        try:  # before validation: X may be anything, ragged token lists included
            shape = tuple(X.shape) if hasattr(X, "shape") else (len(X),)
        except TypeError:
            shape = ()
        rows = self._rows_per_step(shape[0]) if shape else 0
        features = shape[1] if len(shape) > 1 else 1
        return rows * features * (getattr(self, "truncation", None) or 1)

    _renamed: dict = {}  # a parameter's old name: its new one, both accepted for one release

    def _validate_params(self):
        check_params(self.get_params(), self._parameter_constraints)
        for old, new in self._renamed.items():
            if getattr(self, old) is None:
                continue
            if getattr(self, new) is not None:
                raise ValueError(f"{type(self).__name__} got {old}= and {new}=: {old} is the old name of {new}; "
                                 f"give {new}")
            warnings.warn(f"{type(self).__name__}({old}=...) is now {new}=, as in every estimator; {old}= goes in the "
                          "next release", FutureWarning, stacklevel=4)

    def _param(self, name):
        """A parameter's value under its current name, the old name's where only that was given."""
        old = next((o for o, n in self._renamed.items() if n == name), None)
        value = getattr(self, name)
        return getattr(self, old) if value is None and old is not None else value

    def _check_finite(self, **values) -> None:
        """After a fit: a FloatingPointError that names what came out non-finite and the numeric
        settings changed from their defaults (a scale, a concentration or a step far from the
        data's overflows the densities), instead of NaN predictions and a bound of -inf."""
        bad = [name for name, value in values.items()
               if not bool(torch.isfinite(torch.as_tensor(value, dtype=torch.float64)).all())]
        if not bad:
            return
        defaults = {name: p.default for name, p in inspect.signature(type(self)).parameters.items()}
        changed = [f"{name}={value!r}" for name, value in self.get_params().items()
                   if isinstance(value, numbers.Real) and not isinstance(value, bool) and value != defaults.get(name)]
        raise FloatingPointError(
            f"the {type(self).__name__} fit ({getattr(self, 'inference', '')}) ended with non-finite "
            f"{' and '.join(bad)}: a setting far from the data's scale overflowed the densities"
            + (f"; settings changed from their defaults: {', '.join(changed)}" if changed else
               "; rescale X (standardise its columns)"))

    def _forget_fit(self, *private) -> None:
        """A new ``fit`` starts from nothing an earlier fit left (its fitted attributes and the
        ``private`` state named), as scikit-learn's ``fit`` does."""
        for name in (*self._fitted_attributes, *private, "tensors_"):
            self.__dict__.pop(name, None)

    def _fitted(self, name):
        """A fitted value as bnpzoo's code uses it: the tensor behind a ``FittedTensor``."""
        tensors = self.__dict__.get("tensors_", {})
        return tensors[name] if name in tensors else getattr(self, name)

    def _check_fitted(self):
        """scikit-learn's NotFittedError (a ValueError and an AttributeError) before a fit."""
        if not self.__sklearn_is_fitted__():
            from sklearn.exceptions import NotFittedError

            raise NotFittedError(f"this {type(self).__name__} is not fitted yet: call {self._fit_call} first")

    # -- data ------------------------------------------------------------------------------
    @property
    def _dtype(self):
        return torch.float64 if self.dtype == "float64" else torch.float32

    def _device_for(self, X):
        if self.device is None:
            return X.device if isinstance(X, torch.Tensor) else torch.device("cpu")
        try:
            device = torch.device(self.device)
        except (RuntimeError, TypeError):
            raise ValueError(f"device must name a torch device such as 'cpu' or 'cuda', got {self.device!r}") from None
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {self.device!r} was asked for but CUDA is not available here")
        count = torch.cuda.device_count() if device.type == "cuda" else 0
        if device.type == "cuda" and (device.index or 0) >= count:
            raise ValueError(f"device {self.device!r} was asked for but this machine has {count} CUDA "
                             f"device(s), cuda:0 to cuda:{count - 1}")
        return device

    def _rows(self, X, *, fitting: bool, **checks) -> torch.Tensor:
        """X as the model reads it: its column names kept (``fitting``) or compared
        (``_feature_names``), checked (``check_array(**checks)``, errors naming this estimator) and
        encoded (``_encode``)."""
        self._feature_names(X, fitting=fitting)
        return self._encode(check_array(X, owner=type(self).__name__, **checks))

    def _encode(self, x: torch.Tensor) -> torch.Tensor:
        """The checked input as the model reads it, in fit and prediction alike (DPBMM's threshold)."""
        return x

    def _feature_names(self, X, *, fitting: bool) -> None:
        """A pandas DataFrame's column names (when all are strings): kept by a fit as
        ``feature_names_in_``, and checked against later input as scikit-learn does (other names
        are an error; none, where the fit had some, a warning)."""
        columns = getattr(X, "columns", None)
        names = (np.asarray(columns, dtype=object) if columns is not None and len(columns)
                 and all(isinstance(c, str) for c in columns) else None)
        if fitting:
            self.__dict__.pop("feature_names_in_", None)
            if names is not None:
                self.feature_names_in_ = names
            return
        fitted = getattr(self, "feature_names_in_", None)
        if fitted is None:
            return
        if names is None:
            warnings.warn(f"X does not have valid feature names, but {type(self).__name__} was fitted with feature "
                          f"names ({', '.join(fitted[:5])}{', ...' if len(fitted) > 5 else ''})", UserWarning,
                          stacklevel=3)
        elif not np.array_equal(names, fitted):
            raise ValueError(f"The feature names should match those that were passed during fit: X has columns "
                             f"{list(names)}, {type(self).__name__} was fitted on {list(fitted)}")

    # -- persistence -----------------------------------------------------------------------
    _unsaved_params: tuple = ()  # parameters that are code (a Pyro program): ``load`` takes them again where set
    _optional_code: tuple = ()  # of those, the ones whose default (None) is a shipped program

    def save(self, path) -> None:
        """Write parameters, fitted state and the learner's state where it has one (``load`` restores
        predictions exactly, and a stream's ``partial_fit`` continues as if never interrupted)."""
        self._check_fitted()
        folder = Path(path).parent
        if not folder.is_dir():
            raise FileNotFoundError(f"cannot save to {path}: the folder {folder} does not exist")
        if Path(path).is_dir():
            raise IsADirectoryError(f"cannot save to {path}: it is a folder; give a file's path, such as "
                                    f"{Path(path) / 'model.pt'}")
        names = (*self._fitted_attributes, *(["feature_names_in_"] if hasattr(self, "feature_names_in_") else []))
        state = {name: _to_cpu(self._fitted(name)) for name in names}
        params = {k: v for k, v in self.get_params().items() if k not in self._unsaved_params}
        code = [name for name in self._unsaved_params if getattr(self, name) is not None]
        torch.save({"format": FORMAT_VERSION, "class": type(self).__name__, "params": params, "state": state,
                    "resume": _to_cpu(self._resume_state()), "code": code}, path)

    def _resume_state(self):
        """What ``partial_fit`` needs to continue after ``load`` (tensors, numbers, strings), or None."""
        return None

    def _resume(self, state) -> None:
        """Take ``_resume_state()``'s value from a loaded file."""
        raise ValueError(f"this file holds a learner's state that {type(self).__name__} cannot resume")

    @classmethod
    def load(cls, path, *, map_location=None, **code):
        """Restore a saved estimator; parameters that are code (``_unsaved_params``), where the saved
        one had them set, are given again."""
        try:
            blob = torch.load(path, map_location=map_location, weights_only=True)
        except FileNotFoundError:
            raise
        except Exception as err:  # empty, truncated, not torch's format, or objects we never write
            raise ValueError(f"{path} is not a saved bnpzoo estimator ({type(err).__name__} while reading it)") \
                from None
        if not isinstance(blob, dict) or "class" not in blob or "format" not in blob:
            raise ValueError(f"{path} is not a saved bnpzoo estimator (a torch file without bnpzoo's fields)")
        if blob["class"] != cls.__name__:
            raise ValueError(f"{path} holds a {blob['class']}, not a {cls.__name__}")
        if blob["format"] != FORMAT_VERSION:
            raise ValueError(f"{path} was saved in format {blob['format']}; this bnpzoo reads format {FORMAT_VERSION}")
        # files saved before "code" was written hold it unset exactly where it is optional
        saved_code = blob.get("code", [name for name in cls._unsaved_params if name not in cls._optional_code])
        missing = [name for name in saved_code if name not in code]
        if missing:
            needed = ", ".join(f"{name}=" for name in missing)
            raise ValueError(f"{cls.__name__}.load needs {needed} again: code is not saved")
        est = cls(**blob["params"], **code)
        for name, value in blob["state"].items():
            setattr(est, name, _from_saved(value))
        if blob.get("resume") is not None:
            est._resume(blob["resume"])
        return est


class MixtureEstimator(Estimator):
    def _input(self, X) -> torch.Tensor:
        self._check_fitted()
        means = self._fitted("means_")
        return self._rows(X, fitting=False, dtype=means.dtype, device=means.device, n_features=self.n_features_in_)

    # -- prediction ------------------------------------------------------------------------
    def _logits(self, x, out=None):
        """The log joint table up to a constant per row (enough for softmax and argmax), written
        into ``out`` when given; a subclass may override it with a cheaper form."""
        table = self._log_joint_table(x)
        return table if out is None else out.copy_(table)

    def predict_proba(self, X) -> np.ndarray:
        """Responsibilities p(z_n = k | x_n), (N, ``n_clusters_``), computed block by block in place
        (each block's table stays in cache; no N x K temporaries besides the result)."""
        x = self._input(X)
        out = torch.empty(x.shape[0], self.n_clusters_, dtype=x.dtype, device=x.device)
        for rows in passes(x, self.n_clusters_, PREDICT_ROWS):
            softmax_(self._logits(x[rows], out=out[rows]))
        return out.cpu().numpy()

    def _per_row(self, X, reduce, dtype=None) -> np.ndarray:
        """``reduce(block of rows)`` (one value per row) over X, block by block: no N x K table."""
        x = self._input(X)
        out = torch.empty(x.shape[0], dtype=dtype or x.dtype, device=x.device)
        for rows in passes(x, self.n_clusters_, PREDICT_ROWS):
            out[rows] = reduce(x[rows])
        return out.cpu().numpy()

    def predict(self, X) -> np.ndarray:
        """MAP cluster of each sample ([DPM-SGA] eq. (15))."""
        return self._per_row(X, lambda x: self._logits(x).argmax(1), torch.long)

    def fit_predict(self, X, y=None) -> np.ndarray:
        """Fit on X and return its rows' clusters (``labels_``)."""
        return self.fit(X).labels_

    def score_samples(self, X) -> np.ndarray:
        """ln p(x_n) = ln sum_k pi_k f(x_n | theta_k) under the fitted point estimates."""
        return self._per_row(X, lambda x: torch.logsumexp(self._log_joint_table(x), 1))

    def score(self, X, y=None) -> float:
        """Mean per-sample log predictive density."""
        return float(self.score_samples(X).mean())

    # -- diagnostics -----------------------------------------------------------------------
    _draw_dims = {"v": ["stick"], "mu": ["cluster", "feature"], "weights": ["cluster"]}

    def to_arviz(self, X, *, num_draws: int = 200, random_state: int | None = 0):
        """ArviZ InferenceData: ``num_draws`` draws from the posterior factors (the program's sites
        ``v`` and ``mu``, and the ``weights`` they give), ln p(x_n | draw) with the assignment summed
        out for every row of X (``log_likelihood``: ``arviz.loo`` and ``arviz.waic`` work on it), X
        itself, and the bound at each evaluation of the fit (``sample_stats``). Every draw's cluster
        k comes from the factor of fitted cluster k, so labels do not switch between draws and
        per-cluster summaries are meaningful."""
        from bnpzoo.diagnostics import check_num_draws, inference_data

        x = self._input(X)
        draws = self._posterior_draws(check_num_draws(num_draws), np.random.default_rng(random_state))
        return inference_data(draws, lambda draw: self._draw_log_likelihood(x, draw), {"x": x.cpu().numpy()},
                              dims=self._draw_dims, bound=getattr(self, "elbo_trace_", None))
