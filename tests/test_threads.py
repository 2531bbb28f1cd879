"""Threads on a shared machine: small fits run on one thread, torch's setting comes back, and
importing bnpzoo first makes OpenMP's threads wait passively (``bnpzoo.threads``)."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from bnpzoo import PYPGGM, CoupledDP, DPGMM
from bnpzoo.threads import SMALL_WORK, threads_for


def test_a_small_fit_runs_on_one_thread_and_restores_torchs_setting(monkeypatch):
    seen = []
    monkeypatch.setattr("bnpzoo.mixture.fit_vmm", lambda *a, **k: seen.append(torch.get_num_threads()) or 1 / 0)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with pytest.raises(ZeroDivisionError):
            DPGMM(truncation=5).fit(torch.randn(100, 3).numpy())
        assert seen == [1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_large_steps_keep_torchs_threads_and_the_environment_overrides(monkeypatch):
    assert threads_for(SMALL_WORK - 1) == 1 and threads_for(SMALL_WORK) is None
    # a minibatch a step: a twentieth of the rows on the conjugate factors (a pass of 20 batches), at most
    # 10,000, else 1,000
    assert DPGMM(inference="sga", covariance="fixed")._step_work(torch.zeros(10**6, 64)) == 10_000 * 64 * 50
    assert PYPGGM(likelihood="laplace", covariance="fixed", inference="sga")._step_work(torch.zeros(10**6, 64)) == 1000 * 64 * 50
    assert CoupledDP()._step_work([["ragged", "tokens"], ["lists"]]) == 2 and DPGMM()._step_work(3) == 0
    monkeypatch.setenv("BNPZOO_THREADS", "3")
    assert threads_for(1) == 3
    monkeypatch.setenv("BNPZOO_THREADS", "off")
    assert threads_for(1) is None
    monkeypatch.setenv("BNPZOO_THREADS", "many")
    with pytest.raises(ValueError, match="BNPZOO_THREADS"):
        threads_for(1)


@pytest.mark.parametrize("env, expected", [({}, "PASSIVE"), ({"OMP_WAIT_POLICY": "ACTIVE"}, "ACTIVE"),
                                           ({"BNPZOO_THREADS": "off"}, "None")])
def test_importing_bnpzoo_first_sets_a_passive_wait_unless_told(env, expected):
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "BNPZOO_THREADS")}
    out = subprocess.run([sys.executable, "-c", "import os, bnpzoo; print(os.environ.get('OMP_WAIT_POLICY'))"],
                         env={**clean, **env}, capture_output=True, text=True, check=True).stdout.strip()
    assert out == expected


@pytest.mark.parametrize("setting, small", [("auto", 1), ("off", 2)])
def test_births_merges_and_the_start_run_on_one_thread_and_the_passes_on_the_fits(monkeypatch, setting, small):
    """``bnpzoo.threads.small_work``: the steps on a few thousand rows take one thread, the passes over
    every row the fit's; ``BNPZOO_THREADS`` leaves every step alone."""
    import bnpzoo.inference.stick_mixture.vmm as vmm
    from bnpzoo import mixture

    monkeypatch.setenv("BNPZOO_THREADS", setting)
    seen = {"start": set(), "births": set(), "merges": set(), "passes": set()}

    def spy(name, function):
        def wrapped(*args, **kwargs):
            seen[name].add(torch.get_num_threads())
            return function(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(mixture, "kmeans", spy("start", mixture.kmeans))
    for name, attribute in (("births", "propose_births"), ("merges", "_memoized_merges"), ("passes", "expectation")):
        monkeypatch.setattr(vmm, attribute, spy(name, getattr(vmm, attribute)))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        rng = np.random.default_rng(0)
        x = np.concatenate([rng.normal(10 * k, 1, (4000, 4)) for k in range(3)])
        DPGMM(truncation=50).fit(np.hstack([x, rng.normal(size=(12000, 30))]))  # 12,000 x 34 x 50 > SMALL_WORK
        assert seen == {"start": {small}, "births": {small}, "merges": {small}, "passes": {2}}
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
