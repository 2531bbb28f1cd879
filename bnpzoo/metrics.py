"""Clustering scores as [DPM-SGA] and [PYPM-sVMM] define them (section 5.1.2 of [DPM-SGA]).

    ACC = (1/N) sum_n delta(gt_n, map(mo_n))      map: the Hungarian one-to-one label map
    NMI = I(gt, mo) / max(H(gt), H(mo))

(scikit-learn's ``normalized_mutual_info_score`` divides by the arithmetic mean of the two
entropies by default, which gives the same or higher numbers: ``nmi(..., normalisation="arithmetic")``
is that one, and the command line reports both, ``nmi`` and ``nmi_arithmetic``)

and, for topic models, the held-out ``completion_perplexity`` (``bnpzoo.perplexity``).
"""

import numpy as np

from bnpzoo.perplexity import completion_perplexity

__all__ = ["acc", "clusters_used", "completion_perplexity", "contingency", "nmi"]


def _labels(a, name) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array of labels, got shape {a.shape}")
    return np.unique(a, return_inverse=True)[1]


def contingency(truth, pred) -> np.ndarray:
    """Counts of (true class, predicted cluster) pairs."""
    t, p = _labels(truth, "truth"), _labels(pred, "pred")
    if t.size != p.size:
        raise ValueError(f"truth and pred differ in length: {t.size} != {p.size}")
    table = np.zeros((t.max() + 1, p.max() + 1))
    np.add.at(table, (t, p), 1)
    return table


def _entropy(counts: np.ndarray) -> float:
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


NORMALISATIONS = {"max": max, "arithmetic": lambda a, b: (a + b) / 2, "geometric": lambda a, b: (a * b) ** 0.5,
                  "min": min}


def nmi(truth, pred, normalisation: str = "max") -> float:
    """Normalised mutual information, I(gt, mo) divided by the ``normalisation`` (max, arithmetic,
    geometric or min) of the two entropies: max as the papers define it, arithmetic as
    scikit-learn's default. 1 for identical partitions.

    Parameters
    ----------
    truth, pred : two labellings of the same samples (any hashable labels, one per sample).
    normalisation : "max" (default), "arithmetic", "geometric" or "min".

    Returns
    -------
    float in [0, 1]; 1 also when both labellings have a single cluster.
    """
    if normalisation not in NORMALISATIONS:
        raise ValueError(f"normalisation must be one of {', '.join(NORMALISATIONS)}, got {normalisation!r}")
    table = contingency(truth, pred)
    n = table.sum()
    joint = table / n
    outer = joint.sum(1, keepdims=True) * joint.sum(0, keepdims=True)
    nz = joint > 0
    mutual = float((joint[nz] * np.log(joint[nz] / outer[nz])).sum())
    norm = NORMALISATIONS[normalisation](_entropy(table.sum(1)), _entropy(table.sum(0)))
    return 1.0 if norm == 0 else mutual / norm


def acc(truth, pred) -> float:
    """Accuracy under the best one-to-one map of clusters to classes (Hungarian algorithm).

    Parameters
    ----------
    truth, pred : two labellings of the same samples.

    Returns
    -------
    float in [0, 1]: the share of samples whose cluster maps to their class; clusters left
    without a class count as wrong.
    """
    from scipy.optimize import linear_sum_assignment  # slow to import; the CLI's start does without

    table = contingency(truth, pred)
    rows, cols = linear_sum_assignment(-table)
    return float(table[rows, cols].sum() / table.sum())


def clusters_used(pred) -> int:
    """Number of distinct clusters that hold at least one sample.

    Parameters
    ----------
    pred : labels, one per sample.

    Returns
    -------
    int.
    """
    return int(np.unique(np.asarray(pred)).size)
