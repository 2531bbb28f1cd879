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
# # Stochastic learners: SGA, Fisher, sVMM and natural-gradient SVI on minibatches
#
# Every learner here is a `torch.optim.Optimizer` plugged into Pyro through `PyroOptim`
# (`bnpzoo.inference.optim`), stepping the same Pyro program (`bnpzoo.models.dp_gmm`) on
# minibatches: constant-step SGA, momentum and Fisher-scaled SGA ([DPM-SGA]), sVMM and its two
# ablations ([PYPM-sVMM]), and conjugate natural-gradient SVI ([PYPM-sVMM]'s "SVI: DPM" baseline).
# Each evaluates the same bound on a fixed minibatch every 10 steps, and prunes dead clusters.

# %%
import matplotlib.pyplot as plt
import numpy as np

from bnpzoo import DPGMM
from bnpzoo.data import blobs
from bnpzoo.metrics import clusters_used, nmi

data = blobs(n=20_000, d=16, k=20, seed=0)
X, y = data.X, data.labels

# %% [markdown]
# ## Every learner, one data set
# Truncation 40 for 20 true clusters, with the defaults otherwise: each cluster learns its own
# covariance, and minibatches of 1,000 rows. Every learner starts from two clusters and opens the
# others by births (merges close the ones that split a cluster), judged on the bound of statistics
# memoized over its minibatches.

# %%
learners = ["sga", "sga-momentum", "sga-fisher", "svmm", "svmm-mgrad", "svmm-grad", "natgrad-svi"]
fits = {}
for name in learners:
    est = DPGMM(truncation=40, inference=name, random_state=0).fit(X)
    fits[name] = est
    pred = est.predict(X)
    print(f"{name:13s} NMI {nmi(y, pred):.3f}  clusters {clusters_used(pred):2d}  "
          f"{est.n_iter_:4d} steps  {est.fit_seconds_:.2f} s")

# %% [markdown]
# ## The bound against wall time
# `elbo_trace_` holds the bound ([PYPM-sVMM] eq. (22)-(23), assignments summed out, scaled to N) at
# each evaluation and `elbo_seconds_` when it was taken.

# %%
fig, ax = plt.subplots(figsize=(7, 4))
for name, est in fits.items():
    ax.plot(est.elbo_seconds_, np.asarray(est.elbo_trace_) / len(X), ".-", label=name)
ax.set(xscale="log", xlabel="seconds", ylabel="bound per sample")
ax.legend(fontsize=8);

# %% [markdown]
# ## Streaming with `partial_fit`
# Each call runs one pass of minibatch steps over the batch it is given and resumes the
# parameters and optimizer state (W_t, F_t and the step counter of sVMM) of the previous call.

# %%
stream = DPGMM(truncation=40, inference="svmm-mgrad", covariance="diag", batch_size=500, random_state=0)
for epoch in range(2):
    for chunk in np.array_split(np.random.default_rng(epoch).permutation(len(X)), 8):
        stream.partial_fit(X[chunk])
    print(f"after pass {epoch + 1}: NMI {nmi(y, stream.predict(X)):.3f}, {stream.n_clusters_} clusters")
