"""Figures: the comparison panel written by ``bnpzoo compare``."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def comparison_figure(records: list, dataset, path) -> None:
    """Bound per iteration, NMI/ACC, and cluster weights for every model x learner."""
    names = [f"{r['model']} / {r['inference']}" for r in records]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for name, r in zip(names, records):
        trace = np.asarray(r["_estimator"].elbo_trace_) / r["n"]
        axes[0].plot(np.arange(1, trace.size + 1), trace, label=name)
    axes[0].set(xscale="log", xlabel="evaluation (vmm: iteration; SVI learners: every 10 steps)",
                ylabel="objective per sample", title="learner's bound")
    axes[0].legend(fontsize=8)

    pos = np.arange(len(records))
    for offset, metric in ((-0.2, "nmi"), (0.2, "acc")):
        values = [r[metric] if r[metric] is not None else np.nan for r in records]
        axes[1].bar(pos + offset, values, width=0.4, label=metric.upper())
    axes[1].set_xticks(pos, names, rotation=15, fontsize=8)
    axes[1].set(ylim=(0, 1), title="clustering vs labels" if dataset.labels is not None else "no labels given")
    axes[1].legend()

    for name, r in zip(names, records):
        w = r["_estimator"].weights_
        w = w.cpu().numpy() if hasattr(w, "cpu") else np.asarray(w)
        axes[2].plot(np.arange(1, w.size + 1), w, "o-", ms=3, label=f"{name} ({r['seconds']:.2f} s)")
    axes[2].set(yscale="log", xlabel="cluster (by weight)", ylabel="weight", title="clusters used")
    axes[2].legend(fontsize=8)
    fig.suptitle(f"bnpzoo compare: {dataset.name} (n={dataset.X.shape[0]}, d={dataset.X.shape[1]})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
