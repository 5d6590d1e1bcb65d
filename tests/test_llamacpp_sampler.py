"""The target's sampler at T > 0 in llama-server and in specdec's estimator are one: the requests
send llama-server's default truncation (`validation.SAMPLER`: top-k 40, top-p 0.95, min-p 0.05),
the real server's post-sampling distribution is specdec's `SamplingConfig` of its own
pre-sampling probabilities, and `llamacpp validate --estimate` refuses an estimate sampled
otherwise before any server starts. Real-server tests are skipped only when llama-server is not
built (scripts/llamacpp.sh)."""
from __future__ import annotations

import json
import time

import pytest
import torch

from specdec.engines.llamacpp.client import Client
from specdec.engines.llamacpp.server import LlamaServer, ServerConfig, default_model, find_binary
from specdec.engines.llamacpp.validation import SAMPLER
from specdec.errors import SpecdecError
from specdec.reference.core.sampling import SamplingConfig
from tests.cli_helpers import run_main


def test_min_p_keeps_what_is_a_share_of_the_top() -> None:
    probs = torch.tensor([0.5, 0.2, 0.1, 0.04, 0.03, 0.13])
    kept = SamplingConfig(1.0, min_p=0.1).probs(probs.log())  # 0.05 and above survive
    assert kept.tolist() == pytest.approx((torch.tensor([0.5, 0.2, 0.1, 0, 0, 0.13]) / 0.93).tolist())
    chain = SamplingConfig(1.0, **SAMPLER).probs(probs.log())  # top-p 0.95 drops 0.03 (0.97 before it)
    assert chain.tolist() == pytest.approx((torch.tensor([0.5, 0.2, 0.1, 0.04, 0, 0.13]) / 0.97).tolist())
    with pytest.raises(SpecdecError, match="min_p"):
        SamplingConfig(1.0, min_p=1.5)


def test_the_servers_sampler_is_specdecs() -> None:
    """At T = 1 with SAMPLER, every position's post-sampling distribution the server reports
    (n_probs, post_sampling_probs) is `SamplingConfig(1, **SAMPLER)` of the pre-sampling
    probabilities it reports for the same request and seed: the same tokens kept, the same
    probabilities — so the estimator's continuations at T = 1 come from the engine's law."""
    try:
        binary = find_binary()
    except SpecdecError as exc:
        pytest.skip(f"llama-server not built: {exc}")
    text = "Write one sentence about the sea, then one about the mountains."
    with LlamaServer(ServerConfig(default_model(), ctx_size=512, threads=1), binary) as server:
        client = Client(server.url)
        prompt = client.chat_ids(text)
        runs = [client.complete(prompt, 12, temperature=1.0, seed=5, n_probs=100, post_sampling_probs=post,
                                **SAMPLER).response["completion_probabilities"] for post in (False, True)]
    checked = wide = 0
    for pre, post in zip(*runs):
        assert pre["id"] == post["id"]  # one seed, one sampled path: the flag changes what is reported only
        logits = torch.tensor([p["logprob"] for p in pre["top_logprobs"]], dtype=torch.float64)
        ids = [p["id"] for p in pre["top_logprobs"]]
        ours = SamplingConfig(1.0, **SAMPLER).probs(logits)  # top-k 40 keeps 40 of the 100 reported
        expected = {i: float(p) for i, p in zip(ids, ours) if p > 0}
        theirs = {p["id"]: p["prob"] for p in post["top_probs"]}
        assert set(theirs) == set(expected), (sorted(theirs), sorted(expected))
        assert [theirs[i] for i in expected] == pytest.approx(list(expected.values()), abs=2e-5)
        checked += 1
        wide += len(expected) > 1
    assert checked == 12 and wide >= 3  # positions where the truncation left a choice: the test bites


def test_an_estimate_sampled_otherwise_is_refused_before_any_server(capsys, tmp_path) -> None:
    costs = tmp_path / "costs.json"
    costs.write_text('{"batch_timing": [{"batch_sizes": [1], "seconds": [[0.01, 0.02]], "context_tokens": 128}]}')
    estimate = {"category": "edit", "sampling": {"temperature": 1.0, "top_k": 0, "top_p": 1.0},
                "replay": {"4": {"tokens_per_iteration": 1.5, "proposed": [1, 0, 0, 0, 3]}}}
    path = tmp_path / "estimate.json"
    path.write_text(json.dumps(estimate))
    start = time.monotonic()
    code, _, err = run_main(capsys, ["llamacpp", "validate", "--costs", str(costs), "--estimate",
                                     f"ngram-simple g4={path}", "--out", str(tmp_path / "x.json")])
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "--estimate" in err and "--top-k 40 --top-p 0.95 --min-p 0.05" in err
    assert time.monotonic() - start < 5 and not (tmp_path / "x.json").exists()
    # the same estimate at T = 0 (greedy: the truncation cannot matter) is taken
    from specdec.cli.llamacpp import _estimates
    from specdec.engines.llamacpp.validation import default_grid

    estimate["sampling"]["temperature"] = 0.0
    path.write_text(json.dumps(estimate))
    assert list(_estimates([f"ngram-simple g4={path}"], default_grid())) == [("ngram-simple g4", 0.0)]
