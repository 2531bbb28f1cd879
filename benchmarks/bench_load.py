"""Fits on digits with and without a background load, beside scikit-learn's BGM, same run.

The load is one busy process per core (a Python loop), which this script starts and stops itself.
Each fit runs in a fresh process (so the threading settings apply at torch's import) under
each thread setting: torch's default (``BNPZOO_THREADS=off``), and what ``bnpzoo`` chooses
(``bnpzoo.threads``: a passive OpenMP wait, one thread for small steps). It prints the fit's
threads, its median wall time unloaded and loaded, and their ratio.

Usage: python benchmarks/bench_load.py [--repeats 3] [--learners vmm,sga,...]
"""

import argparse
import multiprocessing
import os
import platform
import subprocess
import sys
import time

LEARNERS = ("vmm", "vi", "sga", "sga-momentum", "sga-fisher", "svmm", "svmm-mgrad", "svmm-grad", "natgrad-svi")
FIT = """
import time, warnings
import numpy as np
from sklearn.exceptions import ConvergenceWarning
warnings.filterwarnings("ignore", category=ConvergenceWarning)
from bnpzoo.data import digits
X = digits().X
learner, repeats = {learner!r}, {repeats}
if learner == "bgm":
    from sklearn.mixture import BayesianGaussianMixture
    make = lambda: BayesianGaussianMixture(n_components=50, covariance_type="diag", random_state=0, max_iter=200)
else:
    from bnpzoo import DPGMM
    make = lambda: DPGMM(inference=learner, max_iter=200, tol=0.0, random_state=0)
make().fit(X[:300])  # warm-up: imports, first calls
seconds = []
for _ in range(repeats):
    start = time.perf_counter()
    make().fit(X)
    seconds.append(time.perf_counter() - start)
import torch
from bnpzoo.threads import threads_for
threads = torch.get_num_threads() if learner == "bgm" else threads_for(make()._step_work(X))
print(sorted(seconds)[len(seconds) // 2], threads or torch.get_num_threads())
"""
SETTINGS = {"torch default": {"BNPZOO_THREADS": "off"}, "bnpzoo": {}}


def _busy():
    while True:
        pass


def fit_seconds(learner: str, repeats: int, env: dict) -> tuple[float, int]:
    """The median seconds of ``repeats`` fits in a fresh process, and its torch thread count."""
    out = subprocess.run([sys.executable, "-c", FIT.format(learner=learner, repeats=repeats)], check=True,
                         capture_output=True, text=True, env={**os.environ, **env}).stdout.split()
    return float(out[0]), int(out[1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--learners", default=",".join(LEARNERS))
    args = parser.parse_args()
    cores = os.cpu_count()
    print(f"{time.strftime('%Y-%m-%d')}  {platform.processor() or platform.machine()}, {cores} cores, "
          f"load average before {os.getloadavg()[0]:.2f}; the load: {cores} busy processes\n")
    print(f"{'fit on digits (200 iterations)':<34}{'threads':>8}{'unloaded s':>12}{'loaded s':>10}{'ratio':>7}")
    for learner in ["bgm", *args.learners.split(",")]:
        for setting, env in SETTINGS.items():
            if learner == "bgm" and setting != "torch default":
                continue
            quiet, threads = fit_seconds(learner, args.repeats, env)
            load = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(cores)]
            for process in load:
                process.start()
            try:
                time.sleep(1.0)
                loaded, _ = fit_seconds(learner, args.repeats, env)
            finally:
                for process in load:
                    process.terminate()
                    process.join()
            name = "sklearn BGM diag" if learner == "bgm" else f"{learner} ({setting})"
            print(f"{name:<34}{threads:>8}{quiet:>12.3f}{loaded:>10.3f}{loaded / quiet:>7.2f}", flush=True)


if __name__ == "__main__":
    main()
