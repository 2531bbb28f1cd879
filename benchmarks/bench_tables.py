"""DPGMM's defaults against scikit-learn's BayesianGaussianMixture on labelled real tables
(``labelled_tables``: the tuning set, the held-out set, the issue's tables), raw and standardised.

For each variant (a table, raw or standardised) and random_state 0 to S - 1: NMI (``bnpzoo.metrics.nmi``,
the larger entropy) and ARI of the default ``DPGMM()`` and of BGM full and diag (``n_components=20,
max_iter=500``), their means over the seeds, and the clusters used. A variant "holds" a score when
the default's mean is within 0.02 of the better BGM's (or above). Fits run in two worker processes,
one thread each (torch's and the BLAS's), so the seconds are indicative only.

Usage: python benchmarks/bench_tables.py [--set tuning|held-out|issue|all] [--seeds 3] [--json FILE]
       [--params '{"covariance": "diag"}']
"""

import argparse
import json
import os
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

import labelled_tables

MARGIN = 0.02


def _init_worker():
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    threadpool_limits(1)
    warnings.filterwarnings("ignore")


def _fit(task):
    """One fit: (variant, fit label, seed) -> scores."""
    from sklearn.metrics import adjusted_rand_score

    from bnpzoo import DPGMM
    from bnpzoo.metrics import nmi

    variant, label, seed, x, y, params = task
    start = time.perf_counter()
    if label.startswith("BGM"):
        from sklearn.mixture import BayesianGaussianMixture

        est = BayesianGaussianMixture(n_components=20, max_iter=500, covariance_type=label.split()[1],
                                      random_state=seed)
        predicted = est.fit(x).predict(x)
    else:
        predicted = DPGMM(random_state=seed, **params).fit(x).predict(x)
    seconds = time.perf_counter() - start
    return dict(variant=variant, fit=label, seed=seed, nmi=nmi(y, predicted),
                ari=float(adjusted_rand_score(y, predicted)), clusters=int(len(np.unique(predicted))),
                seconds=seconds)


def run(names, seeds, params=None, fits=("DPGMM", "BGM full", "BGM diag"), workers=2):
    """Every fit of every variant of the tables ``names``: a list of ``_fit`` records."""
    tasks = [(variant, label, seed, x, y, params or {})
             for variant, x, y in labelled_tables.variants(names) for label in fits for seed in range(seeds)]
    with ProcessPoolExecutor(workers, initializer=_init_worker) as pool:
        return list(pool.map(_fit, tasks))


def summarise(records, fit="DPGMM"):
    """Per variant: each fit's mean NMI, ARI and clusters; whether ``fit`` holds NMI and ARI."""
    table = {}
    for r in records:
        table.setdefault(r["variant"], {}).setdefault(r["fit"], []).append(r)
    rows = []
    for variant, by_fit in table.items():
        means = {label: {score: float(np.mean([r[score] for r in rs])) for score in ("nmi", "ari", "clusters")}
                 for label, rs in by_fit.items()}
        best = {score: max(means[label][score] for label in means if label.startswith("BGM")) for score in ("nmi", "ari")}
        holds = {score: means[fit][score] >= best[score] - MARGIN for score in ("nmi", "ari")}
        rows.append(dict(variant=variant, means=means, best=best, holds=holds))
    return rows


def report(rows, fit="DPGMM"):
    for row in rows:
        m = row["means"]
        mark = "".join("+" if row["holds"][s] else "-" for s in ("nmi", "ari"))
        print(f"{row['variant']:22s} {mark}  " + "  ".join(
            f"{label} {m[label]['nmi']:.3f}/{m[label]['ari']:.3f} ({m[label]['clusters']:.1f})" for label in m),
            flush=True)
    n = len(rows)
    both = sum(r["holds"]["nmi"] and r["holds"]["ari"] for r in rows)
    print(f"{fit} within {MARGIN} of the better BGM: NMI {sum(r['holds']['nmi'] for r in rows)}/{n}, "
          f"ARI {sum(r['holds']['ari'] for r in rows)}/{n}, both {both}/{n}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", default="held-out", choices=[*labelled_tables.SETS, "all"])
    parser.add_argument("--tables", default=None, help="comma-separated table names (instead of --set)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--params", default="{}", help="DPGMM's arguments, as JSON")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    sets = labelled_tables.SETS if args.set == "all" else {args.set: labelled_tables.SETS[args.set]}
    names = args.tables.split(",") if args.tables else [name for tables in sets.values() for name in tables]
    print(f"load before the run: {os.getloadavg()[0]:.2f}; two processes, one thread each", flush=True)
    records = run(names, args.seeds, json.loads(args.params))
    report(summarise(records))
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
