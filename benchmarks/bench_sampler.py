"""The stick mixtures' sampler (``inference="gibbs"``) against the default variational fit, same run.

Sections (``--sections``):

- ``scale``: 100,000 x 16 rows of 20 Gaussian clusters (``bnpzoo.data.blobs``, and bench_pass's
  ``gaussians`` generator, random covariances, unequal sizes): ``DPGMM()`` (vmm) against
  ``DPGMM(inference="gibbs", num_chains=4)`` with ``--warmup`` and ``--kept`` sweeps a chain: seconds
  (and their ratio), NMI, R-hat of the number of clusters and of the log joint. Both learners fit a
  small data set first, so that neither pays the process's imports and first calls on the clock.
- ``discount``: Pitman-Yor draws (d = 0.5) and Dirichlet-process draws (d = 0) of two generators,
  fitted by the sampler with discount 0 and 0.5: the clusters under 1 % of the rows (mean over the
  kept sweeps) and the posterior number of clusters (mean and 5-95 % range) against the truth's.
  ``pyp_ggm``: the zoo's own program (4,000 x 6, alpha 2, one scale 1, means N(0, 20)), fitted with
  its family (``covariance="fixed", scale=1``); ``crp``: a Chinese-restaurant partition of 3,000
  rows (alpha 1) with diagonal Gaussian clusters in 4-D (means N(0, 5^2), spreads 0.3 to 1.5 per
  feature), fitted with the default family.

Usage: python benchmarks/bench_sampler.py [--sections scale,discount] [--seeds 0,1,2] [--warmup 5]
[--kept 20] (the discount section's table: ``--warmup 200 --kept 200``)
"""

import argparse
import os
import time

import bnpzoo  # noqa: F401  # first, as in a user's script
import numpy as np
import torch

from bnpzoo import DPGMM, PYPGGM
from bnpzoo.data import blobs
from bnpzoo.metrics import nmi


def environment() -> str:
    return f"torch threads {torch.get_num_threads()}, load {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores"


def bench_scale(seeds, warmup, kept):
    from bench_pass import gaussians

    small = blobs(n=2_000, d=16, k=4, seed=0).X  # both learners once first: imports and first calls off the clock
    DPGMM(random_state=0).fit(small)
    DPGMM(inference="gibbs", num_chains=4, warmup=2, max_iter=2, random_state=0).fit(small)
    print("| data | vmm s | NMI | K | gibbs s | ratio | NMI | K (last, each chain) | R-hat K | R-hat log joint |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for seed in seeds:
        for name, (x, y) in (("blobs", (lambda d: (d.X, d.labels))(blobs(n=100_000, d=16, k=20, seed=seed))),
                             ("gaussians", gaussians(100_000, d=16, k=20, seed=seed))):
            start = time.perf_counter()
            vi = DPGMM(random_state=seed).fit(x)
            vi_seconds = time.perf_counter() - start
            start = time.perf_counter()
            chains = DPGMM(inference="gibbs", num_chains=4, warmup=warmup, max_iter=kept, random_state=seed).fit(x)
            seconds = time.perf_counter() - start
            last = chains.samples_["n_clusters"][:, -1].int().tolist()
            print(f"| {name} seed {seed} | {vi_seconds:.1f} | {nmi(y, vi.predict(x)):.3f} | {vi.n_clusters_} | "
                  f"{seconds:.1f} | {seconds / vi_seconds:.1f} | {nmi(y, chains.predict(x)):.3f} | {last} | "
                  f"{chains.rhat_['n_clusters']:.3f} | {chains.rhat_['log_joint']:.3f} |", flush=True)


def pyp_ggm_draw(seed, discount):
    import pyro

    from bnpzoo.models import pyp_ggm

    pyro.set_rng_seed(seed)
    trace = pyro.poutine.trace(pyp_ggm.model).get_trace(None, truncation=300, alpha=2.0, discount=discount, rho=2.0,
                                                        prior_precision=0.05, num_data=4000, dim=6)
    return trace.nodes["x"]["value"].numpy(), trace.nodes["z"]["value"].numpy(), 2.0


def crp_draw(seed, discount, n=3000, d=4, alpha=1.0):
    rng = np.random.default_rng(seed)
    labels, counts = np.zeros(n, dtype=int), [1]
    for i in range(1, n):
        weights = np.array([c - discount for c in counts] + [alpha + len(counts) * discount])
        table = rng.choice(len(weights), p=weights / weights.sum())
        counts.append(1) if table == len(counts) else counts.__setitem__(table, counts[table] + 1)
        labels[i] = table
    means = rng.normal(0, 5, (len(counts), d))
    spreads = rng.uniform(0.3, 1.5, (len(counts), d))
    return (means[labels] + rng.normal(size=(n, d)) * spreads[labels]).astype(np.float32), labels, alpha


def bench_discount(seeds, warmup, kept):
    print("| generator | truth d | draw | clusters under 1 % (of all) | fit d = 0: under 1 %, K [5-95 %] | "
          "fit d = 0.5: under 1 %, K [5-95 %] | seconds |")
    print("|---|---|---|---|---|---|---|")
    for generator, draw, family in (("pyp_ggm", pyp_ggm_draw, dict(covariance="fixed", scale=1.0)),
                                    ("crp", crp_draw, {})):
        for truth in (0.5, 0.0):
            for seed in seeds:
                x, z, alpha = draw(seed, truth)
                sizes = np.bincount(z)[np.bincount(z) > 0]
                cells, start = [], time.perf_counter()
                for d in (0.0, 0.5):
                    fit = PYPGGM(inference="gibbs", discount=d, alpha=alpha, num_chains=1, warmup=warmup,
                                 max_iter=kept, random_state=seed, **family).fit(x)
                    k = fit.samples_["n_clusters"].flatten().numpy()
                    small = fit.samples_["n_small"].flatten().numpy().mean()
                    cells.append(f"{small:.1f}, {k.mean():.1f} [{np.quantile(k, 0.05):.0f}-{np.quantile(k, 0.95):.0f}]")
                print(f"| {generator} | {truth} | {seed} | {(sizes < 0.01 * len(z)).sum()} of {len(sizes)} | "
                      f"{cells[0]} | {cells[1]} | {time.perf_counter() - start:.0f} |", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sections", default="scale,discount")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--kept", type=int, default=20)
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    print(environment())
    import warnings

    from bnpzoo.base import ConvergenceWarning

    warnings.simplefilter("ignore", ConvergenceWarning)  # the table shows R-hat itself
    for section in args.sections.split(","):
        {"scale": bench_scale, "discount": bench_discount}[section](seeds, args.warmup, args.kept)
    print(environment())


if __name__ == "__main__":
    main()
