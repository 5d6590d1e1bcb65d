"""The verifier alone, over explicit random p and q (no models).

Statistical test: Pearson chi-square at significance 1e-3 with fixed seeds (so the test is
deterministic; a correct verifier fails it with probability 1e-3 per check over seeds).
Several requests verified in one call (ragged k = 0..3, sampled and deterministic drafts side
by side): every request's emitted tokens follow its own p (chi-square per request and position,
20,000 calls), and each verdict equals the one-request verifier's with the same generator.
"""
import numpy as np
import pytest
import torch

from specdec.reference.core.sampling import sample
from specdec.reference.core.verifier import greedy_rows, verify, verify_rows
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


def _requests(gen: torch.Generator, ks=(0, 1, 2, 3), deterministic=(False, False, True, False)):
    """Per request: p [k + 1, V], q [k, V] or None (deterministic: fixed guesses)."""
    return [(random_dists(k + 1, gen), None if det or not k else random_dists(k, gen))
            for k, det in zip(ks, deterministic)]


def _drafts(requests, gen: torch.Generator) -> list[torch.Tensor]:
    return [torch.arange(p.shape[0] - 1) % VOCAB if q is None else torch.multinomial(q, 1, generator=gen)[:, 0]
            for p, q in requests]


def test_requests_verified_together_each_follow_their_p() -> None:
    gen = torch.Generator().manual_seed(5)
    requests = _requests(gen)
    p_all = torch.cat([p for p, _ in requests])
    generators = [torch.Generator().manual_seed(10 + b) for b in range(len(requests))]
    counts = [np.zeros((p.shape[0], VOCAB)) for p, _ in requests]
    for _ in range(20_000):
        verdicts = verify_rows(p_all, [q for _, q in requests], _drafts(requests, gen), generators)
        for b, verdict in enumerate(verdicts):
            for j, tok in enumerate(verdict.tokens.tolist()):
                counts[b][j, tok] += 1
    for b, (p, _) in enumerate(requests):
        for j in range(p.shape[0]):
            assert chi_square_pvalue(counts[b][j], p[j].numpy()) > 1e-3, (b, j)


def test_requests_verified_together_equal_each_verified_alone() -> None:
    gen = torch.Generator().manual_seed(6)
    for trial in range(200):
        requests = _requests(gen, ks=torch.randint(0, 4, (5,), generator=gen).tolist(),
                             deterministic=(torch.rand(5, generator=gen) < 0.3).tolist())
        drafts = _drafts(requests, gen)
        lenience = 0.5 if trial % 4 == 0 else 1.0
        together = verify_rows(torch.cat([p for p, _ in requests]), [q for _, q in requests], drafts,
                               [torch.Generator().manual_seed(trial * 10 + b) for b in range(5)], lenience)
        for b, ((p, q), draft) in enumerate(zip(requests, drafts)):
            alone = verify(p, q, draft, torch.Generator().manual_seed(trial * 10 + b), lenience)
            assert (together[b].n_accepted, together[b].tokens.tolist(), together[b].bonus) == (
                alone.n_accepted, alone.tokens.tolist(), alone.bonus)


def test_greedy_rows_are_the_verifier_on_one_hot_p() -> None:
    gen = torch.Generator().manual_seed(7)
    for _ in range(200):
        ks = torch.randint(0, 4, (4,), generator=gen).tolist()
        logits = torch.randn(sum(ks) + len(ks), VOCAB, generator=gen)
        drafts = [torch.randint(0, 2, (k,), generator=gen) for k in ks]  # tokens 0, 1: matches happen
        logits[:, :2] += 3.0
        one_hot = torch.zeros_like(logits).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
        expect = verify_rows(one_hot, [None] * len(ks), drafts, [None] * len(ks))
        got = greedy_rows(logits.argmax(-1), drafts)
        assert [(v.n_accepted, v.tokens.tolist(), v.bonus) for v in got] == [
            (v.n_accepted, v.tokens.tolist(), v.bonus) for v in expect]
