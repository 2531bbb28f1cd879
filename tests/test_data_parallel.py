"""Data-parallel SVI (``inference.data_parallel``): two gloo processes on localhost fit as one process
whose minibatches are the union of theirs, for every SVI learner; and the coupled sampler's chain
over processes (``inference.coupled.parallel``) is one process's."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import torch

import bnpzoo
from bnpzoo.cli import main
from bnpzoo.inference import data_parallel
from bnpzoo.mixture import StickMixture
from bnpzoo.models.dp_gmm import model as dp_gmm_model
from data_parallel_worker import SETTINGS, fit_all

WORKER = Path(__file__).with_name("data_parallel_worker.py")
RANKS, ROWS, BATCH, EVALUATION, START = 2, 1500, 100, 300, 200  # ROWS, BATCH, ...: per rank


def blobs(seed=0, labels=False):
    g = np.random.default_rng(seed)
    centres, z = g.normal(0, 6, (6, 4)), g.integers(0, 6, RANKS * ROWS)
    x = (centres[z] + g.normal(0, 1, (RANKS * ROWS, 4))).astype(np.float32)
    return (x, z) if labels else x


def rank_tables(seed=1) -> list:
    """Each rank's draws, as indices into its own rows."""
    g = torch.Generator().manual_seed(seed)
    return [{"steps": [torch.randint(0, ROWS, (BATCH,), generator=g) for _ in range(SETTINGS["max_iter"])],
             "evaluation": torch.randperm(ROWS, generator=g)[:EVALUATION],
             "start": torch.randperm(ROWS, generator=g)[:START]} for _ in range(RANKS)]


