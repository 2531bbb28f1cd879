"""Well-separated clusters whose features span five orders of magnitude: every learner of
``PYPGGM(likelihood="gaussian")`` (issue 64: ``svmm`` gave NMI 0.751 with 5 clusters of 8 on 4afbba0).

Two generators, each 6,000 x 10 with 8 clusters: ``decades`` (centres N(0, 6^2), unit noise, feature
j multiplied by 10^(5 j / 9) in a random order: 1e-2 to 1e3) and ``units`` (``bench_pyp_ggm``'s
blobs in mixed units, 10^U(-2, 3) a feature, times 10^U(-1, 1) more). NMI, clusters, fit seconds.

Usage:
    python benchmarks/bench_heavy_scale.py [--seeds 0 1 2]
"""

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from bench_pyp_ggm import units_blobs  # noqa: E402

from bnpzoo import PYPGGM  # noqa: E402
from bnpzoo.metrics import nmi  # noqa: E402
from bnpzoo.mixture import STOCHASTIC  # noqa: E402

N, D, K = 6000, 10, 8


def decades(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres, labels = rng.normal(0, 6, (K, D)), rng.integers(0, K, N)
    x = centres[labels] + rng.normal(size=(N, D))
    return x * np.logspace(-2, 3, D)[rng.permutation(D)], labels


def units(seed: int) -> tuple[np.ndarray, np.ndarray]:
    x, labels = units_blobs(seed, n=N, d=D, k=K)
    return x * 10 ** np.random.default_rng(seed + 100).uniform(-1, 1, D), labels


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    learners = ["vmm", *STOCHASTIC]
    print(f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}\n")
    print("| data | orders of magnitude | " + " | ".join(learners) + " |\n|---|---|" + "---|" * len(learners))
    for generator in (decades, units):
        for seed in args.seeds:
            x, labels = generator(seed)
            cells = []
            for learner in learners:
                start = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est = PYPGGM(inference=learner, likelihood="gaussian", random_state=seed).fit(x)
                cells.append(f"{nmi(labels, est.predict(x)):.3f} / {est.n_clusters_} / "
                             f"{time.perf_counter() - start:.1f} s")
            spread = np.log10(x.std(0).max() / x.std(0).min())
            print(f"| {generator.__name__} {seed} | {spread:.1f} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
