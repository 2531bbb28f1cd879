import numpy as np
import pytest

from bnpzoo.metrics import acc, clusters_used, nmi


def test_relabelled_partition_scores_one():
    truth = np.array([0, 0, 1, 1, 2, 2])
    pred = np.array([5, 5, 3, 3, 9, 9])
    assert nmi(truth, pred) == pytest.approx(1.0)
    assert acc(truth, pred) == 1.0
    assert clusters_used(pred) == 3


def test_nmi_uses_max_normalisation_and_acc_the_hungarian_map():
    truth = np.array([0, 0, 0, 1, 1, 1])
    pred = np.array([0, 0, 1, 1, 2, 2])
    # I = ln2 - (2/3) ln2 ... computed directly: H(truth) = ln 2, H(pred) = ln 3
    joint = np.array([[2, 1, 0], [0, 1, 2]]) / 6
    outer = joint.sum(1, keepdims=True) * joint.sum(0, keepdims=True)
    nz = joint > 0
    mutual = (joint[nz] * np.log(joint[nz] / outer[nz])).sum()
    assert nmi(truth, pred) == pytest.approx(mutual / np.log(3))
    assert acc(truth, pred) == pytest.approx(4 / 6)


def test_metrics_reject_mismatched_lengths():
    with pytest.raises(ValueError, match="length"):
        nmi([0, 1], [0, 1, 1])


def test_nmi_names_its_normalisation_and_the_arithmetic_one_is_scikit_learns():
    from sklearn.metrics import normalized_mutual_info_score

    rng = np.random.default_rng(0)
    truth, pred = rng.integers(0, 4, 300), rng.integers(0, 6, 300)
    pred[:200] = truth[:200]
    for average in ("arithmetic", "geometric", "min", "max"):
        assert nmi(truth, pred, average) == pytest.approx(normalized_mutual_info_score(truth, pred,
                                                                                      average_method=average))
    assert nmi(truth, pred) == nmi(truth, pred, "max") < nmi(truth, pred, "arithmetic")
    with pytest.raises(ValueError, match="normalisation must be one of"):
        nmi(truth, pred, "mean")