def union(tables) -> dict:
    """The one process's draws: the ranks' rows, rank after rank, in the whole data set's indices."""
    shift = lambda r, t: t + r * ROWS
    return {"steps": [torch.cat([shift(r, t["steps"][i]) for r, t in enumerate(tables)])
                      for i in range(SETTINGS["max_iter"])],
            **{key: torch.cat([shift(r, t[key]) for r, t in enumerate(tables)]) for key in ("evaluation", "start")}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(data, tables, tmp_path) -> list:
    """Run the worker in RANKS processes, as torchrun would; their outputs."""
    env = dict(os.environ, WORLD_SIZE=str(RANKS), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    outs = [tmp_path / f"rank-{r}.pt" for r in range(RANKS)]
    # faulthandler: a rank that aborts in torch's C++ shows where each of its threads was
    procs = [subprocess.Popen([sys.executable, "-X", "faulthandler", str(WORKER), str(data), str(tables), str(out)],
                              env=dict(env, RANK=str(r), LOCAL_RANK=str(r)), stderr=subprocess.PIPE, text=True)
             for r, out in enumerate(outs)]
    errors = [p.communicate(timeout=600)[1] for p in procs]
    failed = [f"rank {r}: exit {p.returncode}, its fit {'saved' if out.exists() else 'not saved'}\n{err[-3000:]}"
              for r, (p, err, out) in enumerate(zip(procs, errors, outs)) if p.returncode != 0]
    assert not failed, "\n".join(failed)
    return [torch.load(out) for out in outs]


@pytest.mark.cpu_state  # the ranks run on the CPU, as the one-process fit they are compared with
def test_two_processes_fit_as_one_on_the_union_of_their_minibatches(tmp_path):
    x = blobs()
    np.save(tmp_path / "x.npy", x)
    tables = rank_tables()
    torch.save(tables, tmp_path / "tables.pt")
    ranks = launch(tmp_path / "x.npy", tmp_path / "tables.pt", tmp_path)
    one = fit_all(x, union(tables))
    for learner, fitted in one.items():
        for name, value in fitted.items():
            # the ranks hold the same fit, bit for bit
            assert torch.equal(ranks[0][learner][name], ranks[1][learner][name]), (learner, name)
            # and it is the one process's fit, up to the order of float32 sums: a sum of n terms in
            # another order moves by up to n eps; 1e-4 is that for a few hundred rows' minibatch
            # (a 16-core AVX-512 CPU gave 2.7e-5, this 2-core one under 1e-5), where another
            # minibatch moves the fit by 1e-2 or more
            torch.testing.assert_close(ranks[0][learner][name], value, rtol=1e-4, atol=1e-4 * float(value.abs().max()),
                                       msg=lambda m: f"{learner} {name}: {m}")
        assert fitted["means"].shape[0] > 2, learner  # a fit that found clusters: the comparison says something
    assert torch.equal(ranks[0]["stream"]["means"], ranks[1]["stream"]["means"])
    assert int(ranks[0]["stream"]["steps"]) == 7 + 5


def test_torchrun_fits_data_parallel_and_rank_0_reports_on_every_row(tmp_path):
    x, z = blobs(labels=True)
    np.save(tmp_path / "x.npy", x)
    np.savetxt(tmp_path / "z.txt", z, fmt="%d")
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          "-m", "bnpzoo", "fit", "dp-gmm", "--data", str(tmp_path / "x.npy"), "--labels",
                          str(tmp_path / "z.txt"), "--inference", "natgrad-svi", "--json"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    (line,) = [line for line in out.stdout.splitlines() if line.startswith("{")]  # rank 0's, only
    record = json.loads(line)
    assert (record["processes"], record["n"], record["k_used"]) == (2, len(x), 6)
    assert record["nmi"] >= 0.99


def test_a_group_bnpzoo_started_is_destroyed_at_exit(tmp_path):
    """A script under torchrun that fits ``rank_rows`` never sees the group bnpzoo started: it is
    destroyed at exit, before the interpreter's teardown (an exit handler registered before bnpzoo's
    runs after it)."""
    script = ("import atexit, numpy as np, torch.distributed as dist\n"
              "atexit.register(lambda: print('left open' if dist.is_initialized() else 'destroyed'))\n"
              "import bnpzoo\n"
              "bnpzoo.rank_rows(np.zeros((4, 2)))\n"
              "assert dist.is_initialized()\n")
    env = dict(os.environ, RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(free_port()))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert (out.returncode, out.stdout.strip()) == (0, "destroyed"), out.stderr[-3000:]


@pytest.fixture
def one_rank(monkeypatch):
    """This process as the one rank of a torchrun launch (a gloo group of one, made on first use)."""
    for name, value in dict(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port())).items():
        monkeypatch.setenv(name, value)
    yield
    data_parallel.close_own_group()


@pytest.mark.cpu_state  # bit for bit across two code paths
def test_one_rank_fits_as_one_process(one_rank):
    x = blobs()[:1500]  # fewer rows than vi's start sample in a data-parallel fit: both start on all
    estimators = [lambda **kw: bnpzoo.DPGMM(inference="sga-fisher", covariance="fixed", **kw),  # a data-parallel
                  lambda **kw: bnpzoo.DPGMM(inference="natgrad-svi", covariance="fixed", **kw),  # fit's default
                  lambda **kw: bnpzoo.MixtureSVI(model=dp_gmm_model, inference="vi", guide="mean-field", **kw)]
    for estimator in estimators:
        with mock.patch.object(StickMixture, "_grows", lambda self: False):  # the steps of a data-parallel fit
            alone = estimator(random_state=0, max_iter=100).fit(x)
        ranked = estimator(random_state=0, max_iter=100, data_parallel=True).fit(x)
        assert np.array_equal(alone.means_, ranked.means_) and alone.elbo_trace_ == ranked.elbo_trace_


@pytest.mark.parametrize("command", [["fit", "hdp-gd", "--data", "blobs:n=300", "--groups", "GROUPS"],
                                     ["fit", "dp-gmm", "--data", "blobs:n=300", "--inference", "vmm"],
                                     ["compare", "--data", "blobs:n=300"]])
def test_under_torchrun_what_runs_in_one_process_is_refused(one_rank, command, tmp_path, capsys):
    np.savetxt(tmp_path / "groups.txt", np.arange(300) % 3, fmt="%d")
    assert main([str(tmp_path / "groups.txt") if a == "GROUPS" else a for a in command]) == 2
    err = capsys.readouterr().err
    assert "one process" in err or "needs an SVI learner" in err, err


def _coupled_json(command: list) -> dict:
    out = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    (line,) = [line for line in out.stdout.splitlines() if line.startswith("{")]  # rank 0's, only
    return json.loads(line)


@pytest.mark.parametrize("level", [[], ["--documents", "off"]], ids=["documents", "groups"])
def test_torchrun_runs_one_coupled_chain_whose_draws_are_one_process(level):
    """Two processes sweep half the documents (or tokens, at the group level) each and meet by
    all-reduce: with label_step='parallel' the chain is the one process's, draw for draw (its log
    joint differs only in the order of a float sum)."""
    fit = ["-m", "bnpzoo", "fit", "coupled-dp", "--data", "topics:n=20000,topics=5,vocab=200", "--iters", "10",
           "--json", *level]
    alone = _coupled_json([sys.executable, *fit, "--label-step", "parallel"])
    ranked = _coupled_json([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                            *fit, "--label-step", "parallel"])
    assert (alone["processes"], ranked["processes"]) == (1, 2)
    assert ranked["k_used"] == alone["k_used"] and ranked["n"] == alone["n"] == 20020
    assert ranked["log_joint"] == pytest.approx(alone["log_joint"], rel=1e-12, abs=0)


@pytest.mark.slow
def test_a_torchrun_chain_continues_from_its_processes_checkpoints(tmp_path):
    """Two processes write one checkpoint each; the same launch with more samples continues them and
    ends where an uninterrupted launch does."""
    def launch(*extra):
        return _coupled_json([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                              "-m", "bnpzoo", "fit", "coupled-dp", "--data", "topics:n=20000,topics=5,vocab=200",
                              "--warmup", "4", "--json", *extra])

    launch("--iters", "6", "--checkpoint", str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank-0-of-2-chain-0.pt", "rank-1-of-2-chain-0.pt"]
    continued = launch("--iters", "10", "--checkpoint", str(tmp_path))
    assert continued["log_joint"] == launch("--iters", "10")["log_joint"]


def test_one_rank_fits_the_coupled_model_as_one_process_and_checkpoints_its_share(one_rank, tmp_path):
    from bnpzoo.corpus import generated_topics

    corpus = generated_topics(12_000, n_topics=4, vocab_size=100, seed=2)
    settings = dict(max_iter=4, warmup=2, random_state=0)
    alone = bnpzoo.CoupledDP(label_step="parallel", **settings).fit(corpus)
    ranked = bnpzoo.CoupledDP(data_parallel=True, label_step="parallel", checkpoint=tmp_path, **settings).fit(corpus)
    # the same draws; the log joint's word term is summed from the count table, not token by token
    assert torch.allclose(alone.samples_["log_joint"], ranked.samples_["log_joint"], rtol=1e-12, atol=0)
    assert np.array_equal(alone.topic_word_, ranked.topic_word_)
    assert [p.name for p in tmp_path.iterdir()] == ["rank-0-of-1-chain-0.pt"]
    longer = dict(settings, max_iter=6)
    resumed = bnpzoo.CoupledDP(data_parallel=True, label_step="parallel", checkpoint=tmp_path, **longer).fit(corpus)
    assert torch.allclose(resumed.samples_["log_joint"], bnpzoo.CoupledDP(label_step="parallel", **longer).fit(
        corpus).samples_["log_joint"], rtol=1e-12, atol=0)
    # the default over ranks (approximate: one share of 12,000 tokens, from the all-reduced counts) is the
    # collapsed chain of one process
    default = bnpzoo.CoupledDP(data_parallel=True, **settings).fit(corpus)
    collapsed = bnpzoo.CoupledDP(label_step="collapsed", **settings).fit(corpus)
    assert torch.allclose(default.samples_["log_joint"], collapsed.samples_["log_joint"], rtol=1e-12, atol=0)
    assert np.array_equal(default.topic_word_, collapsed.topic_word_)
    with pytest.raises(ValueError, match="makes 1 block of documents"):  # 2 processes, as if, on one block
        with mock.patch("bnpzoo.inference.data_parallel.size", lambda group: 2):
            bnpzoo.CoupledDP(data_parallel=True, **settings).fit(generated_topics(3_000, seed=2))
    for wrong in (dict(label_step="collapsed"), dict(num_chains=2)):
        with pytest.raises(ValueError, match="fits words, with label_step='approximate', 'parallel'"):
            bnpzoo.CoupledDP(data_parallel=True, **wrong, **settings).fit(corpus)


def test_data_parallel_needs_a_process_group_and_an_svi_learner():
    with pytest.raises(ValueError, match="torchrun"):
        bnpzoo.DPGMM(inference="svmm", data_parallel=True).fit(blobs()[:200])
    with pytest.raises(ValueError, match="SVI learner"):
        bnpzoo.DPGMM(inference="vmm", data_parallel=True).fit(blobs()[:200])
