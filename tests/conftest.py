import os

import numpy as np
import pyro
import pytest
import torch

# BNPZOO_TEST_DEVICE=cuda fits every estimator left at device=None on that device, whatever the
# test passes in (numpy data included), and ``load`` maps saved files there: the suite's check on a
# GPU machine (``bash .ci/gpu``). CI has none. Tests marked ``cpu_state`` stay on the CPU: they
# build the learners' internals from CPU tensors, or compare two code paths bit for bit, which
# holds where the reductions run in one order.
_TEST_DEVICE = {"device": os.environ.get("BNPZOO_TEST_DEVICE")}
if _TEST_DEVICE["device"]:
    from bnpzoo.base import Estimator

    _device_for, _load = Estimator._device_for, Estimator.load.__func__

    def _test_device_for(self, X):
        if _TEST_DEVICE["device"] and self.device is None and not isinstance(X, torch.Tensor):
            return torch.device(_TEST_DEVICE["device"])
        return _device_for(self, X)

    def _test_load(cls, path, *, map_location=None, **code):
        fits_there = "device" in cls._param_names()  # CoupledDP samples on the CPU
        return _load(cls, path, map_location=map_location or (_TEST_DEVICE["device"] if fits_there else None), **code)

    Estimator._device_for, Estimator.load = _test_device_for, classmethod(_test_load)


@pytest.fixture(autouse=True)
def _test_device(request):
    device = os.environ.get("BNPZOO_TEST_DEVICE")
    _TEST_DEVICE["device"] = None if request.node.get_closest_marker("cpu_state") else device
    yield


def _same(a, b) -> bool:
    """Bit for bit on the CPU. On CUDA the gradient learners' backward passes (and HDP-GD's
    scatter sums) add with atomics in no fixed order, so two runs of one fit agree to float32
    rounding only."""
    on_gpu = bool(_TEST_DEVICE["device"]) and _TEST_DEVICE["device"] != "cpu"
    if getattr(a, "shape", None) != getattr(b, "shape", None):
        return False
    if isinstance(a, torch.Tensor) and a.is_cuda:
        return torch.allclose(a, b, rtol=1e-4, atol=1e-5 * float(b.abs().max()))
    if isinstance(a, (list, np.ndarray)) and on_gpu:
        return np.allclose(a, b, rtol=1e-4, atol=1e-5 * float(np.abs(b).max()))
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    return torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b


@pytest.fixture
def same():
    """``same(a, b)``: two fits' values agree bit for bit on the CPU, to float32 rounding on CUDA."""
    return _same


@pytest.fixture
def chains_in_this_process(monkeypatch):
    """Pyro's MCMC runs its chains here, as on a 2-core machine, not in spawned workers (where cores
    are free), so that the test sees the kernel's state and its own patches."""
    import pyro.infer.mcmc.api

    monkeypatch.setattr(pyro.infer.mcmc.api.mp, "cpu_count", lambda: 1)


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
