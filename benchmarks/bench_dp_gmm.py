"""DPGMM against scikit-learn's BayesianGaussianMixture (Dirichlet-process prior), same run.

1. digits: our `vmm` and `vi` against BGM (spherical and diag, 50 components): NMI, ACC,
   clusters used, fit seconds (median of --repeats), and our time as a fraction of BGM diag's.
2. standardised real data shipped with scikit-learn (iris, wine, breast cancer): written to a
   .csv with a labels file and run through the CLI exactly as a user would
   (`bnpzoo fit dp-gmm --inference vmm --data X.csv --labels y.txt --json`), against BGM diag.
3. scale (``--scale``): blobs of 64 features and 50 clusters, truncation 100: `vmm` with defaults on
   200,000 rows against BGM spherical (K=100) in the same run, with the K-means start's share of
   our fit, and `vmm` on 1,000,000 rows: wall, user and system seconds, peak RSS and NMI, each fit
   in its own process (so the peak RSS is that fit's).

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
        fitted, sec = timed(lambda: DPGMM(inference=inference, random_state=0).fit(X),
                            repeats if inference == "vmm" else 1)
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
        print(f"{name:<28}{ours['nmi']:>9.3f}{nmi(raw.target, peer):>9.3f}{ours['k_used']:>8d}"
              f"{clusters_used(peer):>7d}")


def _scale_fit(learner, n, queue):
    """One fit in a fresh process: (NMI, clusters, wall, user, sys, K-means seconds, peak RSS GB)."""
    import resource

    from bnpzoo.data import blobs
    from bnpzoo.mixture import StickMixture

    data = blobs(n=n, d=64, k=50, seed=0)
    start_seconds = []
    start = StickMixture._start

    def timed_start(self, *args, **kwargs):
        began = time.perf_counter()
        result = start(self, *args, **kwargs)
        start_seconds.append(time.perf_counter() - began)
        return result

    StickMixture._start = timed_start
    fit = DPGMM(truncation=100, random_state=0) if learner == "vmm" else bgm("spherical", 100)
    before, began = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    fit.fit(data.X)
    wall, after = time.perf_counter() - began, resource.getrusage(resource.RUSAGE_SELF)
    pred = fit.predict(data.X)
    queue.put((nmi(data.labels, pred), clusters_used(pred), wall, after.ru_utime - before.ru_utime,
               after.ru_stime - before.ru_stime, sum(start_seconds), after.ru_maxrss / 2**20))


def bench_scale():
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    print(f"\n{'blobs 64 features, 50 clusters':<36}{'NMI':>7}{'k':>5}{'wall s':>9}{'user s':>8}{'sys s':>7}"
          f"{'k-means':>9}{'RSS GB':>8}{'/ BGM':>7}")
    reference = None
    for learner, n in (("bgm", 200_000), ("vmm", 200_000), ("vmm", 1_000_000)):
        queue = context.Queue()
        process = context.Process(target=_scale_fit, args=(learner, n, queue))
        process.start()
        score, k, wall, user, system, kmeans_seconds, rss = queue.get()
        process.join()
        name = "sklearn BGM spherical (K=100)" if learner == "bgm" else "bnpzoo dp-gmm vmm (K=100)"
        share = "" if learner == "bgm" else f"{kmeans_seconds / wall:.1%}"
        ratio = "" if reference is None or n != 200_000 else f"{wall / reference:.3f}"
        reference = wall if learner == "bgm" else reference
        print(f"{name + f' n={n:,}':<36}{score:>7.3f}{k:>5d}{wall:>9.2f}{user:>8.2f}{system:>7.2f}{share:>9}"
              f"{rss:>8.2f}{ratio:>7}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scale", action="store_true", help="only section 3 (large generated data)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=ConvergenceWarning)
    print(f"{time.strftime('%Y-%m-%d')}  {platform.processor() or platform.machine()}, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}\n")
    if args.scale:
        bench_scale()
    else:
        bench_digits(args.repeats)
        with tempfile.TemporaryDirectory() as tmp:
            bench_csv(Path(tmp))
