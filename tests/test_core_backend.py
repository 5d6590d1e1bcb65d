"""The fast target backend (a packed-weight kernel for passes over 1..16 tokens) computes the
same model as eager PyTorch: outputs equal up to floating-point reordering, stated as
|fast - eager| <= 1e-4 max|eager| + 1e-5 (fp32 dot products of a few hundred terms summed
in another order), greedy decoding token for token identical, and the KV cache behaves the
same after rejections. The kernel is built once per machine (scripts/setup.sh does it)."""
from __future__ import annotations

import copy
import json

import pytest
import torch
import torch.nn.functional as F

from specdec.reference.core.seams import Proposal, Verdict
from specdec.reference.model.backend import available, use_backend
from specdec.reference.model.fast_modules import MAX_ROWS, FastLinear
from specdec.reference.core.loop import autoregressive_decode, speculative_decode
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.model.target import TargetScorer
from specdec.reference.drafters.neural import NeuralDrafter
from specdec.reference.drafters.prompt_lookup import PromptLookupDrafter
from tests.tiny_models import tiny_gpt2, tiny_llama

GREEDY = SamplingConfig(0.0)


def close(fast: torch.Tensor, eager: torch.Tensor) -> bool:
    return bool((fast - eager).abs().max() <= 1e-4 * eager.abs().max() + 1e-5)


@pytest.fixture(scope="module", autouse=True)
def _kernel():
    reason = available(torch.nn.Linear(4, 4))
    if reason is not None:
        pytest.skip(reason)


@pytest.mark.parametrize("shape", [(32, 64), (48, 50), (576, 1536), (7, 1)])
@pytest.mark.parametrize("bias", [False, True])
def test_linear_matches_eager_for_every_row_count(shape, bias: bool) -> None:
    torch.manual_seed(0)
    linear = torch.nn.Linear(*shape, bias=bias)
    fast = FastLinear(linear)
    with torch.no_grad():  # with autograd wanted, the fast modules run PyTorch's ops (tests/test_core_fast_ops.py)
        for k in range(1, MAX_ROWS + 3):  # 17 and 18 rows take the eager path
            x = torch.randn(1, k, shape[0])
            assert close(fast(x), F.linear(x, linear.weight, linear.bias)), k


def fast_copy(model: torch.nn.Module) -> torch.nn.Module:
    out = copy.deepcopy(model)
    assert use_backend(out, "fast") == "fast"
    return out


@pytest.mark.parametrize("arch", [tiny_llama, tiny_gpt2], ids=["llama", "gpt2"])
def test_model_logits_match_eager(arch) -> None:
    eager = arch(64, seed=0, sharpness=8.0)
    fast = fast_copy(eager)
    assert isinstance(fast.get_output_embeddings(), FastLinear) or arch is tiny_gpt2  # GPT-2 uses Conv1D inside
    ids = torch.randint(0, 64, (1, 40), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        for n in (1, 5, 16, 40):
            assert close(fast(input_ids=ids[:, :n]).logits, eager(input_ids=ids[:, :n]).logits), n


def test_greedy_decoding_is_identical_through_the_fast_path() -> None:
    eager = tiny_llama(64, seed=0, sharpness=8.0)
    fast = fast_copy(eager)
    draft = tiny_llama(64, seed=3, sharpness=8.0)
    for prompt in ([1, 2, 3], [5, 9, 2, 33, 7, 5, 9]):
        reference = autoregressive_decode(TargetScorer(eager), prompt, 40, GREEDY, None).tokens
        assert autoregressive_decode(TargetScorer(fast), prompt, 40, GREEDY, None).tokens == reference
        for gamma in (1, 4, 15):
            for drafter in (NeuralDrafter(draft, 64), NeuralDrafter(fast_copy(draft), 64), PromptLookupDrafter(2)):
                result = speculative_decode(TargetScorer(fast), drafter, prompt, 40, gamma, GREEDY, None)
                assert result.tokens == reference, (gamma, type(drafter).__name__)


def test_kv_cache_after_rejections_matches_eager() -> None:
    """score k drafts, keep some, append the corrected token, score again: every step's
    logits agree between the backends and both caches hold the same length."""
    eager = tiny_llama(64, seed=0, sharpness=8.0)
    fast = fast_copy(eager)
    a, b = TargetScorer(eager), TargetScorer(fast)
    rng = torch.Generator().manual_seed(2)
    for s in (a, b):
        s.start([3, 1, 4, 1, 5])
    with torch.inference_mode():
        for step in range(12):
            k = int(torch.randint(0, 8, (1,), generator=rng))
            draft = torch.randint(0, 64, (k,), generator=rng).tolist()
            la, lb = (s.score(Proposal(torch.tensor(draft, dtype=torch.long))).logits for s in (a, b))
            assert close(lb, la), step
            keep = int(torch.randint(0, k + 1, (1,), generator=rng))
            tokens = draft[:keep] + [int(la[keep].argmax())]
            for s in (a, b):
                s.commit(Verdict(keep, torch.tensor(tokens), keep == k))
            assert a.session.cache.get_seq_length() == b.session.cache.get_seq_length()
            assert a.committed == b.committed


def test_measured_choice_is_recorded(monkeypatch, tmp_path) -> None:
    """auto's choice comes from timing a model's passes on both backends once, recorded and reused."""
    import specdec.reference.model.backend as backend

    monkeypatch.setattr(backend, "build_dir", lambda description=None: tmp_path)
    monkeypatch.setattr(backend, "PROBE_CONFIG", dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                                      num_attention_heads=2, num_key_value_heads=1, vocab_size=64))
    record = backend.measured_choice()
    times = record["seconds"]
    assert record["choice"] == ("fast" if sum(times["fast"].values()) <= sum(times["eager"].values()) else "eager")
    assert record["lanes"] in (8, 16) and json.loads((tmp_path / backend.AUTO_RECORD).read_text()) == record
    other = {"choice": "eager" if record["choice"] == "fast" else "fast", "source": record["source"],
             "probe": record["probe"]}
    (tmp_path / backend.AUTO_RECORD).write_text(json.dumps(other))
    assert backend.measured_choice()["choice"] != record["choice"]  # read back, not measured again


def test_backend_choice(monkeypatch) -> None:
    import specdec.reference.model.backend as backend

    model = tiny_llama(64)
    assert use_backend(copy.deepcopy(model), "eager") == "eager"
    monkeypatch.setattr(backend, "measured_choice", lambda: {"choice": "fast"})
    assert use_backend(copy.deepcopy(model), "auto") == "fast"
    monkeypatch.setattr(backend, "measured_choice", lambda: {"choice": "eager"})  # measured slower here: eager
    assert use_backend(copy.deepcopy(model), "auto") == "eager"
    assert use_backend(copy.deepcopy(model), "fast") == "fast"  # asked for explicitly: still runs
    with pytest.raises(ValueError, match="float32"):
        use_backend(copy.deepcopy(model).to(torch.bfloat16), "fast")
    assert use_backend(copy.deepcopy(model).to(torch.bfloat16), "auto") == "eager"
    with pytest.raises(ValueError, match="unknown target backend"):
        use_backend(model, "turbo")


def test_kernel_runs_on_torchs_threads() -> None:
    """The kernel's at::parallel_for is OpenMP: a build without -fopenmp runs it on one thread
    (every build did until 2026-11-24, at half the speed on two cores)."""
    from specdec.reference.model.kernel_build import kernel

    torch.set_num_threads(2)  # the fast suite runs on one (conftest restores it afterwards)
    assert kernel().parallel_threads(64) == 2
