"""DPGMM against scikit-learn's BayesianGaussianMixture (Dirichlet-process prior), same run.

1. digits: our `vmm` and `vi` against BGM (spherical and diag, 50 components): NMI, ACC,
   clusters used, fit seconds (median of --repeats), and our time as a fraction of BGM diag's.
2. standardised real data shipped with scikit-learn (iris, wine, breast cancer): written to a
   .csv with a labels file and run through the CLI exactly as a user would
   (`bnpzoo fit dp-gmm --inference vmm --data X.csv --labels y.txt --json`), against BGM diag.

scikit-learn is the peer here, never our learner. Usage: python benchmarks/bench_dp_gmm.py
"""

import argparse
import contextlib
import io
import json
import platform
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from sklearn import datasets as skdata
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import BayesianGaussianMixture

from bnpzoo import DPGMM
from bnpzoo.cli import main as cli
from bnpzoo.data import digits
from bnpzoo.metrics import acc, clusters_used, nmi


def timed(fit, repeats):
    seconds, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fit()
        seconds.append(time.perf_counter() - start)
    return result, statistics.median(seconds)


def bgm(cov, k):
    return BayesianGaussianMixture(n_components=k, covariance_type=cov, random_state=0,
                                   weight_concentration_prior_type="dirichlet_process")


def row(name, y, pred, seconds, ref=None):
    ratio = "" if ref is None else f"{seconds / ref:.3f}"
    return f"{name:<28}{nmi(y, pred):>7.3f}{acc(y, pred):>7.3f}{clusters_used(pred):>6d}{seconds:>9.3f}  {ratio}"


def bench_digits(repeats):
    data = digits()
    X, y = data.X, data.labels
    peers = {cov: timed(lambda cov=cov: bgm(cov, 50).fit(X), repeats) for cov in ("diag", "spherical")}
    ref = peers["diag"][1]
    print(f"{'digits (1797 x 64)':<28}{'NMI':>7}{'ACC':>7}{'k':>6}{'seconds':>9}  time / BGM diag")
    for cov, (fitted, sec) in peers.items():
        print(row(f"sklearn BGM {cov} (K=50)", y, fitted.predict(X), sec, ref))
    for inference in ("vmm", "vi"):
        fitted, sec = timed(lambda: DPGMM(inference=inference, random_state=0).fit(X), repeats if inference == "vmm" else 1)
        print(row(f"bnpzoo dp-gmm {inference} (K=50)", y, fitted.predict(X), sec, ref))


def bench_csv(tmp: Path):
    print(f"\n{'standardised csv via the CLI':<28}{'NMI ours':>9}{'NMI BGM':>9}{'k ours':>8}{'k BGM':>7}")
    for name, loader in (("iris", skdata.load_iris), ("wine", skdata.load_wine),
                         ("breast cancer", skdata.load_breast_cancer)):
        raw = loader()
        X = (raw.data - raw.data.mean(0)) / raw.data.std(0)
        path, labels = tmp / f"{name.replace(' ', '_')}.csv", tmp / f"{name.replace(' ', '_')}.labels"
        np.savetxt(path, X, delimiter=",")
        np.savetxt(labels, raw.target, fmt="%d")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            cli(["fit", "dp-gmm", "--inference", "vmm", "--data", str(path), "--labels", str(labels), "--json"])
        ours = json.loads(out.getvalue().strip().splitlines()[-1])
        peer = bgm("diag", 50).fit(X).predict(X)
        print(f"{name:<28}{ours['nmi']:>9.3f}{nmi(raw.target, peer):>9.3f}{ours['k_used']:>8d}{clusters_used(peer):>7d}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=ConvergenceWarning)
    print(f"{time.strftime('%Y-%m-%d')}  {platform.processor() or platform.machine()}, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}\n")
    bench_digits(args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        bench_csv(Path(tmp))
