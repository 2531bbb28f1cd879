"""The fuzz of bad and unusual inputs, as a table: every estimator, every kind of input, and the
command line. Each case must end in one of two ways: a clean error (ValueError, TypeError or
FloatingPointError, raised by bnpzoo's own code, with a one-line message), or finite outputs
(predictions, scores and the bound). Never NaN, -inf, or a traceback from inside torch or Pyro."""

import math
import traceback
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import sparse

import bnpzoo.guides
import bnpzoo.inference
import bnpzoo.models
from bnpzoo import DPGMM, HDPGD, PYPGGM, CoupledDP
from bnpzoo.cli import main
from conftest import ESTIMATOR_CASES

# HDPGD's other learners read their input exactly as "hdpgd vi" does (``HDPGD._observations``)
ESTIMATORS = {name: make for name, make in ESTIMATOR_CASES.items() if name not in ("hdpgd online-vi", "hdpgd svi")}

# where our packages were imported from (the checkout, or an installed copy)
OURS = tuple(str(Path(package.__file__).parent) for package in (bnpzoo, bnpzoo.models, bnpzoo.guides, bnpzoo.inference))
RNG = np.random.default_rng(0)
BASE = RNG.normal(size=(120, 3))


def proportions(x):
    """Rows mapped into the simplex's interior (D parts summing below 1), for HDPGD."""
    with np.errstate(all="ignore"):
        e = np.exp(np.asarray(x, dtype=np.float64))
        return e / (e.sum(1, keepdims=True) + 1.0)


DATA = {
    "normal": BASE, "45 rows": BASE[:45], "3 rows": BASE[:3], "2 rows": BASE[:2], "1 row": BASE[:1],
    "identical rows": np.ones((50, 3)), "one column": BASE[:, :1], "column x 1e12": BASE * [1e12, 1, 1],
    "offset 1e8": BASE + 1e8, "1e20": BASE * 1e20, "1e300": BASE * 1e300, "tiny 1e-30": BASE * 1e-30,
    "nan": np.where(np.arange(BASE.size).reshape(BASE.shape) == 7, np.nan, BASE),
    "inf": np.where(np.arange(BASE.size).reshape(BASE.shape) == 7, np.inf, BASE),
    "complex": BASE + 1j, "datetime": np.zeros((20, 3), dtype="datetime64[s]"), "strings": np.array([["a", "b"]]),
    "1-D": BASE[:, 0], "3-D": BASE[None], "no rows": BASE[:0], "no columns": BASE[:, :0], "list": BASE.tolist(),
    "ragged": [[1.0, 2.0], [3.0]], "integers": RNG.integers(0, 5, (60, 3)), "booleans": RNG.random((60, 3)) > 0.5,
    "float64 tensor": torch.as_tensor(BASE), "fortran slice": np.asfortranarray(BASE)[::2],
    "wide 20 x 300": RNG.normal(size=(20, 300)), "object with None": np.array([[1.0, None], [2.0, 3.0]], dtype=object),
    "None": None, "string": "data.csv",
    # scientific Python's other containers (issue 38's second fuzz)
    "tuples": [tuple(row) for row in BASE.tolist()], "reversed rows": BASE[::-1], "reversed columns": BASE[:, ::-1],
    "DataFrame": pd.DataFrame(BASE, columns=["a", "b", "c"]),
    "DataFrame with text": pd.DataFrame({"a": BASE[:, 0], "b": ["x"] * len(BASE)}),
    "scipy sparse": sparse.csr_matrix(BASE),
}
def _groups(est, data):
    try:
        n = len(data)
    except TypeError:
        return ()
    return (np.arange(n) % 2,) if isinstance(est, (HDPGD, CoupledDP)) else ()


def _outputs(est, data, groups):
    """The fit's numbers that must be finite."""
    if isinstance(est, CoupledDP):
        return [est.group_weights_, est.samples_["log_joint"]]
    out = [est.predict_proba(data, *groups), est.elbo_trace_]
    out.append(est.score(data, *groups))
    return out


