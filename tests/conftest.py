import contextlib
import os

import numpy as np
import pyro
import pyro.distributions as dist
import pytest
import torch

from bnpzoo import DPBMM, DPGMM, HDPGD, PYPGGM, CoupledDP, MixtureSVI
from bnpzoo.models.stick_breaking import feature_vectors, stick_breaking_prior

# BNPZOO_TEST_DEVICE=cuda fits every estimator left at device=None on that device, whatever the
# test passes in (numpy data included), and ``load`` maps saved files there: the suite's check on a
# GPU machine (``bash .ci/gpu``). CI has none. Tests marked ``cpu_state`` stay on the CPU: they
# build the learners' internals from CPU tensors, or compare two code paths bit for bit, which
# holds where the reductions run in one order.
# pytest-xdist's workers share the machine's cores: one torch thread each (with two threads a
# worker on 2 cores, the suite took as long as one process did)
if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)

_TEST_DEVICE = {"device": os.environ.get("BNPZOO_TEST_DEVICE")}
if _TEST_DEVICE["device"]:
    from bnpzoo.base import Estimator

    _device_for, _load = Estimator._device_for, Estimator.load.__func__

    def _test_device_for(self, X):
        if _TEST_DEVICE["device"] and self.device is None and not isinstance(X, torch.Tensor):
            return torch.device(_TEST_DEVICE["device"])
        return _device_for(self, X)

    def _test_load(cls, path, *, map_location=None, **code):
        fits_there = "device" in cls._param_names() and cls is not CoupledDP  # CoupledDP samples on the CPU by default
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


@pytest.fixture(params=[0, *(pytest.param(seed, marks=pytest.mark.slow) for seed in range(1, 10))])
def random_state(request):
    """The random_state of a recovery test: 0 in the default suite, and 1 to 9 too in the slow set
    (``make test-slow``). A recovery asserts what the learner guarantees for every seed: one that
    holds for one seed on one processor is luck (another rounds the fit another way)."""
    return request.param


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


@contextlib.contextmanager
def interrupted(module, name: str, stop_at=None):
    """A context in which ``module.name`` raises KeyboardInterrupt at its ``stop_at``-th call (None:
    never), as a run killed mid-chain stops."""
    original, calls = getattr(module, name), []

    def stopping(*args, **kwargs):
        calls.append(1)
        if len(calls) == stop_at:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, name, stopping)
        yield


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


def student_t_model(data=None, *, truncation=20, alpha=1.0, sigma=1.0, df=4.0, prior_mean=0.0, prior_precision=1.0,
                    subsample_size=None, num_data=None, dim=None):
    """models/dp_gmm.py copied, with its likelihood edited to a Student-t of ``df`` degrees."""
    n, (sigma, m0) = feature_vectors(data, num_data, dim, sigma, prior_mean)
    log_weights, mu = stick_breaking_prior(truncation, alpha, 0.0, m0, sigma / prior_precision**0.5)
    with pyro.plate("data", n, subsample_size=subsample_size, dim=-1) as idx:
        z = pyro.sample("z", dist.Categorical(logits=log_weights), infer={"enumerate": "parallel"})
        obs = data[idx] if data is not None else None
        return pyro.sample("x", dist.StudentT(df, mu[z], sigma).to_event(1), obs=obs)


# every estimator, small and quick, as the fuzz table and the contract suite take them
ESTIMATOR_CASES = {
    "dpgmm vmm": lambda: DPGMM(truncation=10, random_state=0),
    "dpgmm sga": lambda: DPGMM(truncation=10, inference="sga", max_iter=30, random_state=0),
    "dpgmm natgrad-svi": lambda: DPGMM(truncation=10, inference="natgrad-svi", max_iter=30, random_state=0),
    "dpgmm vi": lambda: DPGMM(truncation=10, inference="vi", max_iter=30, random_state=0),
    "dpgmm natgrad-svi full": lambda: DPGMM(truncation=10, inference="natgrad-svi", covariance="full", max_iter=30,
                                            random_state=0),
    "dpbmm vmm": lambda: DPBMM(truncation=10, random_state=0),
    "dpbmm natgrad-svi": lambda: DPBMM(truncation=10, inference="natgrad-svi", max_iter=30, random_state=0),
    "pypggm svmm": lambda: PYPGGM(truncation=10, max_iter=30, random_state=0),
    "mixture-svi student-t": lambda: MixtureSVI(model=student_t_model, truncation=10, max_iter=30, random_state=0),
    "hdpgd vi": lambda: HDPGD(truncation=6, group_truncation=3, max_iter=20, random_state=0),
    "hdpgd online-vi": lambda: HDPGD(truncation=6, group_truncation=3, inference="online-vi", batch_size=40,
                                     random_state=0),
    "hdpgd svi": lambda: HDPGD(truncation=6, group_truncation=3, inference="svi", max_iter=20, random_state=0),
    "coupled-dp gibbs": lambda: CoupledDP(truncation=4, max_iter=4, warmup=2, random_state=0),
}
