"""Every estimator and learner fitted with device='cuda' beside the same fit on the CPU: it runs,
its clusters agree with the CPU's (NMI between the two labelings), predictions survive save and
load, and the wall time of each. Run on a machine with a GPU (the CI machines have none):

    python benchmarks/gpu_check.py [--out FOLDER]
"""

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from bnpzoo import DPBMM, data
from bnpzoo.metrics import nmi
from bnpzoo.registry import MODELS


def cases():
    blobs, digits = data.load("blobs:n=3000,d=4,k=5,seed=1"), data.load("digits")
    grouped = data.load("hdp-gd:n=1500,seed=0")
    binary = (digits.X > 0.5).astype(np.float32)
    for name in ("dp-gmm", "pyp-ggm"):
        for learner in MODELS[name].learners:
            yield f"{name} {learner}", MODELS[name].estimator, {"inference": learner}, blobs.X, None, blobs.labels
    for covariance in ("full", "diag", "spherical"):
        for learner in ("vmm", "natgrad-svi"):
            yield (f"dp-gmm {learner} {covariance}", MODELS["dp-gmm"].estimator,
                   {"inference": learner, "covariance": covariance}, blobs.X, None, blobs.labels)
    yield "dp-gmm vmm digits", MODELS["dp-gmm"].estimator, {}, digits.X, None, digits.labels
    for learner in MODELS["hdp-gd"].learners:
        yield (f"hdp-gd {learner}", MODELS["hdp-gd"].estimator, {"inference": learner},
               grouped.X, grouped.groups, grouped.labels)
    for learner in ("vmm", "natgrad-svi"):
        yield f"dp-bmm {learner}", DPBMM, {"inference": learner}, binary, None, digits.labels


def fit(estimator, params, X, groups, device):
    est = estimator(random_state=0, device=device, **params)
    start = time.perf_counter()
    est.fit(X) if groups is None else est.fit(X, groups)
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
    return est, time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=".")
    parser.add_argument("--device", default="cuda", help="the device compared with the CPU")
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    args = parser.parse_args()
    rows, folder = [], Path(tempfile.mkdtemp())
    for name, estimator, params, X, groups, truth in cases():
        if args.only not in name:
            continue
        row = {"case": name}
        try:
            cpu, row["cpu_s"] = fit(estimator, params, X, groups, "cpu")
            gpu, row["cuda_s"] = fit(estimator, params, X, groups, args.device)
            predict = (lambda e: e.predict(X)) if groups is None else (lambda e: e.predict(X, groups))
            cpu_labels, gpu_labels = predict(cpu), predict(gpu)
            row.update(k_cpu=int(cpu.n_clusters_), k_cuda=int(gpu.n_clusters_),
                       nmi_cpu=nmi(truth, cpu_labels), nmi_cuda=nmi(truth, gpu_labels),
                       cpu_vs_cuda=nmi(cpu_labels, gpu_labels))
            gpu.save(folder / "model.pt")
            back = type(gpu).load(folder / "model.pt")
            row["load_agrees"] = bool(np.array_equal(predict(back), gpu_labels))
        except Exception as error:  # noqa: BLE001 -- the table records what broke, and goes on
            row["error"] = f"{type(error).__name__}: {error}"[:300]
        rows.append(row)
        print(json.dumps(row), flush=True)
    Path(args.out, "gpu_check.json").write_text(json.dumps(rows, indent=1))
    print(f"\n{'case':28s} {'cpu s':>7s} {'cuda s':>7s} {'K cpu/cuda':>10s} {'NMI cpu/cuda':>13s} {'agree':>6s} load")
    for r in rows:
        if "error" in r:
            print(f"{r['case']:28s} ERROR {r['error'][:120]}")
            continue
        print(f"{r['case']:28s} {r['cpu_s']:7.2f} {r['cuda_s']:7.2f} {r['k_cpu']:>4d}/{r['k_cuda']:<5d} "
              f"{r['nmi_cpu']:6.3f}/{r['nmi_cuda']:.3f} {r['cpu_vs_cuda']:6.3f} {r['load_agrees']}")


if __name__ == "__main__":
    main()