def ends_well(run):
    """Run ``run()``: either finite outputs, or a clean error from our own code."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outputs = run()
    except (ValueError, TypeError, FloatingPointError) as err:
        frames = traceback.extract_tb(err.__traceback__)
        origin = frames[-1].filename
        assert origin.startswith(OURS) or origin == __file__, f"{type(err).__name__} from {origin}: {err}"
        assert str(err) and "\n" not in str(err).strip(), f"not one line: {err!r}"
        return "error"
    for value in outputs:
        array = np.asarray(torch.as_tensor(value, dtype=torch.float64) if not isinstance(value, float) else value)
        assert np.isfinite(array).all(), f"non-finite output: {array}"
    return "finite"


@pytest.mark.parametrize("data_name", list(DATA))
@pytest.mark.parametrize("estimator", list(ESTIMATORS))
def test_every_estimator_on_every_kind_of_input(estimator, data_name):
    est, raw = ESTIMATORS[estimator](), DATA[data_name]
    numeric = isinstance(raw, np.ndarray) and raw.dtype.kind in "fiub" and raw.ndim == 2 and raw.size
    data = proportions(raw) if estimator.startswith("hdpgd") and numeric else raw  # HDPGD fits proportions
    groups = _groups(est, data)
    ends_well(lambda: _outputs(est.fit(data, *groups), data, groups))


SETTINGS = [
    ("truncation", [0, 1, 2, 10**6, -3, 2.5, None, "10", True]),
    ("max_iter", [0, 1, -1, 1.5]),
    ("alpha", [0.0, -1.0, 1e-300, 1e300, math.nan, math.inf]),
    ("random_state", [-1, 2**32, 2**32 - 1, np.int64(5), 1.5, "a"]),
    ("tol", [-1.0, 0.0, math.nan]),
    ("dtype", ["float16", "float64", "int32", None]),
    ("device", ["cuda:7", "tpu", 3]),
    ("batch_size", [0, 1, -5, 10**9]),
    ("learning_rate", [0.0, -1.0, 1e10, 1e-30, math.nan]),
]


@pytest.mark.parametrize("name, value", [(n, v) for n, values in SETTINGS for v in values],
                         ids=[f"{n}={v!r}" for n, values in SETTINGS for v in values])
@pytest.mark.parametrize("make", [lambda **k: DPGMM(inference="sga", **k), lambda **k: PYPGGM(**k)],
                         ids=["dpgmm-sga", "pypggm-svmm"])
def test_every_setting_value(make, name, value):
    params = dict(truncation=8, max_iter=30, random_state=0)
    params[name] = value

    def run():
        est = make(**params).fit(BASE)
        return _outputs(est, BASE, ())

    ends_well(run)


CLI = [
    ["fit", "dp-gmm", "--data", "blobs:n=200,d=2,k=3"],
    ["fit", "dp-gmm", "--data", "blobs:n=0"], ["fit", "dp-gmm", "--data", "blobs:n=-4"],
    ["fit", "dp-gmm", "--data", "blobs:n=10**9"], ["fit", "dp-gmm", "--data", "blobs:k=0"],
    ["fit", "dp-gmm", "--data", "blobs:d=x"], ["fit", "dp-gmm", "--data", "blobs:bogus=1"],
    ["fit", "dp-gmm", "--data", "digits", "--seed", "-1"],
    ["fit", "dp-gmm", "--data", "digits", "--seed", "99999999999"],
    ["fit", "dp-gmm", "--data", "digits", "--truncation", "1"], ["fit", "dp-gmm", "--data", "nowhere.npy"],
    ["fit", "dp-gmm", "--data", "digits", "--iters", "0"], ["fit", "dp-gmm", "--data", "digits", "--alpha", "nan"],
    ["fit", "dp-gmm", "--data", "digits", "--scale", "1e-30"], ["fit", "dp-gmm", "--data", "digits", "--scale", "-1"],
    ["fit", "dp-gmm", "--data", "digits", "--inference", "online-vi"],
    ["fit", "pyp-ggm", "--data", "digits", "--rho", "0.5"],
    ["fit", "pyp-ggm", "--data", "blobs:n=300", "--discount", "1"], ["fit", "hdp-gd", "--data", "digits"],
    ["fit", "hdp-gd", "--data", "blobs:n=100"], ["fit", "coupled-dp", "--data", "blobs:n=100"],
    ["fit", "coupled-dp", "--data", "digits-bags", "--iters", "2", "--truncation", "3", "--documents"],
    ["fit", "coupled-dp", "--data", "digits-bags", "--iters", "2", "--truncation", "3", "--label-step", "blocked",
     "--checkpoint", "run"],
    ["fit", "coupled-dp", "--data", "digits-bags", "--checkpoint", "/etc/hostname"],
    ["fit", "coupled-dp", "--data", "digits-bags", "--checkpoint", "/proc/none/run"],
    ["fit", "coupled-dp", "--data", "digits-bags", "--checkpoint-every", "0"],
    ["fit", "dp-gmm", "--data", "digits", "--checkpoint", "run"],
    ["fit", "dp-gmm", "--data", "digits", "--test-data", "x.txt"],
    ["fit", "dp-gmm", "--data", "digits", "--device", "gpu"],
    ["fit", "dp-gmm", "--data", "hdp-gd", "--groups", "groups.txt"],  # takes no groups: refused, not ignored
    ["compare", "--data", "blobs:n=100", "--out", "/proc/none"],  # refused before any fit
    ["fit", "dp-gmm", "--data", "blobs:n=100", "--save", "/proc/none/model.pt"],
    ["compare", "--data", "blobs:n=100", "--bogus"], ["fit"], ["nothing"], [],
    ["fit", "dp-gmm", "--data", "digits", "--batch-size", "0", "--inference", "sga"],
    ["fit", "dp-gmm", "--data", "digits", "--learning-rate", "1e10", "--inference", "sga", "--iters", "40"],
]


@pytest.mark.filterwarnings("ignore:every one of the")  # --truncation 3 fills the pool: the fit says so
@pytest.mark.filterwarnings("ignore:the bound fell")  # --learning-rate 1e10 overshoots: the fit says so
@pytest.mark.parametrize("argv", CLI, ids=[" ".join(a) or "(none)" for a in CLI])
def test_every_command_line_ends_in_a_result_or_one_line(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    try:
        status = main(argv)
    except SystemExit as exit_:  # argparse's own --help / usage exits
        status = exit_.code
    captured = capsys.readouterr()
    assert status in (0, 2), captured
    if status == 2:
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    else:
        cells = captured.out.lower().split()
        assert not {"nan", "inf", "-inf"} & set(cells) and "Traceback" not in captured.err, captured.out
