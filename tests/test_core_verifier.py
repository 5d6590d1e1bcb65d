"""The verifier alone, over explicit random p and q (no models).

Statistical test: Pearson chi-square at significance 1e-3 with fixed seeds (so the test is
deterministic; a correct verifier fails it with probability 1e-3 per check over seeds).
"""
import numpy as np
import pytest
import torch

from specdec.reference.core.sampling import sample
from specdec.reference.core.verifier import verify
from tests.stats_helpers import chi_square_pvalue

VOCAB, K, N = 6, 2, 40_000


def random_dists(rows: int, gen: torch.Generator, sharp: float = 2.0) -> torch.Tensor:
    return (torch.randn(rows, VOCAB, generator=gen) * sharp).softmax(-1)


@pytest.mark.parametrize("deterministic", [False, True])
def test_emitted_tokens_follow_p(deterministic: bool) -> None:
    """With context-free p rows, token j of an iteration (given j-1 accepted) follows p[j]."""
    gen = torch.Generator().manual_seed(1)
    p, q = random_dists(K + 1, gen), random_dists(K, gen)
    counts = np.zeros((K + 1, VOCAB))
    for _ in range(N):
        if deterministic:  # a deterministic drafter: fixed guesses, q one-hot
            draft = torch.tensor([0, 1])
            verdict = verify(p, None, draft, gen)
        else:
            draft = torch.multinomial(q, 1, generator=gen)[:, 0]
            verdict = verify(p, q, draft, gen)
        for j, tok in enumerate(verdict.tokens.tolist()):
            counts[j, tok] += 1
    for j in range(K + 1):
        assert chi_square_pvalue(counts[j], p[j].numpy()) > 1e-3, f"position {j}"


def test_acceptance_rate_matches_sum_min_including_lenience() -> None:
    """P(accept x_1) = sum min(p, q) (Cor. 3.6) and sum min(p/l, q) under lenience l (A.5)."""
    gen = torch.Generator().manual_seed(2)
    p, q = random_dists(2, gen), random_dists(1, gen)
    for lenience in (1.0, 0.5):
        n = 20_000
        accepted = 0
        for _ in range(n):
            draft = torch.multinomial(q, 1, generator=gen)[:, 0]
            accepted += verify(p, q, draft, gen, lenience=lenience).n_accepted
        alpha = float(torch.minimum(p[0] / lenience, q[0]).sum())
        se = (alpha * (1 - alpha) / n) ** 0.5
        assert abs(accepted / n - alpha) < 5 * se + 1e-9


def test_greedy_one_hot_accepts_iff_argmax_matches() -> None:
    p = torch.eye(VOCAB)[[3, 1, 4]]  # [3, vocab] one-hot target (temperature 0)
    v = verify(p, None, torch.tensor([3, 2]), None)
    assert (v.n_accepted, v.tokens.tolist(), v.bonus) == (1, [3, 1], False)
    v = verify(p, None, torch.tensor([3, 1]), None)
    assert (v.n_accepted, v.tokens.tolist(), v.bonus) == (2, [3, 1, 4], True)


def test_nothing_to_verify_draws_no_uniforms() -> None:
    gen = torch.Generator().manual_seed(3)
    state = gen.get_state()
    p = torch.eye(VOCAB)[[2]]
    v = verify(p, None, torch.empty(0, dtype=torch.long), gen)
    assert v.tokens.tolist() == [2] and v.n_accepted == 0
    # exactly one draw for the token from p, no uniforms for acceptance tests
    gen2 = torch.Generator().set_state(state)
    sample(p[0], gen2)
    assert torch.equal(gen.get_state(), gen2.get_state())


def test_inverse_cdf_sampler_is_exact() -> None:
    """specdec.reference.core.sampling.sample over rows with zeros: chi-square, 60,000 draws, α = 1e-3."""
    gen = torch.Generator().manual_seed(4)
    probs = torch.tensor([[0.0, 0.5, 0.0, 0.2, 0.3, 0.0], [0.1, 0.0, 0.0, 0.0, 0.0, 0.9]])
    draws = sample(probs.expand(30_000, 2, 6), gen)  # [30000, 2]
    for row in range(2):
        counts = np.bincount(draws[:, row].numpy(), minlength=6)
        assert counts[probs[row].numpy() == 0].sum() == 0
        assert chi_square_pvalue(counts, probs[row].numpy()) > 1e-3
