import os

import numpy as np
import pyro
import pytest
import torch

# BNPZOO_TEST_DEVICE=cuda fits every estimator left at device=None on that device, whatever the
# test passes in (numpy data included): the suite's check on a GPU machine. CI has none.
if os.environ.get("BNPZOO_TEST_DEVICE"):
    from bnpzoo.base import Estimator

    _device_for = Estimator._device_for

    def _test_device_for(self, X):
        if self.device is None and not isinstance(X, torch.Tensor):
            return torch.device(os.environ["BNPZOO_TEST_DEVICE"])
        return _device_for(self, X)

    Estimator._device_for = _test_device_for


@pytest.fixture(autouse=True)
def _fresh_pyro():
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    yield


@pytest.fixture(scope="session")
def digits():
    from bnpzoo.data import digits

    return digits()


def draw_from_model(n=1200, d=2, k=6, spread=12.0, seed=0):
    """Data from models.dp_gmm itself: K well-separated means, equal-ish weights, sigma = 1."""
    from bnpzoo.models.dp_gmm import model

    gen = torch.Generator().manual_seed(seed)
    means = spread * torch.randn(k, d, generator=gen)
    # sticks giving weights 1/k each: v_j = 1 / (k - j + 1)
    sticks = 1.0 / torch.arange(k, 1, -1, dtype=torch.float32)
    pyro.set_rng_seed(seed)
    conditioned = pyro.condition(model, data={"mu": means, "v": sticks})
    trace = pyro.poutine.trace(conditioned).get_trace(None, truncation=k, sigma=1.0, num_data=n, dim=d)
    return trace.nodes["x"]["value"].numpy(), trace.nodes["z"]["value"].numpy(), means.numpy()


@pytest.fixture(scope="session")
def model_draw():
    return draw_from_model()


def match_means(true, fitted):
    """Largest distance between true means and fitted means under the best one-to-one map."""
    from scipy.optimize import linear_sum_assignment

    cost = np.linalg.norm(true[:, None] - fitted[None], axis=-1)
    rows, cols = linear_sum_assignment(cost)
    return cost[rows, cols].max()


def load_written(tmp_path, name, content, **side_files):
    """Write ``content`` to tmp_path/name and side files (``labels=``, ``groups=``: their text,
    or None for none), then ``bnpzoo.data.load`` it."""
    from bnpzoo import data

    (tmp_path / name).write_text(content)
    paths = {}
    for key, text in side_files.items():
        if text is not None:
            paths[key] = tmp_path / f"{key}.txt"
            paths[key].write_text(text)
    return data.load(str(tmp_path / name), **paths)
