"""Fits past memory: DP-GMM on N x 64 float32 blobs (100 well-separated clusters) read from a
memory-mapped .npy file, for N = 1e5, 1e6, 1e7 (2.56 GB on disk), beside scikit-learn's
BayesianGaussianMixture (spherical) where it finishes in reasonable time (default N <= 1e5; at 1e6
it took 946 s and 5.5 GB in an earlier run).

Each fit runs in fresh processes (``--child``), so its peak resident memory (ru_maxrss) is its own:
wall time of fit + predict over every row, the fit's system time, NMI against the generating labels,
clusters used. The SVI learners also run data-parallel in P processes on the same file (``torchrun
--nproc-per-node P``, each process fitting and labelling its share of the rows, ``data_parallel=True``);
their peak is the largest of the processes', their system time the sum. Writes a markdown table and a
log-log figure of time against N.

Usage:
    python benchmarks/bench_scale.py [--sizes 1e5 1e6 1e7] [--learners natgrad-svi vmm] [--processes 1 2]
                                     [--truncation 200] [--bgm-max 1e5] [--work /tmp/bnpzoo-scale] [--out DIR]
"""

import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

D, K, CHUNK = 64, 100, 1_000_000


def generate(n: int, folder: Path) -> Path:
    """blobs of ``n`` rows into folder/blobs-<n>.npy (and -labels.npy), written chunk by chunk."""
    path = folder / f"blobs-{n}.npy"
    if path.exists():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    centres = rng.normal(0.0, 10.0, size=(K, D))
    out = np.lib.format.open_memmap(path.with_suffix(".partial"), mode="w+", dtype=np.float32, shape=(n, D))
    labels = np.empty(n, dtype=np.int32)
    for start in range(0, n, CHUNK):
        stop = min(n, start + CHUNK)
        labels[start:stop] = rng.integers(0, K, size=stop - start)
        out[start:stop] = centres[labels[start:stop]] + rng.standard_normal((stop - start, D))
    out.flush()
    del out
    np.save(folder / f"blobs-{n}-labels.npy", labels)
    os.replace(path.with_suffix(".partial"), path)
    return path


def child(path: str, learner: str, truncation: int) -> dict | None:
    """One fit in this process, or this rank's share of a data-parallel one (started by torchrun):
    its record (on rank 0; None on the others)."""
    import torch

    from bnpzoo.inference import data_parallel
    from bnpzoo.metrics import nmi

    group = data_parallel.world_group() if data_parallel.launched() else None
    start_usage = resource.getrusage(resource.RUSAGE_SELF)
    labels = np.load(path.replace(".npy", "-labels.npy"))
    if group is not None:
        torch.distributed.barrier()
    start = time.perf_counter()
    if learner == "bgm":
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.mixture import BayesianGaussianMixture

        X = np.load(path)  # in memory: scikit-learn copies it anyway
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model = BayesianGaussianMixture(n_components=truncation, covariance_type="spherical", random_state=0,
                                            weight_concentration_prior_type="dirichlet_process").fit(X)
        fit_seconds = time.perf_counter() - start
    else:
        from bnpzoo import DPGMM

        X = np.load(path, mmap_mode="r")
        X = X if group is None else data_parallel.rank_rows(X)
        model = DPGMM(inference=learner, truncation=truncation, random_state=0, data_parallel=group is not None).fit(X)
        fit_seconds = time.perf_counter() - start
    fit_usage = resource.getrusage(resource.RUSAGE_SELF)
    pred = data_parallel.gather_rows(torch.as_tensor(model.predict(X)), group).numpy()
    seconds = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    (system,) = data_parallel.all_sum([torch.tensor(fit_usage.ru_stime - start_usage.ru_stime)], group)
    peak = data_parallel.largest(usage.ru_maxrss, group)
    if data_parallel.rank(group) != 0:
        return None
    return {"learner": learner, "processes": data_parallel.size(group), "n": len(labels),
            "fit_seconds": round(fit_seconds, 2), "seconds": round(seconds, 2), "nmi": round(nmi(labels, pred), 4),
            "clusters": int(len(np.unique(pred))), "peak_gb": round(peak / 1e6, 3),
            "fit_system_seconds": round(float(system), 2)}


