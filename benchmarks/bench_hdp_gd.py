"""HDPGD ([HDP-GD]) batch VI against online VI, and scikit-learn's BayesianGaussianMixture (BGM, diag)
on the same proportions, raw and logit-transformed (what a user would try first), in the same run.

Data: proportions drawn from ``models.hdp_gd`` (2,000 x 24 in 4 groups, two seeds; 100,000 x 64
in 20 groups sharing 12 atoms, 48 relevant and 16 irrelevant features), and digits as
proportions in 5 groups, with and without 20 irrelevant parts. Reported per fit: the bound (vi),
NMI, clusters used, wall time, passes over the data; the time over BGM diag's; and for digits with
irrelevant parts, how the saliency ranks them against the informative pixels. Then online VI
against batch VI on ten draws of random shape (``shaped_draw``: rows, relevant and irrelevant
features, atoms and groups drawn from random_state 0 to 9), none used to choose a default: NMI
and the saliency of the least relevant and the most irrelevant feature.

Writes benchmarks/reports/hdp_gd.md and hdp_gd.png. Usage:
    python benchmarks/bench_hdp_gd.py [--out DIR] [--quick]
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

from bnpzoo import HDPGD, data  # noqa: E402
from bnpzoo.metrics import clusters_used, nmi  # noqa: E402


def large(n):
    rng_groups = tuple(tuple(int(a) for a in np.random.default_rng(g).choice(12, size=5, replace=False))
                       for g in range(20))
    return data.hdp_gd_sample(n, seed=3, relevant=48, irrelevant=16, group_atoms=rng_groups)


def shaped_draw(seed):
    """(a draw of ``models.hdp_gd`` with 1,000 to 3,000 rows, 4 to 20 relevant and 2 to 12 irrelevant
    features, 4 to 7 atoms shared by 2 to 5 groups, each of 2 to 5 atoms; its relevant features)."""
    rng = np.random.default_rng(9000 + seed)
    atoms, n_groups = int(rng.integers(4, 8)), int(rng.integers(2, 6))
    group_atoms = tuple(tuple(sorted(rng.choice(atoms, size=int(rng.integers(2, min(5, atoms) + 1)),
                                                replace=False).tolist())) for _ in range(n_groups))
    relevant = int(rng.integers(4, 21))
    return data.hdp_gd_sample(int(rng.integers(10, 31)) * 100, seed=9000 + seed, relevant=relevant,
                              irrelevant=int(rng.integers(2, 13)), group_atoms=group_atoms), relevant


def bench_shapes():
    """Online VI against batch VI on ``shaped_draw`` 0 to 9: a table, and the draws meeting issue 50's
    line (NMI within 0.02 of batch VI's, every relevant saliency >= 0.9, every irrelevant <= 0.1)."""
    rows, met = [], 0
    for seed in range(10):
        ds, relevant = shaped_draw(seed)
        cells = {}
        for inference in ("vi", "online-vi"):
            start = time.perf_counter()
            est = HDPGD(inference=inference, random_state=seed).fit(ds.X, ds.groups)
            cells[inference] = (nmi(ds.labels, est.labels_), est.saliency_[:relevant].min(),
                                est.saliency_[relevant:].max(), time.perf_counter() - start)
        (b_nmi, b_rel, b_irr, b_s), (o_nmi, o_rel, o_irr, o_s) = cells["vi"], cells["online-vi"]
        met += o_nmi >= b_nmi - 0.02 and o_rel >= 0.9 and o_irr <= 0.1
        rows.append((seed, f"{len(ds.X)} x {ds.X.shape[1]}, {relevant} relevant, {len(set(ds.groups))} groups",
                     f"{b_nmi:.3f}", f"{o_nmi:.3f}", f"{b_rel:.2f} / {b_irr:.2f}", f"{o_rel:.2f} / {o_irr:.2f}",
                     f"{b_s:.1f}", f"{o_s:.1f}"))
        print(rows[-1], flush=True)
    header = ["random_state", "draw", "vi NMI", "online-vi NMI", "vi saliency: least relevant / most irrelevant",
              "online-vi saliency", "vi s", "online-vi s"]
    return table(rows, header), met


def composition(ds):
    """The rows as D + 1 parts summing to 1 (the rest appended where it is implicit)."""
    return ds.X if np.allclose(ds.X.sum(1), 1) else np.concatenate([ds.X, 1 - ds.X.sum(1, keepdims=True)], 1)


def fit_ours(ds, inference):
    start = time.perf_counter()
    est = HDPGD(inference=inference, random_state=0).fit(ds.X, ds.groups)
    seconds = time.perf_counter() - start
    return est, est.labels_, seconds


def fit_bgm(X):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = BayesianGaussianMixture(n_components=30, covariance_type="diag", random_state=0,
                                        weight_concentration_prior_type="dirichlet_process").fit(X)
    pred = model.predict(X)
    return pred, time.perf_counter() - start


def table(rows, header):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(Path(__file__).parent / "reports"))
    parser.add_argument("--quick", action="store_true", help="20,000 rows instead of 100,000 for the large set")
    args = parser.parse_args()
    sets = {"hdp-gd seed 0 (2,000 x 24)": data.load("hdp-gd:seed=0"),
            "hdp-gd seed 1 (2,000 x 24)": data.load("hdp-gd:seed=1"),
            "digits-proportions (1,797 x 64)": data.load("digits-proportions"),
            "digits-proportions + 20 irrelevant (1,797 x 84)": data.load("digits-proportions:noise=20")}
    n_large = 20000 if args.quick else 100000
    sets[f"hdp-gd large ({n_large:,} x 64, 20 groups)"] = large(n_large)

    rows, traces, saliency = [], {}, None
    for name, ds in sets.items():
        parts = composition(ds)
        bgm_pred, bgm_seconds = fit_bgm(parts[:, :-1])
        logit_pred, logit_seconds = fit_bgm(np.log(parts[:, :-1]) - np.log(parts[:, -1:]))
        rows.append((name, "BGM diag (raw)", "-", f"{nmi(ds.labels, bgm_pred):.3f}", clusters_used(bgm_pred),
                     f"{bgm_seconds:.2f}", "1.00", "-"))
        rows.append((name, "BGM diag (log-ratio)", "-", f"{nmi(ds.labels, logit_pred):.3f}", clusters_used(logit_pred),
                     f"{logit_seconds:.2f}", f"{logit_seconds / bgm_seconds:.2f}", "-"))
        for inference in ("vi", "online-vi"):
            est, pred, seconds = fit_ours(ds, inference)
            bound = f"{est.elbo_trace_[-1] / len(ds.X):.3f}" if inference == "vi" else "-"
            rows.append((name, inference, bound, f"{nmi(ds.labels, pred):.3f}", est.n_clusters_, f"{seconds:.2f}",
                         f"{seconds / bgm_seconds:.2f}", est.n_passes_))
            traces[(name, inference)] = np.asarray(est.elbo_trace_) / len(ds.X)
            if "irrelevant" in name and inference == "vi":
                saliency = est.saliency_
        print(*rows[-4:], sep="\n", flush=True)

    shapes_table, met = bench_shapes()
    informative = np.flatnonzero(data.digits().X.std(0) > 0.05)
    below = int((saliency[informative] <= saliency[64:].max()).sum())

    fig, axes = plt.subplots(1, 2, figsize=(13, 4))
    axes[0].bar(np.arange(84), saliency, color=["C0"] * 64 + ["C3"] * 20)
    axes[0].set(xlabel="feature (red: the 20 irrelevant parts)", ylabel="E[saliency]",
                title="digits-proportions + 20 irrelevant: saliency (vi)")
    for (name, inference), trace in traces.items():
        if inference == "vi":
            axes[1].plot(np.arange(1, trace.size + 1), trace, label=name)
    axes[1].set(xlabel="iteration", ylabel="bound per observation", title="batch VI bound (never decreases)",
                xscale="log")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "hdp_gd.png", dpi=110)

    header = ["data", "learner", "bound / obs", "NMI", "clusters", "seconds", "time / BGM diag (raw)", "passes"]
    report = f"""# HDPGD: batch and online VI against BGM

Generated by `benchmarks/bench_hdp_gd.py` on {datetime.date.today()} ({platform.machine()}, {os.cpu_count()} cores,
torch {torch.__version__}, {torch.get_num_threads()} threads, load average at start {os.getloadavg()[0]:.2f}).
Defaults throughout (truncation 30 global / 15 per group; online-vi: memoized passes over at most
20 batches of at least 1,000 rows; BGM: 30 components, diag, Dirichlet-process weights); no fit is told the
number of clusters. BGM sees the D proportions as numbers, or their log-ratios
ln(Y_l / (1 - sum Y)); it has no groups.

{table(rows, header)}

Saliency on digits-proportions with 20 irrelevant parts (vi): {below} of the {len(informative)} informative
pixels (standard deviation over 0.05; the constant border pixels left out) rank at or below the most
salient irrelevant part; largest irrelevant saliency {saliency[64:].max():.3f}, smallest informative
{saliency[informative].min():.3f}.

Online VI's fit is memoized VI (Hughes and Sudderth 2013): each batch's sums are kept from its
last visit and the global factors take batch VI's updates from their totals after every batch
(`inference/hdp_gd/learner.py`; the record also keeps each row's relevances, as batch VI does), so
it converges to batch VI's fixed points, in fewer passes; a stream (`partial_fit`) takes
Algorithm 2's steps. Both learners
stop when the bound and the saliencies settle, then try 5 bound-checked merges judged on all the
rows, going on while one is kept. Without merges batch VI stopped at a fixed point with 22 atoms
for 12 on 100,000 rows (NMI 0.84).

## Online VI against batch VI on draws of every shape (issue 50)

{shapes_table}

Draws meeting issue 50's line (online NMI within 0.02 of batch VI's, every relevant saliency at
least 0.9 and every irrelevant at most 0.1): {met} of 10.

"""
    (out / "hdp_gd.md").write_text(report)
    print(report)


if __name__ == "__main__":
    main()
