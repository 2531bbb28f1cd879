"""The papers' workload ([PYPM-sVMM] on SUN397: about 100,000 ResNet features, 397 classes, truncation
1,000) on data generated like deep features, every learner against KMeans told the true number of
classes and scikit-learn's BayesianGaussianMixture (diagonal, truncation as ours), in the same run.

The generator (``deep_features``): K classes of power-law sizes (the j-th largest ~ j^-0.8, at least
20 rows), each class a non-negative centre (a rectified Gaussian, half its features silent) and its
own few directions of spread (4, with scales 1 to 3 times the noise), rows rectified after the noise,
as features after a ReLU are. Each fit runs in a fresh process (its peak resident memory its own):
clusters found against classes, NMI, ACC, fit seconds, peak GB, whether it converged.

Usage:
    python benchmarks/bench_many_classes.py [--shape 10000 128 100 300] [--learners vmm natgrad-svi ...]
                                            [--seed 0] [--out FILE]
"""

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
import warnings

import numpy as np

DIRECTIONS, POWER, SMALLEST = 4, 0.8, 20


def deep_features(n: int, d: int, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(X (n, d) float32, labels (n,)) of the module docstring."""
    rng = np.random.default_rng(seed)
    sizes = np.arange(1, k + 1) ** -POWER
    sizes = np.maximum(SMALLEST, np.floor(sizes / sizes.sum() * n)).astype(int)
    sizes[0] += n - sizes.sum()
    centres = np.maximum(rng.normal(0.0, 3.0, size=(k, d)), 0.0)
    labels = np.repeat(np.arange(k), sizes)
    rng.shuffle(labels)
    x = np.empty((n, d), dtype=np.float32)
    for c in range(k):
        rows = np.flatnonzero(labels == c)
        axes = rng.normal(size=(DIRECTIONS, d)) / np.sqrt(d) * rng.uniform(1.0, 3.0, size=(DIRECTIONS, 1)) * 3.0
        spread = rng.normal(size=(len(rows), DIRECTIONS)) @ axes
        x[rows] = np.maximum(centres[c] + spread + 0.5 * rng.normal(size=(len(rows), d)), 0.0)
    return x, labels


def child(learner: str, n: int, d: int, k: int, truncation: int, seed: int) -> dict:
    from bnpzoo.metrics import acc, clusters_used, nmi

    x, y = deep_features(n, d, k, seed)
    start, model = time.perf_counter(), None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if learner == "kmeans (true K)":
            from sklearn.cluster import KMeans

            pred, converged = KMeans(n_clusters=k, n_init=1, random_state=0).fit_predict(x), True
        elif learner == "bgm diag":
            from sklearn.mixture import BayesianGaussianMixture

            model = BayesianGaussianMixture(n_components=truncation, covariance_type="diag", random_state=0,
                                            weight_concentration_prior_type="dirichlet_process").fit(x)
            pred, converged = model.predict(x), model.converged_
        else:
            from bnpzoo import DPGMM

            model = DPGMM(inference=learner, truncation=truncation, random_state=0).fit(x)
            pred, converged = model.predict(x), model.converged_
    seconds = time.perf_counter() - start
    return {"learner": learner, "clusters": clusters_used(pred),
            "nmi": round(nmi(y, pred), 3), "acc": round(acc(y, pred), 3), "seconds": round(seconds, 1),
            "peak_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
            "converged": bool(converged),
            "covariance": getattr(model, "covariance_type_", "-")}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", type=int, nargs=4, default=[10_000, 128, 100, 300],
                        metavar=("N", "D", "CLASSES", "TRUNCATION"))
    parser.add_argument("--learners", nargs="+",
                        default=["kmeans (true K)", "bgm diag", "vmm", "sga", "svmm", "natgrad-svi"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", nargs=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], *args.shape, args.seed)))
        return
    n, d, k, truncation = args.shape
    print(f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; {n:,} x {d}, {k} classes, "
          f"truncation {truncation}, seed {args.seed}\n")
    print("| learner | covariance | clusters | NMI | ACC | fit s | peak GB | converged |\n|---|---|---|---|---|---|---|---|")
    for learner in args.learners:
        out = subprocess.run([sys.executable, __file__, "--child", learner, "--shape", *map(str, args.shape),
                              "--seed", str(args.seed)], capture_output=True, text=True)
        if out.returncode:
            print(f"| {learner} | failed: {out.stderr.strip().splitlines()[-1]} |||||||", flush=True)
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"| {learner} | {r['covariance']} | {r['clusters']} | {r['nmi']} | {r['acc']} | {r['seconds']} | "
              f"{r['peak_gb']} | {r['converged']} |", flush=True)


if __name__ == "__main__":
    main()
