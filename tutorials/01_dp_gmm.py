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
# The model ([DPM-SGA], eq. (1)-(2)) is a Pyro program, `bnpzoo.models.dp_gmm.model`: stick-breaking
# weights with Beta(1, a0) sticks, Gaussian clusters with a shared, fixed variance sigma^2, and
# enumerated assignments. We fit it with the batch closed-form learner (`vmm`) and with Pyro SVI
# (`vi`), look at the bound, the cluster sizes, and what each cluster looks like.

# %%
import matplotlib.pyplot as plt
import numpy as np

from bnpzoo import DPGMM
from bnpzoo.data import digits
from bnpzoo.metrics import acc, clusters_used, nmi

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
print(f"clusters used: {clusters_used(pred)}, NMI {nmi(y, pred):.3f}, ACC {acc(y, pred):.3f}, "
      f"sigma {float(est.sigma_.max()):.3f} (one per pixel, all equal here), {est.fit_seconds_:.2f} s")

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
ax2.bar(np.arange(est.n_clusters_), est.weights_.numpy())
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
        ax.imshow(est.means_[k].reshape(8, 8).numpy(), cmap="gray_r")
        members = y[pred == k]
        ax.set_title(str(np.bincount(members).argmax()) if members.size else "-", fontsize=9)
fig.tight_layout()

# %% [markdown]
# ## The same model under Pyro SVI
# `inference="vi"` runs `pyro.infer.SVI` with `TraceEnum_ELBO` (assignments summed out) and a MAP
# guide from `bnpzoo.guides.dp_gmm`, started from the same K-means solution.

# %%
vi = DPGMM(truncation=50, inference="vi", random_state=0, max_iter=300).fit(X)
vi_pred = vi.predict(X)
print(f"vi: clusters used {clusters_used(vi_pred)}, NMI {nmi(y, vi_pred):.3f}, {vi.fit_seconds_:.1f} s")
plt.plot(vi.elbo_trace_)
plt.xlabel("SVI step")
plt.ylabel("ELBO");
