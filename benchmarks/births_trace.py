"""The births of one default DPGMM fit, traced: for each call of ``inference.stick_mixture.vmm._births``, the
clusters before, each candidate division's objective (the smallest that pays, per cluster) and how
many clusters were born. Run on two devices to see where their fits part.

    python benchmarks/births_trace.py [--set breast-cancer] [--device cuda]
"""

import argparse
import builtins

import numpy as np
import torch

import bnpzoo.inference.stick_mixture.vmm as vmm
from bench_moves import load
from bnpzoo import DPGMM


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", default="breast-cancer")
    parser.add_argument("--device", default=None)
    args = parser.parse_args()
    births = vmm._births

    def sorted_logged(items, **kwargs):  # _births sorts (objective, candidate) by objective
        for value, (gain, cluster, moved, pieces) in items:
            print(f"   cluster {cluster:3d} into {len(moved) + 1}: objective {value:.6f} "
                  f"(its cluster terms {gain:+.6f})")
        return builtins.sorted(items, **kwargs)

    def traced(x, assignments, *rest, **kwargs):
        print(f"births at K={assignments.counts.numel()} seed={kwargs.get('seed')}")
        out = births(x, assignments, *rest, **kwargs)
        print(f"   born: {0 if out is None else out.counts.numel() - assignments.counts.numel()}")
        return out

    vmm._births, vmm.sorted = traced, sorted_logged
    x, _ = load(args.set)
    est = DPGMM(random_state=0, device=args.device).fit(x.astype(np.float32))
    print(f"{args.set} on {args.device or 'cpu'}: K {est.n_clusters_}, objective {est.elbo_trace_[-1]:.6f}")


if __name__ == "__main__":
    torch.set_num_threads(2)
    main()
