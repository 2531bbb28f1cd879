"""Figures: the comparison panel written by ``bnpzoo compare``, and a topic model's prevalence by group."""

import sys

import matplotlib
import matplotlib.ticker
import numpy as np
from matplotlib.figure import Figure

MIN_WEIGHT = 1e-4  # weights below it (scikit-learn's BGM keeps every component) are left out


def new_figure(figsize):
    """A figure through pyplot where the caller's session has loaded it (a notebook then shows it
    inline; ``close`` lets it go), else one outside pyplot (a script, the CLI), which chooses no
    backend for the caller and leaves nothing open."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    return pyplot.figure(figsize=figsize) if pyplot is not None else Figure(figsize=figsize)


def comparison_figure(records: list, dataset, path):
    """Three panels for every fit of ``bnpzoo compare``: its learner's objective (nats per sample;
    vmm's MAP objective, the SVI learners' bound on their evaluation minibatch) against wall time,
    NMI and ACC against the labels (horizontal bars, one row per fit, each with its value), and
    its cluster weights by rank. Series differ by colour (15), and past ten by marker too. Fits without
    a bound trace (scikit-learn's BGM) appear in the last two. The legend counts the clusters that
    hold a row under ``predict``, as the table's ``k_used`` (BGM keeps weights on clusters that hold
    none). Returns the (closed) figure."""
    names = [f"{r['model']} / {r['inference']}" for r in records]
    # tab10's ten colours, then five dark ones of tab20b, each block with its own marker: no two
    # series look alike (compare runs 13)
    palette = list(matplotlib.colormaps["tab10"].colors) + [matplotlib.colormaps["tab20b"].colors[i]
                                                              for i in (0, 4, 8, 12, 16)]
    colours = [palette[i % len(palette)] for i in range(len(records))]
    markers = ["o", "s", "^", "D"]
    marker = [markers[(i // 10 + i // len(palette)) % len(markers)] for i in range(len(records))]
    fig = new_figure((16, 0.35 * len(records) + 3.2))
    axes = fig.subplots(1, 3, gridspec_kw={"width_ratios": [1.2, 1, 1]})
    settled = []  # the later half of every trace sets the panel's range (early values can be far below)
    for name, r, colour, m in zip(names, records, colours, marker):
        est = r["_estimator"]
        seconds = getattr(est, "elbo_seconds_", None)
        if seconds:
            trace = np.asarray(est.elbo_trace_) / r["n"]
            axes[0].plot(seconds, trace, "-", marker=m, ms=3, color=colour, label=name)
            settled.append(trace[len(trace) // 2:])
    if settled:
        low, high = min(t.min() for t in settled), max(t.max() for t in settled)
        axes[0].set_ylim(low - 0.15 * (high - low + 1e-9), high + 0.05 * (high - low + 1e-9))
    axes[0].set(xscale="log", xlabel="seconds since the fit started (log)", ylabel="nats per sample",
                title="each learner's own objective over time")
    axes[0].xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # decades only: no crowded labels

    rows = np.arange(len(records))[::-1]
    for offset, metric, hatch in ((0.2, "nmi", None), (-0.2, "acc", "///")):
        values = [r[metric] if r[metric] is not None else np.nan for r in records]
        bars = axes[1].barh(rows + offset, values, height=0.38, color=colours, hatch=hatch, edgecolor="white",
                            label=metric.upper())
        axes[1].bar_label(bars, labels=["" if np.isnan(v) else f"{v:.2f}" for v in values], padding=2, fontsize=7)
    axes[1].set_yticks(rows, names, fontsize=8)
    axes[1].set(xlim=(0, 1.12), title="NMI (plain) and ACC (hatched) against the labels" if dataset.labels is not None
                else "no labels given")

    for name, r, colour, m in zip(names, records, colours, marker):
        w = np.sort(np.asarray(r["_estimator"].weights_))[::-1]
        w = w[w >= MIN_WEIGHT]
        axes[2].plot(np.arange(1, w.size + 1), w, "-", marker=m, ms=3, color=colour,
                     label=f"{name} ({r['seconds']:.2f} s, {r['k_used']} clusters used)")
    axes[2].set(yscale="log", xlabel="cluster, by weight", ylabel="weight",
                title=f"cluster weights (those above {MIN_WEIGHT:g})")
    axes[2].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    fig.suptitle(f"bnpzoo compare: {dataset.name} (n={dataset.X.shape[0]}, d={dataset.X.shape[1]})")
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    close(fig)
    return fig


def close(fig) -> None:
    """Close ``fig`` where pyplot holds it (``new_figure``); nothing to do for one outside pyplot."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close(fig)


def prevalence_figure(shares, topic_labels: list[str], group_values: list, *, path=None, ax=None):
    """A heatmap of ``shares`` (groups x topics, each row a group's shares of its tokens), a row per
    group labelled by its value, a column per topic labelled by ``topic_labels`` (top words), each
    cell of at least 0.5 % with its share in percent where there is room. Drawn on ``ax`` (a new figure
    otherwise), saved to ``path`` when given; returns the figure."""
    shares = np.asarray(shares, dtype=float)
    groups, topics = shares.shape
    if ax is None:
        ax = new_figure((min(max(6.0, 2.0 + 0.55 * topics), 30), min(2.0 + 0.35 * groups, 30))).subplots()
    image = ax.imshow(shares, aspect="auto", cmap="viridis", vmin=0)
    ax.set_xticks(np.arange(topics), [f"{k}: {label}" for k, label in enumerate(topic_labels)], rotation=60,
                  ha="right", fontsize=8)
    ax.set_yticks(np.arange(groups), [str(v) for v in group_values], fontsize=8)
    ax.set(xlabel="topic (top words), largest first", ylabel="group",
           title="topic prevalence by group: each group's share of its tokens by topic")
    if groups * topics <= 600:  # the percentages, where they are at least one
        high = shares.max() if shares.size else 0
        for t, k in zip(*np.nonzero(shares >= 0.005)):
            ax.text(k, t, f"{100 * shares[t, k]:.0f}", ha="center", va="center", fontsize=6,
                    color="black" if shares[t, k] > 0.6 * high else "white")
    ax.figure.colorbar(image, ax=ax, fraction=0.03, pad=0.01, label="share")
    ax.figure.tight_layout()
    if path is not None:
        ax.figure.savefig(path, dpi=110, bbox_inches="tight")
    return ax.figure
