"""Threads on a shared machine: small fits run on one thread, torch's setting comes back, and
importing bnpzoo first makes OpenMP's threads wait passively (``bnpzoo.threads``)."""

import os
import subprocess
import sys

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
    # a minibatch a step: a twentieth of the rows on the conjugate factors (a pass of 20 batches), else 1,000
    assert DPGMM(inference="sga", covariance="fixed")._step_work(torch.zeros(10**6, 64)) == 50_000 * 64 * 50
    assert PYPGGM(likelihood="laplace", inference="sga")._step_work(torch.zeros(10**6, 64)) == 1000 * 64 * 50
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