def run(*arguments, processes=1) -> str:
    """The last line this script prints when run with ``arguments``, in a fresh process (``processes``
    > 1: that many, started by torchrun). (Everything heavy runs in children: a child's ru_maxrss
    starts from its parent's resident memory when it is forked, which writing the data would have
    inflated by the file's size.)"""
    launcher = [] if processes == 1 else ["-m", "torch.distributed.run", "--nproc-per-node", str(processes)]
    out = subprocess.run([sys.executable, *launcher, __file__, *map(str, arguments)], capture_output=True, text=True,
                         check=True)
    return out.stdout.strip().splitlines()[-1]


def report(rows, args, load, threads) -> str:
    lines = [f"# Scale: DP-GMM from a memory-mapped file ({datetime.date.today()})", "",
             f"Machine: {platform.platform()}, {os.cpu_count()} cores; torch threads {threads}; load average "
             f"before the run {load:.2f}. Data: N x {D} float32 blobs, {K} clusters (centres N(0, 10^2), unit "
             f"noise), truncation {args.truncation}; bnpzoo reads the .npy file in place (np.load(path, "
             "mmap_mode='r')), BGM (spherical) gets it in memory. Each fit in a fresh process; time = fit + "
             "predict over every row; peak = the process's ru_maxrss. With 2 processes (torchrun, data-parallel): "
             "each reads its half of the file, peak = the larger process's, system time = their sum.", "",
             "| learner | processes | N | fit s | fit + predict s | fit system s | NMI | clusters | peak GB |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['learner']} | {r['processes']} | {r['n']:,} | {r['fit_seconds']} | {r['seconds']} | "
                     f"{r['fit_system_seconds']} | {r['nmi']} | {r['clusters']} | {r['peak_gb']} |")
    return "\n".join(lines) + "\n"


def figure(rows, path: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for learner, processes in dict.fromkeys((r["learner"], r["processes"]) for r in rows):
        mine = [r for r in rows if (r["learner"], r["processes"]) == (learner, processes)]
        label = "BGM spherical (scikit-learn)" if learner == "bgm" else \
            f"{learner}, {processes} process{'es' if processes > 1 else ''}"
        ax.loglog([r["n"] for r in mine], [r["seconds"] for r in mine], "o-", label=label)
    ax.set_xlabel("rows N (64 features)")
    ax.set_ylabel("fit + predict, seconds")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e5, 1e6, 1e7])
    parser.add_argument("--learners", nargs="+", default=["natgrad-svi", "vmm"])
    parser.add_argument("--processes", nargs="+", type=int, default=[1, 2],
                        help="process counts for the SVI learners (vmm and BGM run in one)")
    parser.add_argument("--truncation", type=int, default=200)
    parser.add_argument("--bgm-max", type=float, default=1e5)
    parser.add_argument("--work", default="/tmp/bnpzoo-scale", help="folder for the generated files")
    parser.add_argument("--out", default=str(Path(__file__).parent / "reports"))
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--generate", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        record = child(args.child[0], args.child[1], int(args.child[2]))
        if record is not None:
            print(json.dumps(record))
        return
    if args.generate:
        print(generate(args.generate, Path(args.work)))
        return
    load = os.getloadavg()[0]
    threads = os.environ.get("BNPZOO_THREADS", f"bnpzoo's default (at most {os.cpu_count()}, 1 for small steps)")
    rows = []
    for n in map(int, args.sizes):
        path = run("--generate", n, "--work", args.work)
        for learner in args.learners + (["bgm"] if n <= args.bgm_max else []):
            for processes in args.processes if learner not in ("vmm", "bgm") else [1]:
                rows.append(json.loads(run("--child", path, learner, args.truncation, processes=processes)))
                print(json.dumps(rows[-1]), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scale.md").write_text(report(rows, args, load, threads) + "\n![time against N](scale.png)\n")
    figure(rows, out / "scale.png")
    print((out / "scale.md").read_text())


if __name__ == "__main__":
    main()
