"""The coupled topic model on a GPU: ``CoupledDP(device="cuda")`` (its uncollapsed label step,
``inference.coupled.uncollapsed``) on generated corpora of growing size, against the CPU's defaults
and tomotopy's HDP with every core on the same corpus. The numbers go to ``reports/gpu.md`` by hand.

Corpora: ``bench_coupled_scale.generated`` (``bnpzoo.corpus.generated_topics``, 10 groups, 50
topics over 5,000 words, documents of about 100 tokens; 2,000 documents, odd-numbered among the
first 4,000, held out for ``bnpzoo.metrics.completion_perplexity``); with ``--subset-of``, the CPU's
fits take the first documents of a larger corpus's training half, and its held-out documents, so
that a GPU fit of the large corpus and the CPU's of a subset score the same documents. Every fit: random_state 0,
``--warmup`` + ``--iters`` sweeps (default 100 + 100). One JSON line per fit on stdout, and all of them
in ``--out``/coupled_gpu.json.

    python benchmarks/bench_coupled_gpu.py [--sizes 1000000,100000000] [--cpu-sizes 1000000]
                                           [--cpu-label-steps collapsed,parallel] [--subset-of 100000000]
                                           [--tomotopy-sizes 1000000]
                                           [--device cuda] [--label-step STEP] [--out DIR]
"""

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

HELD_OUT = 2000  # documents


def _peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _timed_start() -> list:
    """The seconds of each ``kernel.subset_start`` from now on (the uncollapsed chain's start, which
    runs inside the sampling time; the first call is ``prepare``'s, in the compile time)."""
    from bnpzoo.inference.coupled import kernel

    spent, start = [], getattr(kernel.subset_start, "__wrapped__", kernel.subset_start)

    def timed(*args):
        begun = time.perf_counter()
        result = start(*args)
        spent.append(time.perf_counter() - begun)
        return result

    timed.__wrapped__ = start
    kernel.subset_start = timed
    return spent


def corpus(n_tokens: int, subset_of: int | None = None) -> tuple:
    """(train, test, groups): ``bench_coupled_scale.generated(n_tokens)``, or the first training
    documents holding ``n_tokens`` tokens of ``generated(subset_of)``, with its held-out documents."""
    import numpy as np

    from bench_coupled_scale import generated

    if subset_of is None:
        return generated(n_tokens, held_out=HELD_OUT)
    train, test, groups = generated(subset_of, held_out=HELD_OUT)
    count = int(np.searchsorted(np.cumsum([len(doc) for doc in train]), n_tokens)) + 1
    return train[:count], test, groups[:count]


def fit(n_tokens: int, device: str, warmup: int, iters: int, label_step=None, subset_of=None) -> dict:
    import torch

    from bnpzoo import CoupledDP

    start = time.perf_counter()
    train, test, groups = corpus(n_tokens, subset_of)
    made = time.perf_counter() - start
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    started = _timed_start()
    est = CoupledDP(device=None if device == "cpu" else device, warmup=warmup, max_iter=iters, label_step=label_step,
                    random_state=0).fit(train, groups)
    record = {"tokens": est.n_tokens_, "subset_of": subset_of, "device": device, "label_step": label_step or "default",
              "sweeps": est.n_iter_, "generate_s": round(made, 1), "fit_s": round(est.fit_seconds_, 1),
              "sampling_s": round(est.sampling_seconds_, 1), "subset_start_s": round(sum(started[1:]), 1),
              "compile_s": round(est.compile_seconds_, 1),
              "tokens_per_s": round(est.tokens_per_second_), "topics": est.n_clusters_,
              "truncation": est.truncation_, "perplexity": round(est.perplexity(test), 2),
              "host_peak_mb": round(_peak_mb())}
    if device.startswith("cuda"):
        record["gpu_peak_mb"] = round(torch.cuda.max_memory_allocated() / 2**20)
        record["gpu"] = torch.cuda.get_device_name()
    return record


def tomotopy_fit(n_tokens: int, sweeps: int) -> dict:
    from bench_coupled_scale import tomotopy_hdp

    train, test, _ = corpus(n_tokens)
    workers = os.cpu_count()
    perplexity, rate, topics = tomotopy_hdp(train, test, sweeps, workers)
    return {"tokens": sum(map(len, train)), "device": f"tomotopy workers {workers}", "sweeps": sweeps,
            "tokens_per_s": round(rate), "topics": topics, "perplexity": round(perplexity, 2)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000000,100000000", help="training tokens of the GPU fits")
    parser.add_argument("--cpu-sizes", default="", help="training tokens of the CPU defaults' fits")
    parser.add_argument("--tomotopy-sizes", default="", help="training tokens of tomotopy's fits")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--label-step", default=None, help="of the --device fits (default: the estimator's)")
    parser.add_argument("--cpu-label-steps", default="collapsed", help="of the --cpu-sizes fits")
    parser.add_argument("--subset-of", default=None, help="the --cpu-sizes fits take the first training documents "
                        "of the corpus of this many tokens (and its held-out documents)")
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--out", default=".")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    runs = [("tomotopy", int(n), None) for n in args.tomotopy_sizes.split(",") if n]
    runs += [(args.device, int(n), args.label_step) for n in args.sizes.split(",") if n]
    runs += [("cpu", int(n), step) for n in args.cpu_sizes.split(",") if n for step in args.cpu_label_steps.split(",")]
    subset_of = None if args.subset_of is None else int(args.subset_of)
    records = []
    for device, n, label_step in runs:
        if device == "tomotopy":
            record = tomotopy_fit(n, args.warmup + args.iters)
        else:
            record = fit(n, device, args.warmup, args.iters, label_step, subset_of if device == "cpu" else None)
        records.append(record)
        print(json.dumps(record), flush=True)
        (Path(args.out) / "coupled_gpu.json").write_text(json.dumps(records, indent=1) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
