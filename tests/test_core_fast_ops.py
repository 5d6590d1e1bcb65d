"""The fast backend's short ops (kernels/short_ops.cpp, small_glu in kernels/small_gemm.cpp) and the
modules that call them (reference/model/fast_modules.py) compute what PyTorch computes:

- short_attention equals softmax(q k^T s + mask) v computed in float64, for 1..16 query rows,
  grouped-query ratios 1 and 3, heads of 64 and 128, contexts 1..300, no mask / bool / additive
  masks broadcast over heads or not, a batch of 2 with a mask per row, a strided query, and a row
  that sees nothing gives zeros (not NaN);
- small_glu equals silu(x gate^T) * (x up^T) for every row count, widths that do not fill a group;
- rms_norm equals Llama's RMSNorm;
- all of these under the 8-float AVX2 tiling too (built with -mno-avx512f on an AVX-512 CPU);
- a tiny Llama with 64-wide heads (what the attention kernel runs) on the fast backend: every part
  replaced, logits within 1e-4 of eager's for prefill, cached passes and a token tree, greedy
  decoding identical; `parts` replaces only what it names; GPT-2 (no such MLP or norm) keeps its own.
Stated tolerance: |fast - exact| <= 1e-5 max|exact| + 1e-6 for the ops (float32 sums of at most a
few hundred terms in another order).
"""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from specdec.reference.model.backend import available, use_backend
from specdec.reference.model.fast_modules import ATTENTION, FastLinear, FastMLP, FastRMSNorm
from specdec.reference.model.kernel_build import kernel
from specdec.reference.model.kv_session import KVSession
from specdec.reference.core.loop import autoregressive_decode, speculative_decode
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.model.target import TargetScorer
from specdec.reference.core.tree import trie
from specdec.reference.drafters.prompt_lookup import PromptLookupDrafter
from tests.tiny_models import tiny_gpt2, tiny_llama

TILINGS = ["native", "avx2"]


@pytest.fixture(scope="module", autouse=True)
def _kernel():
    reason = available(torch.nn.Linear(4, 4))
    if reason is not None:
        pytest.skip(reason)


def close(fast: torch.Tensor, exact: torch.Tensor, rel: float = 1e-5) -> bool:
    return bool((fast.double() - exact).abs().max() <= rel * exact.abs().max() + 1e-6)


def exact_attention(q, k, v, mask, scale) -> torch.Tensor:
    """[B, n, H, d] in float64 from q [B, H, n, d], k/v [B, Hk, L, d]: keys repeated per group."""
    rep = q.shape[1] // k.shape[1]
    k, v = (t.double().repeat_interleave(rep, 1) for t in (k, v))
    s = q.double() @ k.transpose(-1, -2) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask.double()
    p = torch.softmax(s, -1).nan_to_num(0.0)  # a row that sees nothing: zeros
    return (p @ v).transpose(1, 2)


@pytest.mark.parametrize("tiling", TILINGS)
@pytest.mark.parametrize("d, heads, kv_heads", [(64, 9, 3), (128, 4, 4), (64, 2, 1)])
def test_short_attention_matches_exact_softmax(tiling, d, heads, kv_heads) -> None:
    ops = kernel(tiling)
    g = torch.Generator().manual_seed(d + heads)
    for n, L in [(1, 1), (1, 40), (3, 17), (16, 16), (5, 300), (16, 81)]:
        for b in (1, 2):
            q = torch.randn(b, n, heads, d, generator=g).transpose(1, 2)  # strided, as attention modules pass it
            k, v = torch.randn(b, kv_heads, L, d, generator=g), torch.randn(b, kv_heads, L, d, generator=g)
            causal = torch.arange(L)[None, :] <= (L - n + torch.arange(n))[:, None]  # [n, L]
            additive = torch.randn(b, 1, n, L, generator=g).masked_fill(~causal, torch.finfo(torch.float32).min)
            per_head = torch.rand(b, heads, n, L, generator=g) < 0.7
            per_head[..., -1] = True
            for mask in (None, causal[None, None], additive, per_head):
                if mask is None and n > 1:
                    continue
                out = ops.short_attention(q, k, v, mask, d ** -0.5)
                assert out.shape == (b, n, heads, d)
                assert close(out, exact_attention(q, k, v, mask, d ** -0.5)), (n, L, b)


