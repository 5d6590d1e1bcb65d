"""Estimation over several processes: the split of the prompts, the gather on rank 0 with
failures named by rank (2 real gloo processes), and the end-to-end claim of the design —
`torchrun --nproc-per-node 2 -m specdec estimate` (and validate's alpha part) gives exactly
the single-process result for the same seed, on a tiny saved model, on CPU."""
from __future__ import annotations

import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specdec.reference.distributed.collect import RankFailure, gather_on_main
from specdec.reference.distributed.ranks import Ranks, process_group, rank_device

ROOT = Path(__file__).resolve().parents[1]


# ---- the split ------------------------------------------------------------------------
@pytest.mark.parametrize("n,chunk", [(0, 4), (1, 4), (10, 3), (16, 16), (79, 16), (40, 1)])
@pytest.mark.parametrize("world", [1, 2, 3, 8])
def test_shares_partition_the_prompts_into_the_same_chunks(n: int, chunk: int, world: int) -> None:
    shares = [Ranks(r, world, r, world).share(n, chunk) for r in range(world)]
    chunks = sorted((c for share in shares for c in share), key=lambda c: c.start)
    assert chunks == Ranks().share(n, chunk)  # the chunks one process computes, each exactly once
    assert [i for c in chunks for i in c] == list(range(n))
    assert sum(not s for s in shares) == Ranks(0, world, 0, world).idle(n, chunk)
    assert 0 in [i for c in shares[0] for i in c] or n == 0  # rank 0 holds prompt 0 (the timing context)


def test_ranks_from_torchrun_environment() -> None:
    env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
    assert Ranks.from_env(env) == Ranks(3, 4, 1, 2)
    assert Ranks.from_env({}) == Ranks() and not Ranks().parallel and Ranks().main
    for bad in ({"RANK": "x", "WORLD_SIZE": "2"}, {"RANK": "2", "WORLD_SIZE": "2"}):
        with pytest.raises(ValueError):
            Ranks.from_env(bad)


def test_rank_devices() -> None:
    assert rank_device("cpu", Ranks(1, 2, 1, 2)) == "cpu"
    with pytest.raises(ValueError, match="unknown device"):
        rank_device("tpu", Ranks())
    import torch
    if torch.cuda.device_count() == 0:  # CI: no GPU
        with pytest.raises(ValueError, match="no CUDA device"):
            rank_device("cuda", Ranks(1, 2, 1, 2))
    else:
        assert rank_device("cuda", Ranks(1, 2, 0, 1)) == "cuda:0"
        with pytest.raises(ValueError, match="on one GPU"):
            rank_device("cuda:0", Ranks(1, 2, 1, 2))


# ---- the gather, with two real processes -----------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank: int, port: int, fail_rank: int, results) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    ranks = Ranks(rank, 2, rank, 2)

    def work():
        if rank == fail_rank:
            raise ValueError(f"no such file: shard-{rank}.bin")
        return {"rank": rank, "squares": [i * i for c in ranks.share(10, 3) for i in c]}

    try:
        with process_group(ranks, "cpu", timeout_s=60):
            got = gather_on_main(ranks, work)
        results.put((rank, "ok", got))
    except RankFailure as exc:
        results.put((rank, "failure", str(exc)))
        raise SystemExit(1)


def _run_two(fail_rank: int) -> tuple[dict, list[int]]:
    ctx = multiprocessing.get_context("spawn")
    results, port = ctx.Queue(), _free_port()
    procs = [ctx.Process(target=_rank_main, args=(r, port, fail_rank, results)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode is not None, "a rank hung"
    out = {}
    for _ in range(2 if fail_rank < 0 else 1):  # a failed rank puts nothing (it exits quietly)
        rank, status, value = results.get(timeout=30)
        out[rank] = (status, value)
    return out, [p.exitcode for p in procs]


def test_gather_brings_every_rank_to_rank_zero_in_rank_order() -> None:
    out, codes = _run_two(fail_rank=-1)
    assert codes == [0, 0]
    assert out[1] == ("ok", None)  # other ranks get nothing back
    status, got = out[0]
    assert status == "ok" and [g["rank"] for g in got] == [0, 1]
    assert sorted(x for g in got for x in g["squares"]) == [i * i for i in range(10)]


def test_a_failing_rank_stops_the_job_with_its_name() -> None:
    out, codes = _run_two(fail_rank=1)
    assert codes == [1, 1]  # the failed rank exits 1 quietly; rank 0 reports and exits 1
    status, message = out[0]
    assert status == "failure" and message == "rank 1 of 2 failed: no such file: shard-1.bin"
    assert 1 not in out  # rank 1 said nothing


# ---- torchrun end to end ------------------------------------------------------------------
def _command(args: list[str], processes: int, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))  # one thread per process in both runs
    launcher = ([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}",
                 "-m", "specdec"] if processes > 1 else [sys.executable, "-m", "specdec"])
    return subprocess.run(launcher + args, capture_output=True, text=True, timeout=600, env=env, cwd=cwd)


