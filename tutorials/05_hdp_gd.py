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
# # Grouped proportions: the HDP mixture of generalized Dirichlet distributions
#
# `bnpzoo.HDPGD` fits the model of [HDP-GD] (`bnpzoo.models.hdp_gd`) to proportion vectors that
# come in groups. Each group has its own mixture over clusters (atoms) that all groups share, as in
# any hierarchical DP; each cluster is a generalized Dirichlet distribution, which after the
# geometric transform of the paper's eq. (11) is one Beta per feature; and each feature has a
# *saliency*, the probability that it separates clusters at all instead of following one common
# background Beta.
#
# Here: scikit-learn's digits as pixel shares in five groups of writers, with 20 parts of pure
# noise appended. Two pictures: which features the model keeps, and which groups use which atoms.

# %%
import matplotlib.pyplot as plt
import numpy as np

from bnpzoo import HDPGD, data
from bnpzoo.metrics import nmi

ds = data.load("digits-proportions:noise=20")
print(ds.X.shape, "rows sum to at most", ds.X.sum(1).max().round(4), "; groups:", np.bincount(ds.groups))

# %% [markdown]
# Batch VI ([HDP-GD] Algorithm 1): K-means starts 30 global atoms and 15 per group; coordinate
# updates then raise the bound until it changes by less than `tol` per row.

# %%
est = HDPGD(random_state=0).fit(ds.X, ds.groups)
print(f"{est.n_iter_} iterations, {est.n_clusters_} atoms used, NMI {nmi(ds.labels, est.labels_):.3f}")
assert np.all(np.diff(est.elbo_trace_) >= -1e-6 * np.abs(est.elbo_trace_).max())  # the bound never falls

# %% [markdown]
# ## Saliency
#
# E[eps_l] per feature. The 20 appended noise parts (red) follow the background and get a saliency
# near 0; so do the digits' constant border pixels, which carry no information either.

# %%
fig, ax = plt.subplots(figsize=(11, 3))
ax.bar(np.arange(ds.X.shape[1]), est.saliency_, color=["C0"] * 64 + ["C3"] * 20)
ax.set(xlabel="feature: 64 pixels, then 20 noise parts", ylabel="saliency", title="which features separate clusters")
plt.show()
print("largest noise saliency:", est.saliency_[64:].max().round(3))

# %% [markdown]
# ## Atoms shared across groups
#
# `group_weights_[j, k]` is group j's expected weight on global atom k: the groups (consecutive
# blocks of writers) share most atoms, with their own proportions.

# %%
used = np.flatnonzero(est.group_weights_.max(0) > 0.01)
fig, ax = plt.subplots(figsize=(11, 2.8))
image = ax.imshow(est.group_weights_[:, used], aspect="auto", cmap="viridis")
ax.set(xticks=range(len(used)), xticklabels=used, yticks=range(5), xlabel="global atom", ylabel="group",
       title="each group's weight on the shared atoms")
fig.colorbar(image)
plt.show()

# %% [markdown]
# ## Online
#
# Online VI visits the data in minibatches. Its `fit` is memoized VI: each minibatch's sums are
# kept from its last visit and the global factors take batch VI's updates from their totals after
# every minibatch, so it reaches batch VI's fixed points in fewer passes
# (`benchmarks/reports/hdp_gd.md`); `partial_fit` keeps learning from new chunks by [HDP-GD]
# Algorithm 2's steps.

# %%
online = HDPGD(inference="online-vi", random_state=0).fit(ds.X, ds.groups)
print(f"online: {online.n_passes_} passes, {online.n_clusters_} atoms, NMI {nmi(ds.labels, online.labels_):.3f}")
