"""The results a behaviour-preserving change must keep (issue 63's list), recorded on fixed seeds, and
two records compared.

    python benchmarks/kept_results.py record OUT.json [--quick]
    python benchmarks/kept_results.py compare BEFORE.json AFTER.json

Recorded: on digits, NMI, clusters, iterations and the final bound of ``DPGMM(inference=L,
random_state=0)`` for every learner, of ``PYPGGM()`` and ``PYPGGM(likelihood="laplace")``, and of
``DPBMM`` (vmm, natgrad-svi) on the digits' pixels above half ink; the
families' tables (``bench_families``: five R tables raw and standardised, six random-covariance
draws) under ``DPGMM``'s default and each covariance; HDP-GD's ten shaped draws (``bench_hdp_gd``)
under vi and online-vi (NMI, the least relevant and most irrelevant saliency); ``CoupledDP()`` on
lee_background, 200 sweeps (held-out perplexity, topics). ``--quick`` leaves out the coupled fit
and keeps two HDP-GD draws. ``compare`` prints every value that moved, and exits 1 if one did
beyond its tolerance (exact for counts, 1e-6 relative for scores, 0.5 % for the perplexity).
"""

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

TOLERANCE = {"perplexity": 5e-3}  # relative; the sampler's floating sums may differ by order


def _digits(records):
    from bnpzoo import DPBMM, DPGMM, PYPGGM
    from bnpzoo.data import digits
    from bnpzoo.metrics import nmi
    from bnpzoo.mixture import INFERENCE

    ds = digits()
    fits = {f"digits DPGMM {learner}": lambda learner=learner: DPGMM(inference=learner, random_state=0)
            for learner in INFERENCE}
    fits["digits PYPGGM"] = lambda: PYPGGM(random_state=0)
    fits["digits PYPGGM laplace"] = lambda: PYPGGM(likelihood="laplace", random_state=0)
    for learner in ("vmm", "natgrad-svi"):  # pixels above half ink as binary features
        fits[f"digits DPBMM {learner}"] = lambda learner=learner: DPBMM(inference=learner, binarize=0.5,
                                                                        random_state=0)
    for name, make in fits.items():
        est = make().fit(ds.X)
        records[name] = dict(nmi=nmi(ds.labels, est.predict(ds.X)), clusters=int(est.n_clusters_),
                             n_iter=int(est.n_iter_), bound=float(est.elbo_trace_[-1]))
        print(name, records[name], flush=True)


def _families(records):
    from bench_families import random_covariance_clusters, real_tables

    from bnpzoo import DPGMM
    from bnpzoo.metrics import nmi

    sets = []
    for name, X, y in real_tables():
        sets += [(f"{name} raw", X, y), (f"{name} std", (X - X.mean(0)) / X.std(0), y)]
    for d in (2, 10):
        sets += [(f"random cov {d}-D #{seed}", *random_covariance_clusters(100 + seed, d)) for seed in range(3)]
    for data, X, y in sets:
        for covariance in (None, "full", "diag", "spherical", "fixed"):
            est = DPGMM(covariance=covariance, random_state=0).fit(X)
            records[f"families {data} {covariance or 'default'}"] = dict(
                nmi=nmi(y, est.predict(X)), clusters=int(est.n_clusters_), bound=float(est.elbo_trace_[-1]))
        print(data, flush=True)


def _hdp_gd(records, draws):
    from bench_hdp_gd import shaped_draw

    from bnpzoo import HDPGD
    from bnpzoo.metrics import nmi

    for seed in range(draws):
        ds, relevant = shaped_draw(seed)
        for inference in ("vi", "online-vi"):
            est = HDPGD(inference=inference, random_state=seed).fit(ds.X, ds.groups)
            records[f"hdp-gd draw {seed} {inference}"] = dict(
                nmi=nmi(ds.labels, est.labels_), clusters=int(est.n_clusters_),
                least_relevant=float(est.saliency_[:relevant].min()),
                most_irrelevant=float(est.saliency_[relevant:].max()), bound=float(est.elbo_trace_[-1]))
        print("hdp-gd draw", seed, flush=True)


def _coupled(records):
    from bench_coupled_documents import lee

    from bnpzoo import CoupledDP

    train, test, groups = lee()
    est = CoupledDP(max_iter=100, warmup=100, random_state=0).fit(train, groups)
    records["coupled lee_background"] = dict(perplexity=float(est.perplexity(test)), clusters=int(est.n_clusters_),
                                             topics=int(est.n_topics_))
    print(records["coupled lee_background"], flush=True)


def record(path, quick):
    warnings.simplefilter("ignore")
    records = {}
    _digits(records)
    _families(records)
    _hdp_gd(records, 2 if quick else 10)
    if not quick:
        _coupled(records)
    Path(path).write_text(json.dumps(records, indent=1) + "\n")


def _moved(name, before, after):
    if isinstance(before, int):
        return before != after
    tolerance = TOLERANCE.get(name, 1e-6)
    return abs(after - before) > tolerance * max(abs(before), 1e-12)


def compare(before_path, after_path) -> int:
    before, after = (json.loads(Path(p).read_text()) for p in (before_path, after_path))
    moved = 0
    for fit in sorted(set(before) | set(after)):
        if fit not in before or fit not in after:
            print(f"{fit}: only in {'the first' if fit in before else 'the second'} record")
            moved += 1
            continue
        for name, value in before[fit].items():
            if _moved(name, value, after[fit][name]):
                print(f"{fit}: {name} {value} -> {after[fit][name]}")
                moved += 1
    print(f"{len(before)} fits compared; {moved} values moved")
    return 1 if moved else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    rec = commands.add_parser("record")
    rec.add_argument("out")
    rec.add_argument("--quick", action="store_true")
    cmp = commands.add_parser("compare")
    cmp.add_argument("before")
    cmp.add_argument("after")
    args = parser.parse_args()
    if args.command == "record":
        record(args.out, args.quick)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
