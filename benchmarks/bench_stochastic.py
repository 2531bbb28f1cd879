"""[DPM-SGA]'s experiment on our data: batch `vmm` against every stochastic learner, with
scikit-learn's BayesianGaussianMixture (spherical) in the same run.

1. digits (1797 x 64, truncation 50) and blobs (100,000 x 64, 50 true clusters, truncation 100):
   NMI, ACC, clusters used, fit seconds, time as a fraction of batch vmm ([DPM-SGA] Fig. 1-4,
   Table 2) and of BGM; a figure of the bound ([PYPM-sVMM] eq. (22)-(23), per sample, on the fixed
   evaluation minibatch) against wall time for every learner.
2. predict_proba on 100,000 x 64 with 100 clusters against a float32 matrix product of the same
   shapes (x @ W, W of 64 x 100, a fresh N x K result like predict_proba's), best of 30
   interleaved repeats: the rate 2 N D K / seconds of each. Run first: on this shared machine
   the allocator's state after the fits shifts both timings.

Writes a markdown report and a figure (default: benchmarks/reports/). Usage:
    python benchmarks/bench_stochastic.py [--out DIR] [--quick]
"""

import argparse
import datetime
import os
import platform
import time
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.mixture import BayesianGaussianMixture  # noqa: E402

from bnpzoo import DPGMM  # noqa: E402
from bnpzoo.data import blobs, digits  # noqa: E402
from bnpzoo.mixture import STOCHASTIC  # noqa: E402
from bnpzoo.metrics import acc, clusters_used, nmi  # noqa: E402


def fit_timed(make, X):
    start = time.perf_counter()
    model = make().fit(X)
    pred = model.predict(X)
    return model, pred, time.perf_counter() - start


def bench_clustering(name, data, truncation, max_iter):
    X, y = data.X, data.labels
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        _, bgm_pred, bgm_s = fit_timed(lambda: BayesianGaussianMixture(
            n_components=truncation, covariance_type="spherical", random_state=0,
            weight_concentration_prior_type="dirichlet_process"), X)
    rows = [("BGM spherical (scikit-learn)", bgm_pred, bgm_s)]
    _, vmm_pred, vmm_s = fit_timed(lambda: DPGMM(truncation=truncation, inference="vmm", random_state=0), X)
    rows.append(("vmm (batch)", vmm_pred, vmm_s))
    traces = {}
    for learner in STOCHASTIC:
        est, pred, seconds = fit_timed(lambda: DPGMM(truncation=truncation, inference=learner, max_iter=max_iter,
                                                    random_state=0), X)
        rows.append((learner, pred, seconds))
        traces[learner] = (np.asarray(est.elbo_seconds_), np.asarray(est.elbo_trace_) / X.shape[0])
    lines = [f"**{name}** ({X.shape[0]} x {X.shape[1]}, truncation {truncation})", "",
             "| learner | NMI | ACC | clusters used | seconds | time / vmm | time / BGM |",
             "|---|---|---|---|---|---|---|"]
    for label, pred, seconds in rows:
        lines.append(f"| {label} | {nmi(y, pred):.4f} | {acc(y, pred):.4f} | {clusters_used(pred)} | {seconds:.2f} "
                     f"| {seconds / vmm_s:.3f} | {seconds / bgm_s:.3f} |")
    fastest = min(rows[2:], key=lambda r: r[2])
    lines += ["", f"fastest stochastic learner: {fastest[0]}, {fastest[2]:.2f} s = {fastest[2] / bgm_s:.3f} of BGM's "
              f"{bgm_s:.2f} s", ""]
    return lines, traces, dict(vmm=vmm_s, bgm=bgm_s)


def bench_predict_proba(repeats=30):
    data = blobs(n=100_000, d=64, k=100, seed=1)
    est = DPGMM(truncation=150, inference="natgrad-svi", random_state=0).fit(data.X)
    n, d, k = data.X.shape[0], data.X.shape[1], est.n_clusters_
    x, w = torch.as_tensor(data.X), torch.randn(d, k)
    best = {"matmul": np.inf, "predict_proba": np.inf}
    for _ in range(repeats):  # interleaved, so both see the same machine load
        for label, call in (("matmul", lambda: x @ w), ("predict_proba", lambda: est.predict_proba(data.X))):
            start = time.perf_counter()
            call()
            best[label] = min(best[label], time.perf_counter() - start)
    flops = 2 * n * d * k
    rate = {label: flops / s / 1e9 for label, s in best.items()}
    return [f"**predict_proba** ({n} x {d}, {k} clusters; best of {repeats} interleaved runs)", "",
            "| operation | seconds | GFLOP/s (2 N D K / s) |", "|---|---|---|",
            *[f"| {label} | {best[label]:.4f} | {rate[label]:.1f} |" for label in best], "",
            f"predict_proba runs at {rate['predict_proba'] / rate['matmul']:.2f} of the float32 matmul rate", ""]


def figure(panels, path):
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.5))
    for ax, (name, traces, marks) in zip(np.atleast_1d(axes), panels):
        for learner, (seconds, bound) in traces.items():
            ax.plot(seconds, bound, ".-", label=learner)
        for label, style in (("vmm", "--"), ("bgm", ":")):
            ax.axvline(marks[label], color="k", ls=style, lw=1, label=f"{label} fit time")
        ax.set(xscale="log", xlabel="wall time (s)", ylabel="bound per sample (evaluation minibatch)", title=name)
        low = np.median([b[-1] for _, b in traces.values()])
        ax.set_ylim(bottom=low - 2 * (np.max([b.max() for _, b in traces.values()]) - low) - 0.5)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(Path(__file__).parent / "reports"))
    parser.add_argument("--quick", action="store_true", help="10,000 blobs instead of 100,000 (smoke run)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    DPGMM(truncation=5, inference="sga", max_iter=20, random_state=0).fit(digits().X[:200])  # warm-up
    n_blobs = 10_000 if args.quick else 100_000
    proba_lines = bench_predict_proba()  # first, before the fits below churn the allocator
    print("\n".join(proba_lines), flush=True)
    header = [f"# Stochastic learners, {datetime.date.today()}", "",
              f"Machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads, "
              f"torch {torch.__version__}, Python {platform.python_version()}, CPU only; bnpzoo's fits whose step is "
              "below 2e7 rows x clusters x features (every minibatch learner, vmm on digits) run on one thread "
              f"(bnpzoo.threads); load average {os.getloadavg()[0]:.2f} at the start.", ""]
    report, panels = [], []
    for name, data, truncation in (("digits", digits(), 50),
                                   ("blobs", blobs(n=n_blobs, d=64, k=50, seed=0), 100)):
        lines, traces, marks = bench_clustering(name, data, truncation, max_iter=500)
        report += lines
        panels.append((name, traces, marks))
        print("\n".join(lines), flush=True)
    figure(panels, out / "stochastic.png")
    (out / "stochastic.md").write_text("\n".join(header + report + proba_lines
                                                 + ["![bound against wall time](stochastic.png)", ""]))
    print(f"report: {out / 'stochastic.md'}, figure: {out / 'stochastic.png'}")


if __name__ == "__main__":
    main()