ALPHA_KEYS = ("alpha", "alpha_ci", "n_positions", "prompts", "beta_quantiles", "beta_histogram", "alpha_lenience",
              "proposal_rate", "alpha_when_proposed", "beta_mean_per_prompt", "replay")


@pytest.mark.parametrize("drafter,temperature", [("model", "1"), ("lookup:2", "0")])
def test_estimate_with_two_processes_equals_one(tiny_pair, tmp_path, drafter: str, temperature: str
                                                ) -> None:
    spec = f"model:{tiny_pair.draft}" if drafter == "model" else drafter
    args = ["estimate", "--target", str(tiny_pair.target), "--prompts-file", str(tiny_pair.prompts), "--drafter",
            spec, "--tokens", "120", "--new-tokens", "10", "--batch-size", "3", "--temperature", temperature,
            "--top-k", "20", "--no-timing", "--bootstrap", "300", "--seed", "7", "--json"]
    one, two = _command(args, 1, tmp_path), _command(args, 2, tmp_path)
    assert one.returncode == 0, one.stderr
    assert two.returncode == 0, two.stderr
    a, b = json.loads(one.stdout), json.loads(two.stdout)  # rank 0 alone printed: one JSON object
    assert b["processes"]["count"] == 2 and [r["prompts"] for r in b["processes"]["per_rank"]] == [6, 6]
    assert a["n_positions"] == 120 and b["n_positions"] == 120
    for key in ALPHA_KEYS:
        assert a.get(key) == pytest.approx(b.get(key), rel=1e-12, abs=1e-12) if isinstance(a.get(key), float) \
            else a.get(key) == b.get(key), key


def test_processes_option_launches_the_ranks_itself(tiny_pair, tmp_path) -> None:
    """`specdec estimate --processes 2` (no torchrun on the command line) gives what torchrun with
    two processes gives; a bad option is our one line, said once, with nothing of torchrun's."""
    args = ["estimate", "--target", str(tiny_pair.target), "--prompts-file", str(tiny_pair.prompts), "--drafter",
            "lookup:2", "--tokens", "120", "--new-tokens", "10", "--batch-size", "3", "--no-timing",
            "--bootstrap", "300", "--seed", "7", "--json"]
    launched = _command(args + ["--processes", "2"], 1, tmp_path)
    assert launched.returncode == 0, launched.stderr
    torchrun = _command(args, 2, tmp_path)
    a, b = json.loads(launched.stdout), json.loads(torchrun.stdout)
    assert a["processes"]["count"] == 2 and a["alpha"] == b["alpha"] and a["n_positions"] == b["n_positions"] == 120
    bad = _command(args + ["--processes", "2", "--temperature", "-1"], 1, tmp_path)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "--temperature" in bad.stderr
    under = _command(args + ["--processes", "2"], 2, tmp_path)
    assert under.returncode != 0 and "run it without torchrun" in under.stderr


