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
# # How sure is the mixture of its clusters? Posterior samples on a real table
#
# A variational fit (`DPGMM()`, learner `vmm`) gives one partition of the rows. The posterior of a
# Dirichlet-process mixture is a distribution over partitions: how many clusters the data support,
# and which rows belong together, each with its probability. `inference="gibbs"` draws from it:
# chains of exact split-merge moves over the partition, with the clusters' parameters integrated
# out, and a step that moves every row at once given drawn parameters
# (`bnpzoo.inference.stick_mixture.sampler`). Several chains run under `pyro.infer.MCMC`, so that
# R-hat can say whether they agree.
#
# The table: scikit-learn's wine data, 178 wines of three cultivars, 13 chemical measurements each
# (alcohol, flavanoids, colour intensity, proline, ...), in different units, so standardised first.
# The cultivars are the labels we score against; the mixture never sees them.

# %%
import warnings

import bnpzoo  # noqa: F401  # first, as in a script: Pyro then imports without tqdm's notebook warning
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_wine

from bnpzoo import DPGMM
from bnpzoo.base import ConvergenceWarning
from bnpzoo.diagnostics import arviz
from bnpzoo.metrics import nmi

az = arviz()  # ArviZ itself, imported quietly (bnpzoo.diagnostics)

wine = load_wine()
X = (wine.data - wine.data.mean(0)) / wine.data.std(0)
cultivar = wine.target

# %% [markdown]
# ## One partition, then many
# The variational fit and the sampler share the model and its prior. The sampler runs 4 chains
# (`num_chains`), each from one cluster: `max_iter` kept sweeps a chain after `warmup` sweeps
# (half of `max_iter` unless given). The warm-up's first sweeps climb to a mode (splits and merges
# taken only where they raise the posterior); the rest of it, and every kept sweep, are exact
# moves, and the number of split-merge attempts per sweep settles there.
# Its `predict` uses the last partition of the chain that ends highest; the posterior is in
# `samples_`, `coclustering_` and `to_arviz()`.

# %%
variational = DPGMM(random_state=0).fit(X)
with warnings.catch_warnings(record=True) as caught:  # shown below, where R-hat is discussed
    warnings.simplefilter("always", ConvergenceWarning)
    sampled = DPGMM(inference="gibbs", max_iter=400, random_state=0).fit(X)
for name, est in (("vmm", variational), ("gibbs", sampled)):
    print(f"{name:6s} {est.n_clusters_} clusters, NMI with the cultivars {nmi(cultivar, est.predict(X)):.3f}, "
          f"{est.fit_seconds_:.1f} s")
print("R-hat:", {name: round(value, 3) for name, value in sampled.rhat_.items()})
print("split and merge acceptance:", {kind: round(rate, 4) for kind, rate in sampled.acceptance_.items()})

# %% [markdown]
# ## The posterior number of clusters
# Every kept sweep of every chain records the number of clusters (`samples_["n_clusters"]`, one
# row per chain). Three cultivars, but the posterior puts its mass on five to seven groups of
# wines: the cultivars hold sub-groups that the model, whose clusters are Gaussian, keeps apart.
# The variational fit (dashed) keeps fewer, one partition found by a learner that prunes; a chain
# started from that partition leaves it for five to seven clusters within a few sweeps.

# %%
counts = sampled.samples_["n_clusters"].numpy().astype(int)
values = np.arange(min(counts.min(), variational.n_clusters_), counts.max() + 1)
fig, ax = plt.subplots(figsize=(6, 3))
for chain, row in enumerate(counts):
    share = np.array([(row == k).mean() for k in values])
    ax.bar(values + (chain - 1.5) * 0.2, share, width=0.2, label=f"chain {chain}")
ax.axvline(variational.n_clusters_, color="black", ls="--", label="vmm")
ax.set(xlabel="number of clusters", ylabel="share of sweeps", xticks=values)
ax.legend(fontsize=8);

# %% [markdown]
# ## Did the chains mix? ArviZ
# `to_arviz()` hands the draws to ArviZ: the log joint ln p(partition, X) (the clusters'
# parameters integrated out), the number of clusters and the number of small clusters (under 1 %
# of the rows). `az.summary` gives R-hat and the effective sample sizes; the fit itself warns
# (a `ConvergenceWarning`) where R-hat is above 1.1, and says how many sweeps would do. The number
# of clusters moves only when a split or merge is accepted (two or three attempts in a hundred here),
# so its effective sample size is the small one: for a final answer, raise `max_iter` as the
# warning says; for a first look at the posterior, 400 sweeps a chain show its shape. (The fit
# above kept its warning to print it here.)

# %%
print(*(str(w.message) for w in caught) or ["the chains mixed: no warning"], sep="\n")
idata = sampled.to_arviz()
az.summary(idata, var_names=["log_joint", "n_clusters"], kind="diagnostics")

# %%
az.plot_trace(idata, var_names=["log_joint", "n_clusters"], figsize=(9, 4.5))
plt.tight_layout();

# %% [markdown]
# ## Who clusters with whom
# `coclustering_[i, j]` is the share of kept sweeps (all chains) in which rows i and j share a
# cluster (for up to 1,000 rows, `coclustering_rows_`; here all 178). Ordered by cultivar (white
# lines), then by the sampler's cluster, the three blocks stand out with the sub-groups inside
# them; the bands of middling colour are wines that move between sub-groups from sweep to sweep:
# the posterior is unsure where they go, which one partition cannot show.

# %%
rows = sampled.coclustering_rows_
order = np.lexsort((sampled.predict(X)[rows], cultivar[rows]))  # by cultivar, then by sampled cluster
fig, ax = plt.subplots(figsize=(5, 4.5))
image = ax.imshow(sampled.coclustering_[np.ix_(order, order)], cmap="viridis", vmin=0, vmax=1)
edges = np.flatnonzero(np.diff(cultivar[rows][order])) + 0.5
for edge in edges:
    ax.axhline(edge, color="white", lw=0.8)
    ax.axvline(edge, color="white", lw=0.8)
ax.set(title="co-clustering, rows by cultivar", xticks=[], yticks=[])
fig.colorbar(image, ax=ax, shrink=0.8);

# %% [markdown]
# A row's certainty: the mean probability that it shares a cluster with the rows of its own
# predicted cluster. Most wines sit near 1; the ones below are where a single partition hides
# doubt.

# %%
labels = sampled.predict(X)[rows]
same = labels[:, None] == labels[None, :]
certainty = (sampled.coclustering_ * same).sum(1) / same.sum(1)
print(f"rows whose certainty is under 0.8: {(certainty < 0.8).sum()} of {len(rows)}")
for row in np.argsort(certainty)[:5]:
    print(f"wine {rows[row]:3d}  cultivar {cultivar[rows[row]]}  certainty {certainty[row]:.2f}")