@pytest.mark.parametrize("tiling", TILINGS)
def test_short_attention_row_that_sees_nothing_is_zero(tiling) -> None:
    q, k, v = torch.randn(1, 2, 3, 64), torch.randn(1, 2, 10, 64), torch.randn(1, 2, 10, 64)
    mask = torch.ones(1, 1, 3, 10, dtype=torch.bool)
    mask[0, 0, 1] = False
    out = kernel(tiling).short_attention(q, k, v, mask, 0.125)
    assert torch.isfinite(out).all() and out[0, 1].abs().max() == 0
    assert close(out, exact_attention(q, k, v, mask, 0.125))


@pytest.mark.parametrize("tiling", TILINGS)
@pytest.mark.parametrize("width, inter", [(576, 1536), (40, 50), (64, 8)])
def test_small_glu_matches_silu_gate_times_up(tiling, width, inter) -> None:
    ops = kernel(tiling)
    g = torch.Generator().manual_seed(inter)
    gate, up = torch.randn(inter, width, generator=g), torch.randn(inter, width, generator=g)
    packed = ops.pack_glu(gate, up, False)
    for rows in range(1, 17):
        x = torch.randn(1, rows, width, generator=g)
        exact = F.silu(x.double() @ gate.double().T) * (x.double() @ up.double().T)
        assert close(ops.small_glu(x, packed, inter), exact, rel=1e-5), rows


@pytest.mark.parametrize("tiling", TILINGS)
def test_small_linear_and_rms_norm_under_each_tiling(tiling) -> None:
    ops = kernel(tiling)
    g = torch.Generator().manual_seed(5)
    w = torch.randn(300, 70, generator=g)
    packed = ops.pack(w, False)
    for rows in range(1, 17):
        x = torch.randn(rows, 70, generator=g)
        assert close(ops.small_linear(x, packed, 300), x.double() @ w.double().T), rows
    x, weight = torch.randn(2, 5, 576, generator=g), torch.randn(576, generator=g)
    exact = weight.double() * x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + 1e-5)
    assert close(ops.rms_norm(x, weight, 1e-5), exact)


def wide_llama() -> torch.nn.Module:
    return tiny_llama(64, seed=0, sharpness=8.0, hidden=128, heads=2, kv_heads=1)


def test_every_part_of_a_llama_is_replaced_and_logits_match() -> None:
    eager = wide_llama()
    fast = copy.deepcopy(eager)
    assert use_backend(fast, "fast") == "fast"
    kinds = [type(m) for m in fast.modules()]
    assert kinds.count(FastMLP) == 2 and kinds.count(FastRMSNorm) == 5 and fast.config._attn_implementation == ATTENTION
    assert not any(isinstance(m, FastLinear) for mlp in fast.modules() if isinstance(mlp, FastMLP)
                   for m in (mlp.gate_proj, mlp.up_proj))  # packed once, in the MLP's own weight
    ids = torch.randint(0, 64, (1, 60), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        for n in (1, 5, 16, 60):
            a, b = eager(input_ids=ids[:, :n]).logits, fast(input_ids=ids[:, :n]).logits
            assert close(b, a.double(), rel=1e-4), n
    committed, (tokens, parents) = [1, 2, 3, 9, 8, 7], trie([[3, 5, 7], [3, 5, 2], [4, 4, 4, 4], [6]])
    trees = []
    for model in (eager, fast):  # a token tree: an additive 4-D mask through the attention kernel
        session = KVSession(model)
        session.start(committed)
        trees.append(session.extend_tree(tokens, parents).logits)
    assert close(trees[1], trees[0].double(), rel=1e-4)


def test_greedy_decoding_is_identical_with_the_attention_kernel() -> None:
    eager = wide_llama()
    fast = copy.deepcopy(eager)
    use_backend(fast, "fast")
    greedy = SamplingConfig(0.0)
    for prompt in ([1, 2, 3], [5, 9, 2, 33, 7, 5, 9, 2]):
        reference = autoregressive_decode(TargetScorer(eager), prompt, 40, greedy, None).tokens
        assert autoregressive_decode(TargetScorer(fast), prompt, 40, greedy, None).tokens == reference
        for gamma in (2, 15):
            result = speculative_decode(TargetScorer(fast), PromptLookupDrafter(2), prompt, 40, gamma, greedy, None)
            assert result.tokens == reference, gamma


def test_parts_replace_only_what_they_name() -> None:
    model = wide_llama()
    use_backend(model, "fast", parts=("linear", "norm"))
    kinds = [type(m) for m in model.modules()]
    assert FastMLP not in kinds and kinds.count(FastRMSNorm) == 5 and model.config._attn_implementation == "sdpa"
    gpt2 = tiny_gpt2(64)
    use_backend(gpt2, "fast")  # Conv1D projections, LayerNorm, a GELU MLP: nothing of this kind to replace
    assert not any(isinstance(m, (FastMLP, FastRMSNorm)) for m in gpt2.modules())


def test_one_build_per_tiling_and_its_flags_stay_put() -> None:
    """torch's load() appends its link flags to the list it is given: the module's flag tuples stay
    as they are, and asking for the default kernel by name loads the same build (two loads with
    different flags had every later process recompile the extension)."""
    from specdec.reference.model import kernel_build

    assert kernel_build.kernel() is kernel_build.kernel("native")
    assert kernel_build.FLAGS == ("-O3", "-march=native") and kernel_build.OPENMP == ("-fopenmp",)
    with pytest.raises(ValueError, match="unknown kernel tiling"):
        kernel_build.kernel("avx1024")


class ClampedMLP(torch.nn.Module):
    """A SwiGLU MLP that clamps gate and up at 10, as DeepSeek-V4's does: the same parts as Llama's."""

    def __init__(self, width: int, inter: int) -> None:
        super().__init__()
        self.gate_proj, self.up_proj = torch.nn.Linear(width, inter, bias=False), torch.nn.Linear(width, inter, bias=False)
        self.down_proj, self.act_fn = torch.nn.Linear(inter, width, bias=False), torch.nn.SiLU()
        for layer in (self.gate_proj, self.up_proj, self.down_proj):
            torch.nn.init.normal_(layer.weight, std=0.05)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x).clamp(max=10)) * self.up_proj(x).clamp(-10, 10))


