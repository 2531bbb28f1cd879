# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # A Dirichlet-process Gaussian mixture on handwritten digits
#
# The model is a Pyro program, `bnpzoo.models.dp_gmm.model`: stick-breaking weights with Beta(1, a0)
# sticks, Gaussian clusters and enumerated assignments. Each cluster has its own covariance
# (`covariance="full"`, Normal-Wishart prior) or all share one fixed variance sigma^2 per feature
# (`"fixed"`, the model of [DPM-SGA], eq. (1)-(2)). With the defaults, `DPGMM` learns full
# covariances with the batch learner `vmm` when the data hold at least 5 rows per covariance entry,
# N >= 5 D (D + 1) / 2, and keeps the fixed variance otherwise.
#
# First, elongated clusters in 2-D, where the covariance is the point; then the digits (64 features,
# 1,797 rows: the fixed variance), fitted with `vmm` and with Pyro SVI (`vi`).

# %% [markdown]
# ## Clusters with their own shape
# Four correlated clouds of different sizes and spreads. The default fit learns each cluster's
# covariance (the ellipses are two standard deviations of the fitted `covariances_`); the paper's
# fixed variance (`covariance="fixed"`, the one setting this section changes) can only place round
# clusters of one size, and cuts the long clouds into pieces.

# %%
import matplotlib.pyplot as plt
import numpy as np

from bnpzoo import DPGMM
from bnpzoo.metrics import acc, clusters_used, nmi

rng = np.random.default_rng(0)
shapes = [([0, 0], [[6, 5.2], [5.2, 6]], 400), ([9, -2], [[0.3, 0], [0, 4]], 250),
          ([-6, 6], [[2, -1.5], [-1.5, 2]], 300), ([6, 8], [[0.5, 0], [0, 0.5]], 150)]
shaped = np.concatenate([rng.multivariate_normal(mean, cov, size) for mean, cov, size in shapes])
truth = np.repeat(np.arange(len(shapes)), [size for *_, size in shapes])

full = DPGMM(random_state=0).fit(shaped)
fixed = DPGMM(covariance="fixed", random_state=0).fit(shaped)


def ellipses(ax, est):
    angles = np.linspace(0, 2 * np.pi, 100)
    circle = np.stack([np.cos(angles), np.sin(angles)])
    for mean, cov in zip(est.means_, est.covariances_):
        cov = np.diag(cov) if cov.ndim == 1 else cov
        ax.plot(*(mean[:, None] + 2 * np.linalg.cholesky(cov) @ circle), color="black", lw=1)


fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharex=True, sharey=True)
for ax, est, title in zip(axes, (full, fixed), ("default: full covariances", 'covariance="fixed"')):
    labels = est.predict(shaped)
    ax.scatter(*shaped.T, c=labels, s=4, cmap="tab10")
    ellipses(ax, est)
    ax.set_title(f"{title}: {est.n_clusters_} clusters, NMI {nmi(truth, labels):.2f}")
fig.tight_layout()
print(f"default chose covariance={full.covariance_type_!r}")

# %% [markdown]
# ## The digits
# With 64 features a full covariance has 2,080 entries per cluster, more than the 1,797 rows: the
# default keeps the fixed variance here (`covariance_type_`).

# %%
from bnpzoo.data import digits

data = digits()
X, y = data.X, data.labels
X.shape

# %% [markdown]
# ## Fit with the batch learner
# `truncation=50` is only an upper bound: clusters that lose all their samples are pruned.
# `sigma` is left at its data-driven default (`bnpzoo.ops.default_sigma`).

# %%
est = DPGMM(truncation=50, inference="vmm", random_state=0).fit(X)
pred = est.predict(X)
print(f"covariance {est.covariance_type_!r}: clusters used {clusters_used(pred)}, NMI {nmi(y, pred):.3f}, "
      f"ACC {acc(y, pred):.3f}, sigma {float(est.sigma_.max()):.3f} (one per pixel, all equal here), "
      f"{est.fit_seconds_:.2f} s")

# %% [markdown]
# ## The bound over iterations, and the cluster sizes
# The learner runs in two phases: first under a prior that pulls every mean toward the data mean
# (`pruning_precision`, 20 pseudo-samples), which empties the clusters K-means split off, then
# under the model's own vague prior (`prior_precision=1`), which lets the means settle where
# their members are. The objective changes where the second phase starts (the dashed line);
# within each phase it never drops. Clusters come out ordered by weight.

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.5))
ax1.plot(est.elbo_trace_, "o-", ms=3)
for start in est.phase_starts_[1:]:
    ax1.axvline(start, ls="--", color="gray")
ax1.set(xlabel="iteration", ylabel="bound", title="vmm objective")
ax2.bar(np.arange(est.n_clusters_), est.weights_)
ax2.set(xlabel="cluster", ylabel="weight", title=f"{est.n_clusters_} clusters")
fig.tight_layout()
for start, end in zip(est.phase_starts_, est.phase_starts_[1:] + [len(est.elbo_trace_)]):
    phase = np.array(est.elbo_trace_[start:end])
    assert np.all(np.diff(phase) >= -1e-6 * np.abs(phase[:-1]))

# %% [markdown]
# ## What the clusters look like
# Each mean is an 8x8 image; the title is the most common true digit in the cluster.

# %%
cols = 10
rows = int(np.ceil(est.n_clusters_ / cols))
fig, axes = plt.subplots(rows, cols, figsize=(cols * 1.1, rows * 1.3))
for k, ax in enumerate(axes.ravel()):
    ax.axis("off")
    if k < est.n_clusters_:
        ax.imshow(est.means_[k].reshape(8, 8), cmap="gray_r")
        members = y[pred == k]
        ax.set_title(str(np.bincount(members).argmax()) if members.size else "-", fontsize=9)
fig.tight_layout()

# %% [markdown]
# ## The same model under Pyro SVI
# `inference="vi"` runs `pyro.infer.SVI` with `TraceEnum_ELBO` (assignments summed out) and a MAP
# guide from `bnpzoo.guides.stick_mixture`, started from the same K-means solution.

# %%
vi = DPGMM(truncation=50, inference="vi", random_state=0, max_iter=300).fit(X)
vi_pred = vi.predict(X)
print(f"vi: clusters used {clusters_used(vi_pred)}, NMI {nmi(y, vi_pred):.3f}, {vi.fit_seconds_:.1f} s")
plt.plot(vi.elbo_trace_)
plt.xlabel("SVI step")
plt.ylabel("ELBO");
