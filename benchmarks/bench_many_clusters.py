"""Many small clusters in 2-D: the default ``DPGMM()`` against scikit-learn's BGM and R's mclust, in
the same run, on batteries of generated Gaussian mixtures (issue 79).

Two generators that never mix:

- ``tuning`` (``separated_grid``): K = 10 to 50 clusters of one size (40 to 300 rows), centres drawn
  in a square at least ``sep`` cluster sds apart (2.5 to 6), each cluster rotated with an axis ratio
  up to 3 and a scale of 0.5 to 1.5; the base measure's schedule was chosen on its seeds 0 to 7;
- ``held-out`` (``unequal_disk``): K = 10 to 50 clusters of unequal sizes (each 40 to 300 rows),
  centres in a disk placed one at a time so that every pair stays ``c`` (1 to 3: touching to
  separated) times the sum of their largest sds apart, covariances of axis ratio up to 4 and scales
  0.4 to 2.5 times each other, and a fifth of the sets with one cluster 3 times as wide: never looked
  at while choosing; ``held-out-separated``, the same with ``c`` from 1.8 to 4.5.

Per set: the default's clusters, ARI and seconds (truncation max(50, 2K), random_state 0); BGM
(``n_components`` 2K, ``max_iter`` 500, full and diag, the better ARI, one BLAS thread); mclust
(``Mclust(x, G = 1:max(9, 1.5K))``: BIC over its 14 covariance models, Debian's ``r-cran-mclust``,
skipped with ``--no-mclust`` or where ``Rscript`` is missing). The summary counts the sets whose
cluster count is within 20 % of the truth and whose ARI is at least mclust's - 0.02.

    python benchmarks/bench_many_clusters.py [--battery held-out] [--sets 20] [--first 100] [--json FILE]
                                             [--mclust-from EARLIER.json] [--no-mclust]
"""

import argparse
import functools
import json
import os
import shutil
import subprocess
import tempfile
import time
import warnings

import numpy as np


def _rotated(rng, ratio_most, scale_low, scale_high):
    angle, ratio = rng.uniform(0, np.pi), rng.uniform(1, ratio_most)
    rotation = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    return rotation @ np.diag([1.0, 1.0 / ratio]) @ rotation.T * rng.uniform(scale_low, scale_high)


def separated_grid(seed):
    """The tuning generator (the module docstring): (X, labels, description)."""
    rng = np.random.default_rng(seed)
    k, rows = int(rng.integers(10, 51)), int(rng.integers(40, 301))
    sep = rng.uniform(2.5, 6.0)
    side = sep * np.sqrt(k) * 1.2
    centres = []
    while len(centres) < k:
        c = rng.uniform(0, side, 2)
        if all(np.linalg.norm(c - o) > sep for o in centres):
            centres.append(c)
    x = np.vstack([rng.multivariate_normal(c, _rotated(rng, 3, 0.5, 1.5), rows) for c in centres])
    return x.astype(np.float32), np.repeat(np.arange(k), rows), dict(k=k, rows=rows, sep=round(sep, 2))


def unequal_disk(seed, closest=1.0, farthest=3.0):
    """The held-out generator (the module docstring), ``c`` between ``closest`` and ``farthest``: (X,
    labels, description)."""
    rng = np.random.default_rng(10_000 + seed)
    k = int(rng.integers(10, 51))
    sizes = rng.integers(40, 301, size=k)
    c = rng.uniform(closest, farthest)
    covariances = [_rotated(rng, 4, 0.4, 2.5) for _ in range(k)]
    if rng.uniform() < 0.2:
        covariances[0] = covariances[0] * 9.0
    sds = [np.sqrt(np.linalg.eigvalsh(s).max()) for s in covariances]
    radius = np.sqrt(k) * c * np.mean(sds) * 1.5
    centres = []
    for j in range(k):
        for _ in range(10_000):
            angle, r = rng.uniform(0, 2 * np.pi), radius * np.sqrt(rng.uniform())
            point = np.array([r * np.cos(angle), r * np.sin(angle)])
            if all(np.linalg.norm(point - o) > c * (sds[j] + sds[i]) for i, o in enumerate(centres)):
                break
        else:
            radius *= 1.1
        centres.append(point)
    x = np.vstack([rng.multivariate_normal(m, s, n) for m, s, n in zip(centres, covariances, sizes)])
    return (x.astype(np.float32), np.repeat(np.arange(k), sizes),
            dict(k=k, rows=f"{sizes.min()}-{sizes.max()}", c=round(c, 2)))


