"""The default DPGMM over random_states, with merges judged after up to ``vmm.REFINE`` iterations
(``inference.stick_mixture.vmm``, issue 47) and judged after one as before ("without",
``REFINE = 1``): clusters and NMI for random_state 0 to S - 1 on the labelled tables of
``bench_moves.py`` and seven of its own (palmerpenguins' species, openintro's bdims by sex, MASS
Cars93 by type, ISLR Auto by origin, MASS Pima.te by type and cats by sex, DAAG cuckoos by host
species), and on generated cases (three 1-D clusters of 100,000 rows, 10 or 8 sd apart, rotated
elongated clouds, one cloud, two blobs of spreads 0.1 and 5); ``--settings with`` runs the
default alone.
``--shuffle`` fits random_state s on the rows in the order of permutation s: every sum in another
order, as another processor or thread count would round it. ``--data-seed`` draws the generated
cases anew. ``--threads 1,2`` fits each random_state once a thread count (``BNPZOO_THREADS``) and
prints how many fits gave the first count's partition exactly (NMI 1 between them).

    python benchmarks/bench_seeds.py [--sets ...] [--seeds 5] [--shuffle] [--data-seed 123]
                                     [--threads 1,2] [--settings without,with] [--json FILE]
"""

import argparse
import json
import os
import time

import numpy as np

import bench_moves
from bnpzoo import DPGMM
from bnpzoo.inference.stick_mixture import vmm
from bnpzoo.metrics import nmi

bench_moves.R_SETS.update({"penguins": ("palmerpenguins", "penguins", "species", ("island", "sex", "year")),
                           "bdims": ("openintro", "bdims", "sex", ()), "cars93": ("MASS", "Cars93", "Type", ()),
                           "auto": ("ISLR", "Auto", "origin", ("name",)), "pima-te": ("MASS", "Pima.te", "type", ()),
                           "cats": ("MASS", "cats", "Sex", ()), "cuckoos": ("DAAG", "cuckoos", "species", ("id",))})


def generated(name, rng):
    if name.startswith("one-d"):  # one-d: 10 sd apart; one-d-8: 8
        gap = float(name[6:] or 10)
        z = rng.integers(0, 3, 100_000)
        return (np.array([-gap, 0.0, gap])[z] + rng.normal(size=z.size))[:, None], z
    if name == "rotated":
        parts = []
        for n, centre, angle in ((300, (-12, 0), 0.3), (1000, (0, 10), 1.2), (3000, (12, -4), 2.5)):
            rotation = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
            parts.append(rng.normal(size=(n, 2)) * [4, 0.5] @ rotation.T + centre)
        return np.vstack(parts), np.repeat([0, 1, 2], [300, 1000, 3000])
    if name == "one-cloud":
        return rng.normal(size=(500, 2)) @ np.array([[2, 0.5], [0, 1]]) + 3, np.zeros(500, int)
    z = np.repeat([0, 1], 400)  # two spreads
    return np.where(z[:, None] == 0, rng.normal(0, 0.1, (800, 2)), rng.normal(25, 5, (800, 2))), z


GENERATED = ("one-d", "one-d-8", "rotated", "one-cloud", "two-spreads")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default=",".join([*GENERATED, *bench_moves.SKLEARN, *bench_moves.R_SETS]))
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--shuffle", action="store_true", help="random_state s fits the rows in permutation s")
    parser.add_argument("--data-seed", type=int, default=123, help="the generated cases' draw")
    parser.add_argument("--threads", default=None, help="thread counts to fit each random_state with, e.g. 1,2")
    parser.add_argument("--settings", default="without,with", help="without, with, or both")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    threads = args.threads.split(",") if args.threads else [os.environ.get("BNPZOO_THREADS", "auto")]
    refine = vmm.REFINE
    rows = []
    print(f"BNPZOO_THREADS={','.join(threads)}, load {os.getloadavg()[0]:.1f}, "
          f"rows {'shuffled' if args.shuffle else 'in order'}")
    for name in args.sets.split(","):
        x, labels = (generated(name, np.random.default_rng(args.data_seed)) if name in GENERATED
                     else bench_moves.load(name))
        for setting in args.settings.split(","):
            vmm.REFINE = refine if setting == "with" else 1
            fits, agree = [], 0
            for seed in range(args.seeds):
                order = np.random.default_rng(100 + seed).permutation(len(x)) if args.shuffle else slice(None)
                data = x[order].astype(np.float32)
                partitions = []
                for count in threads:
                    os.environ["BNPZOO_THREADS"] = count
                    start = time.perf_counter()
                    est = DPGMM(random_state=seed).fit(data)
                    seconds = time.perf_counter() - start
                    partitions.append(est.predict(data))
                agree += all(nmi(partitions[0], other) == 1.0 for other in partitions[1:])
                fits.append((int(est.n_clusters_), float(nmi(labels[order], partitions[0])), seconds))
            k, score, seconds = zip(*fits)
            row = dict(data=name, setting=setting, covariance=est.covariance_type_, k=k, nmi=score,
                       seconds=float(np.mean(seconds)), same_partition_across_threads=agree)
            rows.append(row)
            print(f"{name:12s} {setting:8s} {row['covariance']:9s} k {list(k)}  NMI mean {np.mean(score):.3f} "
                  f"min {np.min(score):.3f}  {row['seconds']:.2f} s a fit"
                  + (f"  same partition with {args.threads} threads: {agree} of {args.seeds}" if args.threads else ""),
                  flush=True)
    vmm.REFINE = refine
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