def test_validate_alpha_part_with_two_processes_equals_one(tiny_pair, tmp_path) -> None:
    def args(out: str) -> list[str]:
        return ["validate", "--target", str(tiny_pair.target), "--prompts-file", str(tiny_pair.prompts),
                "--drafter", f"d=model:{tiny_pair.draft}", "--drafter", "lookup:2", "--gammas", "1,2",
                "--temperatures", "0,1", "--prompts", "2", "--new-tokens", "8", "--repeats", "1",
                "--alpha-tokens", "80", "--alpha-new-tokens", "8", "--batch-size", "3", "--max-k", "4", "--timing-repeats", "2",
                "--sweep-repeats", "0", "--no-figures", "--out", str(tmp_path / out), "--seed", "3", "--json"]
    one, two = _command(args("one"), 1, tmp_path), _command(args("two"), 2, tmp_path)
    assert one.returncode == 0, one.stderr
    assert two.returncode == 0, two.stderr
    a, b = (json.loads((tmp_path / name / "validation.json").read_text()) for name in ("one", "two"))
    assert a["alpha"] == b["alpha"] and len(a["alpha"]) == 4
    assert json.loads(two.stdout)["machine"]["processes"] == 2


def test_commands_that_do_not_split_refuse_several_processes(tiny_pair, tmp_path) -> None:
    result = _command(["decode", "--target", str(tiny_pair.target), "--prompt", "w1 w2"], 2, tmp_path)
    assert result.returncode != 0
    ours = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert ours == ["Error: specdec decode runs in one process; under torchrun only `specdec estimate` and the alpha "
                    "part of `specdec validate` are split over processes"]  # said once, by rank 0


@pytest.mark.slow
def test_estimate_on_the_default_target_with_two_processes_equals_one(tmp_path) -> None:
    """The same claim on SmolLM2-135M-Instruct with its held-out prompts (real weights, 49k vocabulary)."""
    args = ["estimate", "--drafter", "lookup", "--temperature", "1", "--tokens", "128", "--new-tokens", "16",
            "--batch-size", "2", "--no-timing", "--bootstrap", "200", "--json"]
    one, two = _command(args, 1, tmp_path), _command(args, 2, tmp_path)
    assert one.returncode == 0, one.stderr
    assert two.returncode == 0, two.stderr
    a, b = json.loads(one.stdout), json.loads(two.stdout)
    assert a["n_positions"] == b["n_positions"] == 128 and b["processes"]["count"] == 2
    for key in ALPHA_KEYS:
        assert a.get(key) == b.get(key), key


def _ranks_of(launcher: int) -> list[int]:
    """The pids of the processes whose environment names `launcher` as their launcher (its ranks)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                env = (entry / "environ").read_bytes()
            except OSError:
                continue
            if f"SPECDEC_LAUNCHER={launcher}\0".encode() in env:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM], ids=["SIGKILL", "SIGINT", "SIGTERM"])
def test_the_ranks_die_with_the_launcher(tiny_pair, tmp_path, signum) -> None:
    """`estimate --processes 2` signalled mid-run: SIGINT exits 130 and SIGTERM 143 with one line;
    after SIGKILL of the launcher (no handler runs) its ranks end too, within the grace period."""
    args = [sys.executable, "-m", "specdec", "estimate", "--target", str(tiny_pair.target), "--prompts-file",
            str(tiny_pair.prompts), "--drafter", "lookup:2", "--tokens", "5000000", "--new-tokens", "10",
            "--no-timing", "--processes", "2"]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    log = (tmp_path / "stderr").open("w+b")  # a file, not a pipe: a surviving rank would hold a pipe open
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log, env=env, cwd=tmp_path,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while len(ranks := _ranks_of(proc.pid)) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert len(ranks) == 2, (tmp_path / "stderr").read_text() if proc.poll() is not None else "no ranks"
        time.sleep(3)  # the ranks are importing and loading: well inside the command
        proc.send_signal(signum)
        code = proc.wait(timeout=60)
        deadline = time.monotonic() + 30
        while any(_alive(p) for p in ranks) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(_alive(p) for p in ranks), "a rank outlived its launcher"
        err = (tmp_path / "stderr").read_text()
        if signum != signal.SIGKILL:
            assert "Traceback" not in err, err[-2000:]
            assert code == (130 if signum == signal.SIGINT else 143), (code, err[-2000:])
            assert err.strip().splitlines()[-1] in ("Interrupted.", "Terminated."), err[-2000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in _ranks_of(proc.pid):
            os.kill(pid, signal.SIGKILL)
        log.close()