BATTERIES = {"tuning": separated_grid, "held-out": unequal_disk,
             "held-out-separated": functools.partial(unequal_disk, closest=1.8, farthest=4.5)}


def fit_default(x, k):
    from bnpzoo import DPGMM

    start = time.perf_counter()
    model = DPGMM(truncation=max(50, 2 * k), random_state=0).fit(x)
    return model.predict(x), time.perf_counter() - start


def fit_bgm(x, k, covariance):
    from sklearn.mixture import BayesianGaussianMixture
    from threadpoolctl import threadpool_limits

    start = time.perf_counter()
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        labels = BayesianGaussianMixture(n_components=2 * k, covariance_type=covariance, max_iter=500,
                                         random_state=0).fit(x).predict(x)
    return labels, time.perf_counter() - start


def fit_mclust(x, k):
    """mclust's BIC choice over G = 1..max(9, 1.5 K) and its 14 models, in an R process."""
    with tempfile.TemporaryDirectory() as folder:
        data, out = os.path.join(folder, "x.csv"), os.path.join(folder, "labels.txt")
        np.savetxt(data, x, delimiter=",")
        script = (f'suppressMessages(library(mclust)); x <- as.matrix(read.csv("{data}", header = FALSE)); '
                  f'm <- Mclust(x, G = 1:{max(9, int(1.5 * k))}, verbose = FALSE); '
                  f'write(m$classification, "{out}", ncolumns = 1)')
        start = time.perf_counter()
        subprocess.run(["Rscript", "-e", script], check=True, capture_output=True)
        return np.loadtxt(out).astype(int), time.perf_counter() - start


def main():
    from sklearn.metrics import adjusted_rand_score as ari

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--battery", choices=tuple(BATTERIES), default="held-out")
    parser.add_argument("--sets", type=int, default=20)
    parser.add_argument("--first", type=int, default=0, help="the first set's seed")
    parser.add_argument("--no-mclust", action="store_true")
    parser.add_argument("--mclust-from", default=None, help="an earlier run's --json: its mclust columns, not rerun "
                        "(they depend only on the data)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    earlier = {}
    if args.mclust_from:
        with open(args.mclust_from) as handle:
            earlier = {row["seed"]: row for row in json.load(handle)}
    mclust = not args.no_mclust and (shutil.which("Rscript") is not None or bool(earlier))
    print(f"battery {args.battery}, torch threads {os.environ.get('BNPZOO_THREADS', 'auto')}, "
          f"load {os.getloadavg()[0]:.1f}; mclust {'on' if mclust else 'off'}")
    rows = []
    for seed in range(args.first, args.first + args.sets):
        x, y, info = BATTERIES[args.battery](seed)
        k = info["k"]
        ours, ours_s = fit_default(x, k)
        bgm = max((fit_bgm(x, k, c) for c in ("full", "diag")), key=lambda fit: ari(y, fit[0]))
        row = dict(seed=seed, n=len(x), **info, clusters=len(np.unique(ours)), ari=ari(y, ours), seconds=ours_s,
                   bgm_ari=ari(y, bgm[0]), bgm_seconds=bgm[1])
        if mclust and seed in earlier:
            row.update({name: value for name, value in earlier[seed].items() if name.startswith("mclust")})
        elif mclust:
            labels, seconds = fit_mclust(x, k)
            row.update(mclust_clusters=len(np.unique(labels)), mclust_ari=ari(y, labels), mclust_seconds=seconds)
        rows.append(row)
        print(" ".join(f"{name}={value:.3f}" if isinstance(value, float) else f"{name}={value}"
                       for name, value in row.items()), flush=True)
    within = sum(abs(r["clusters"] - r["k"]) <= 0.2 * r["k"] for r in rows)
    print(f"count within 20 %: {within} / {len(rows)}; mean ARI {np.mean([r['ari'] for r in rows]):.3f}, "
          f"BGM {np.mean([r['bgm_ari'] for r in rows]):.3f}")
    if mclust:
        level = sum(r["ari"] >= r["mclust_ari"] - 0.02 for r in rows)
        faster = sum(r["seconds"] < r["mclust_seconds"] for r in rows)
        print(f"ARI >= mclust's - 0.02: {level} / {len(rows)}; mclust's mean ARI "
              f"{np.mean([r['mclust_ari'] for r in rows]):.3f}, its count within 20 %: "
              f"{sum(abs(r['mclust_clusters'] - r['k']) <= 0.2 * r['k'] for r in rows)}; faster than mclust: "
              f"{faster} / {len(rows)}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
