"""Convergence of the coupled latent-DP sampler on digits-bags (issue 4): 4 chains under
pyro.infer.MCMC in [Coupled-DP] section 5.2's set-up (``config="scenes"``: a local latent DP per digit
at q = 1, 0.2 to the other locals, a global one at q = 0.5; 10 atoms per latent DP), with the
blocked label step (``label_step="blocked"``: 562k tokens in 517 (digit, pixel) cells, the sweep
compiled end to end, ``inference.coupled.cells``), R-hat and ESS of the log joint over the kept
samples (every 20th sweep). Writes benchmarks/reports/coupled_rhat.md and coupled_rhat.png (the
chains' log joint against the sweep). About 115 min on 2 CPU cores, where Pyro draws the chains
one after another (about 6 ms a sweep).

    python benchmarks/bench_coupled_rhat.py [--warmup 5000] [--sweeps 280000] [--thin 20]
"""

import argparse
import datetime
import platform
from pathlib import Path

import numpy as np

from bnpzoo import CoupledDP
from bnpzoo.corpus import digits_bags
from bnpzoo.diagnostics import arviz

az = arviz()

REPORT = Path(__file__).parent / "reports" / "coupled_rhat.md"


def figure(log_joint, warmup, thin, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.5))
    step = max(1, log_joint.shape[1] // 2000)
    sweeps = warmup + thin * (1 + np.arange(0, log_joint.shape[1], step))
    for chain, values in enumerate(log_joint):
        ax.plot(sweeps, values[::step], lw=0.6, label=f"chain {chain}")
    ax.set_xlabel("sweep")
    ax.set_ylabel("log joint")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=5000, help="warm-up sweeps per chain")
    parser.add_argument("--sweeps", type=int, default=280000, help="kept sweeps per chain")
    parser.add_argument("--thin", type=int, default=20, help="sweeps per kept sample")
    parser.add_argument("--chains", type=int, default=4)
    args = parser.parse_args()
    est = CoupledDP(config="scenes", truncation=10, label_step="blocked", warmup=args.warmup // args.thin,
                    max_iter=args.sweeps // args.thin, thin=args.thin, num_chains=args.chains, random_state=0)
    est.fit(digits_bags())
    log_joint = est.samples_["log_joint"].numpy()
    ess = float(az.ess(log_joint))
    figure(log_joint, args.warmup, args.thin, REPORT.with_suffix(".png"))
    lines = [
        f"# Coupled latent DPs: convergence on digits-bags ({datetime.date.today()}, {platform.machine()}, "
        f"{platform.processor() or 'cpu'})", "",
        f"{args.chains} chains x ({args.warmup} warm-up + {args.sweeps} kept sweeps, every {args.thin}th kept) under "
        f"pyro.infer.MCMC, config scenes, 10 atoms per latent DP, blocked label step, compiled sweep; "
        f"{est.n_tokens_:,} tokens.", "",
        f"- R-hat of the log joint: {est.rhat_:.4f}",
        f"- ESS of the log joint: {ess:.1f}",
        "- log joint by chain, mean (sd): " + ", ".join(f"{m:,.0f} ({s:,.0f})" for m, s in
                                                       zip(log_joint.mean(1), log_joint.std(1))),
        f"- {est.tokens_per_second_:,.0f} tokens/s over all chains; {est.sampling_seconds_:.0f} s of sampling", "",
        "![the chains' log joint](coupled_rhat.png)"]
    REPORT.parent.mkdir(exist_ok=True)
    REPORT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
