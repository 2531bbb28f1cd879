"""Fits past memory: DP-GMM on N x 64 float32 blobs (100 well-separated clusters) read from a
memory-mapped .npy file, for N = 1e5, 1e6, 1e7 (2.56 GB on disk), beside scikit-learn's
BayesianGaussianMixture (spherical) where it finishes in reasonable time (default N <= 1e5; at 1e6
it took 946 s and 5.5 GB in an earlier run).

Each fit runs in a fresh process (``--child``), so its peak resident memory (ru_maxrss) is its own:
wall time of fit + predict over every row, the fit's system time, NMI against the generating labels,
clusters used. Writes a markdown table and a log-log figure of time against N. One process per fit;
the data-parallel learners (several processes on one file) are not built yet.

Usage:
    python benchmarks/bench_scale.py [--sizes 1e5 1e6 1e7] [--learners natgrad-svi vmm]
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


def child(path: str, learner: str, truncation: int) -> dict:
    """One fit in this process: its record."""
    from bnpzoo.metrics import nmi

    start_usage = resource.getrusage(resource.RUSAGE_SELF)
    labels = np.load(path.replace(".npy", "-labels.npy"))
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
        model = DPGMM(inference=learner, truncation=truncation, random_state=0).fit(X)
        fit_seconds = time.perf_counter() - start
    fit_usage = resource.getrusage(resource.RUSAGE_SELF)
    pred = model.predict(X)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"learner": learner, "n": len(labels), "fit_seconds": round(fit_seconds, 2),
            "seconds": round(time.perf_counter() - start, 2), "nmi": round(nmi(labels, pred), 4),
            "clusters": int(len(np.unique(pred))), "peak_gb": round(usage.ru_maxrss / 1e6, 3),
            "fit_system_seconds": round(fit_usage.ru_stime - start_usage.ru_stime, 2)}


def run(*arguments) -> str:
    """The last line this script prints when run with ``arguments``, in a fresh process. (Everything
    heavy runs in children: a child's ru_maxrss starts from its parent's resident memory when it is
    forked, which writing the data would have inflated by the file's size.)"""
    out = subprocess.run([sys.executable, __file__, *map(str, arguments)], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def report(rows, args, load, threads) -> str:
    lines = [f"# Scale: DP-GMM from a memory-mapped file ({datetime.date.today()})", "",
             f"Machine: {platform.platform()}, {os.cpu_count()} cores; torch threads {threads}; load average "
             f"before the run {load:.2f}. Data: N x {D} float32 blobs, {K} clusters (centres N(0, 10^2), unit "
             f"noise), truncation {args.truncation}; bnpzoo reads the .npy file in place (np.load(path, "
             "mmap_mode='r')), BGM (spherical) gets it in memory. Each fit in a fresh process; time = fit + "
             "predict over every row; peak = the process's ru_maxrss. One process per fit: the data-parallel "
             "learners (two processes on one file) are not built yet.", "",
             "| learner | N | fit s | fit + predict s | fit system s | NMI | clusters | peak GB |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['learner']} | {r['n']:,} | {r['fit_seconds']} | {r['seconds']} | "
                     f"{r['fit_system_seconds']} | {r['nmi']} | {r['clusters']} | {r['peak_gb']} |")
    return "\n".join(lines) + "\n"


def figure(rows, path: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for learner in dict.fromkeys(r["learner"] for r in rows):
        mine = [r for r in rows if r["learner"] == learner]
        ax.loglog([r["n"] for r in mine], [r["seconds"] for r in mine], "o-",
                  label="BGM spherical (scikit-learn)" if learner == "bgm" else learner)
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
    parser.add_argument("--truncation", type=int, default=200)
    parser.add_argument("--bgm-max", type=float, default=1e5)
    parser.add_argument("--work", default="/tmp/bnpzoo-scale", help="folder for the generated files")
    parser.add_argument("--out", default=str(Path(__file__).parent / "reports"))
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--generate", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], int(args.child[2]))))
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
            rows.append(json.loads(run("--child", path, learner, args.truncation)))
            print(json.dumps(rows[-1]), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scale.md").write_text(report(rows, args, load, threads) + "\n![time against N](scale.png)\n")
    figure(rows, out / "scale.png")
    print((out / "scale.md").read_text())


if __name__ == "__main__":
    main()