class GatedNorm(torch.nn.Module):
    """An RMS norm with Llama's attributes whose forward takes a gate too (Mamba-style)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight, self.variance_epsilon = torch.nn.Parameter(torch.ones(width)), 1e-6

    def forward(self, x: torch.Tensor, gate: torch.Tensor | None = None) -> torch.Tensor:
        x = x if gate is None else x * F.silu(gate)
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)


def test_modules_that_only_look_alike_keep_their_own() -> None:
    """A clamped SwiGLU (the clamp reached only by large inputs) and a gated norm are not replaced;
    Falcon, whose code asks whether attention is named "sdpa", keeps SDPA (and its logits)."""
    from transformers import FalconConfig, FalconForCausalLM

    torch.manual_seed(0)
    model = torch.nn.Sequential(ClampedMLP(128, 256), GatedNorm(128))
    use_backend(model, "fast", parts=("mlp", "norm"))
    assert [type(m) for m in model] == [ClampedMLP, GatedNorm]
    falcon = FalconForCausalLM(FalconConfig(vocab_size=64, hidden_size=128, num_hidden_layers=2,
                                            num_attention_heads=2, alibi=False)).eval()
    fast = copy.deepcopy(falcon)
    use_backend(fast, "fast")
    assert fast.config._attn_implementation == "sdpa"
    ids = torch.randint(0, 64, (1, 6), generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        assert close(fast(input_ids=ids).logits, falcon(input_ids=ids).logits.double(), rel=1e-4)


def test_what_the_kernels_do_not_take_goes_to_pytorch() -> None:
    """Autograd wanted: FastLinear's gradients equal F.linear's. A batch-1 query over batch-2 keys, and a
    mask longer than the keys (transformers 4.x passed one), give SDPA's answer."""
    from specdec.reference.model.fast_modules import short_attention

    g = torch.Generator().manual_seed(3)
    linear = torch.nn.Linear(64, 48)
    fast = FastLinear(copy.deepcopy(linear))
    x = torch.randn(2, 64, generator=g, requires_grad=True)
    fast(x).sum().backward()
    x2 = x.detach().clone().requires_grad_(True)
    linear(x2).sum().backward()
    assert torch.allclose(x.grad, x2.grad, atol=1e-5) and torch.allclose(fast.weight.grad, linear.weight.grad, atol=1e-5)
    module = torch.nn.Module()
    q, k, v = torch.randn(1, 2, 3, 64, generator=g), torch.randn(2, 2, 10, 64, generator=g), torch.randn(2, 2, 10, 64, generator=g)
    mask = torch.ones(2, 1, 3, 10, dtype=torch.bool)
    with torch.no_grad():
        out, _ = short_attention(module, q, k, v, mask)
        ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2)
        assert close(out, ref.double())
        longer = torch.ones(1, 1, 3, 14, dtype=torch.bool)
        longer[..., :4] = False
        out, _ = short_attention(module, q, k[:1], v[:1], longer)
        assert close(out, exact_attention(q, k[:1], v[:1], longer[..., :10], 64 ** -0.5))
