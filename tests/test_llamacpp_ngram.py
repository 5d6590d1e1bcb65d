"""llama.cpp's n-gram drafters in specdec (`llamacpp:ngram-simple`, `llamacpp:ngram-mod`,
reference/drafters/llamacpp_ngram.py): their rules on hand-made sequences, and, against a real
llama-server, the same drafts: replayed on the tokens the server emitted at T = 0, they make
exactly the drafts, draft tokens and accepted tokens its /metrics counters report; the live page,
parsed, gives those counts and the steps (tokens_predicted_total) the plan's draft share needs. Real-server
tests are skipped only when llama-server is not built (scripts/llamacpp.sh).
"""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from specdec.engines.llamacpp.client import Client
from specdec.engines.llamacpp.server import LlamaServer, ServerConfig, default_model, find_binary
from specdec.engines.llamacpp.synthetic import SyntheticAcceptance, conditional, eog_ids, rates_from_length
from specdec.engines.llamacpp.validation import counters
from specdec.engines.metrics import read_counts
from specdec.errors import SpecdecError
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.seams import Verdict
from specdec.reference.drafters.llamacpp_ngram import NgramModDrafter, NgramSimpleDrafter, server_steps
from specdec.reference.drafters.spec import DRAFTER_KINDS, DrafterSpec, llamacpp_args

GREEDY = SamplingConfig(temperature=0.0)


def _draft(drafter, tokens, gamma):
    drafter.start(tokens)
    return drafter.propose(gamma, GREEDY, None).tokens.tolist()


def test_spec_parses_and_refuses_in_one_line() -> None:
    assert llamacpp_args("ngram-simple") == ("ngram-simple", 12)
    assert llamacpp_args("ngram-simple:3") == ("ngram-simple", 3)
    assert llamacpp_args("ngram-mod") == ("ngram-mod", 24, 1)
    assert llamacpp_args("ngram-mod:8:0") == ("ngram-mod", 8, 0)
    for bad in (None, "", "ngram-cache", "ngram-simple:0", "ngram-simple:3:1", "ngram-mod:x", "ngram-mod:8:1:2"):
        with pytest.raises(SpecdecError, match="llamacpp:ngram-simple"):
            llamacpp_args(bad)


def test_ngram_simple_skips_the_match_a_token_back_and_never_falls_back() -> None:
    #            0  1  2  3  4  5  6  7  8  9 10 11 12
    seq = [9, 1, 2, 3, 4, 5, 6, 1, 2, 3, 7, 1, 2]
    # pattern (1, 2): its latest earlier occurrence is at 7, followed by 3 7 1; the copy stops
    # before the sampled token (index 12)
    assert _draft(NgramSimpleDrafter(2), seq, 2) == [3, 7]
    assert _draft(NgramSimpleDrafter(2), seq, 4) == [3, 7, 1]
    assert _draft(NgramSimpleDrafter(2), seq, 9) == []  # the sequence must hold more than N + gamma + 1 tokens
    assert _draft(NgramSimpleDrafter(3), seq, 3) == []  # (3, 1, 2) never occurred: no shorter pattern instead
    assert _draft(NgramSimpleDrafter(4), seq, 1) == []  # copy_max 1 < N
    # in a run the latest occurrence not a token back (ending two back) leaves one token to copy,
    # fewer than N: no draft, though an older occurrence could give two (prompt lookup drafts)
    run = [5, 8, 8, 8, 8, 8, 8, 8, 8]
    assert _draft(NgramSimpleDrafter(2), run, 2) == []
    from specdec.reference.drafters.prompt_lookup import PromptLookupDrafter

    assert _draft(PromptLookupDrafter(2, 2), run, 2) == [8]


def test_ngram_mod_chains_windows_and_adds_new_ones_in_chunks() -> None:
    prompt = [1, 2, 3, 4, 5, 1, 2, 3]
    drafter = NgramModDrafter(n_match=3, n_min=1)
    assert _draft(drafter, prompt, 4) == [4, 5, 1, 2]  # (1 2 3) -> 4, (2 3 4) -> 5, (3 4 5) -> 1, (4 5 1) -> 2
    drafter.commit(Verdict(0, torch.tensor([9, 9]), False), None)  # (3 9 9) unknown: nothing
    assert drafter.propose(4, GREEDY, None).tokens.tolist() == []
    # 23 new tokens ending in a window seen among them: not in the table yet (32 must arrive first)
    drafter.commit(Verdict(0, torch.tensor(list(range(10, 30)) + [10, 11, 12]), False), None)
    assert drafter.propose(3, GREEDY, None).tokens.tolist() == []
    # 23 more: the chunk goes in at this draft, the latest occurrence's follower winning
    drafter.commit(Verdict(0, torch.tensor(list(range(30, 50)) + [10, 11, 12]), False), None)
    assert drafter.propose(3, GREEDY, None).tokens.tolist() == [30, 31, 32]
    # the prompt's last window has no follower, so a chain from a repeat made after the prompt ends there
    for n_min, drafted in ((1, [4, 5, 6]), (3, [4, 5, 6]), (4, [])):
        drafter = NgramModDrafter(n_match=3, n_min=n_min)
        drafter.start([1, 2, 3, 4, 5, 6])
        drafter.commit(Verdict(0, torch.tensor([1, 2, 3]), False), None)
        assert drafter.propose(8, GREEDY, None).tokens.tolist() == drafted


def build_drafter_from_spec(spec: str):
    """The registry's way (`specdec.reference.drafters.factory.make_drafter`) without a target."""
    import importlib

    s = DrafterSpec.parse(spec)
    return importlib.import_module(DRAFTER_KINDS[s.kind].module).build_drafter(s.arg, None)[0]


def test_the_registry_builds_them() -> None:
    drafter = build_drafter_from_spec("llamacpp:ngram-mod:8")
    assert isinstance(drafter, NgramModDrafter) and drafter.n_match == 8 and drafter.deterministic
    assert isinstance(build_drafter_from_spec("llamacpp:ngram-simple:3"), NgramSimpleDrafter)


def _replay(drafter, prompt: list[int], emitted: list[int], gamma: int) -> np.ndarray:
    """(drafts, draft tokens, accepted) of llama-server's loop over its own output at T = 0."""
    steps = server_steps(drafter, prompt, emitted, gamma)
    return np.array([sum(k > 0 for k, _ in steps), sum(k for k, _ in steps), sum(n for _, n in steps)])


@pytest.mark.parametrize("flags, spec, gamma", [
    (("--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3", "--spec-ngram-simple-size-m", "6"),
     "llamacpp:ngram-simple:3", 6),
    (("--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "1", "--spec-ngram-simple-size-m", "4"),
     "llamacpp:ngram-simple:1", 4),
    (("--spec-type", "ngram-mod", "--spec-ngram-mod-n-match", "6", "--spec-ngram-mod-n-min", "1",
      "--spec-ngram-mod-n-max", "8"), "llamacpp:ngram-mod:6:1", 8),
    (("--spec-type", "ngram-mod", "--spec-ngram-mod-n-min", "1", "--spec-ngram-mod-n-max", "32"),
     "llamacpp:ngram-mod", 32),
])
def test_the_drafts_are_the_real_servers(flags, spec, gamma) -> None:
    try:
        binary = find_binary()
    except SpecdecError as exc:
        pytest.skip(f"llama-server not built: {exc}")
    text = ("The river rose in the night and the village moved its boats up the hill, one by one, "
            "while the old bell rang from the chapel. ")
    with LlamaServer(ServerConfig(default_model(), ctx_size=1024, threads=1, extra=flags), binary) as server:
        client = Client(server.url)
        ids = client.tokenize(text)
        prompt = ids * 3
        before = counters(client)[0]
        done = client.complete(prompt, 72, temperature=0.0, return_tokens=True, ignore_eos=True)
        reported = (counters(client)[0] - before).astype(int)
        page = read_counts(client.metrics())  # the live page, as `plan --from` reads it

    emitted = [int(t) for t in done.response["tokens"]]
    assert done.timings["prompt_n"] == len(prompt) and len(emitted) == 72
    drafter = build_drafter_from_spec(spec)
    replayed = _replay(drafter, prompt, emitted, gamma)
    assert reported[0] >= 2  # the prompt repeats: the engine drafted
    assert replayed.tolist() == reported.tolist()
    # its steps: the 72 tokens less those accepted (the first came from the prompt's pass, so one too many)
    assert (page.drafts, page.accepted_tokens, page.steps) == (reported[0], reported[2], 72 - reported[2])
    assert page.draft_share == reported[0] / (72 - reported[2])


@pytest.mark.parametrize("rates, temperature", [("0.9,0.81,0.729,0.6561", 0.0), ("0.8,0.5,0.5,0.2", 1.0)])
def test_synthetic_acceptance_replays_the_real_servers_draws(rates, temperature) -> None:
    """--spec-synth-rates with a request's seed: specdec's copy of the server's generator and
    draws (engines/llamacpp/synthetic.py) replays every verify step — the drafts, their tokens and
    how many were accepted equal the server's counters, and every accepted token is the one it
    emitted (the replay checks that itself)."""
    try:
        binary = find_binary()
    except SpecdecError as exc:
        pytest.skip(f"llama-server not built: {exc}")
    flags = ("--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "1", "--spec-ngram-simple-size-m", "4",
             "--spec-synth-rates", rates)
    text = "Copy this list: apples, pears, plums, apples, pears, plums, figs, apples, pears, plums."
    with LlamaServer(ServerConfig(default_model(), ctx_size=1024, threads=1, extra=flags), binary) as server:
        client = Client(server.url)
        prompt = client.chat_ids(text)
        eog = eog_ids(client)
        runs = []
        for seed in (3, 11):
            before = counters(client)[0]
            done = client.complete(prompt, 64, temperature=temperature, seed=seed, return_tokens=True,
                                   ignore_eos=True)
            runs.append((seed, [int(t) for t in done.response["tokens"]], (counters(client)[0] - before).astype(int)))

    assert 2 in eog  # <|im_end|>, the chat template's turn end, is in the prompt and may be drafted
    rate_list = [float(x) for x in rates.split(",")]
    for seed, emitted, reported in runs:
        steps = server_steps(NgramSimpleDrafter(1), prompt, emitted, 4,
                             SyntheticAcceptance(rate_list, seed, eog).accepted)
        replayed = [sum(k > 0 for k, _ in steps), sum(k for k, _ in steps), sum(n for _, n in steps)]
        assert reported[0] >= 10 and replayed == reported.tolist()
    (seed, emitted, reported), (other, _, _) = runs
    assert runs[0][2].tolist() != runs[1][2].tolist()  # two seeds, two sequences of draws
    try:  # the other request's seed does not replay this one: the match above is the draws', not luck
        steps = server_steps(NgramSimpleDrafter(1), prompt, emitted, 4,
                             SyntheticAcceptance(rate_list, other, eog).accepted)
        assert [sum(k > 0 for k, _ in steps), sum(k for k, _ in steps), sum(n for _, n in steps)] != reported.tolist()
    except SpecdecError as exc:  # or it accepts a token the server did not emit, and says so
        assert "synthetic replay" in str(exc)


def test_synthetic_rates_are_the_servers() -> None:
    """--spec-synth-len L: the rates specdec derives are those the real server prints (%.6g), they
    sum to L - 1, and the conditional probabilities are the ratios the server draws against."""
    try:
        binary = find_binary()
    except SpecdecError as exc:
        pytest.skip(f"llama-server not built: {exc}")
    flags = ("--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "1", "--spec-ngram-simple-size-m", "5",
             "--spec-synth-len", "2.7")
    with LlamaServer(ServerConfig(default_model(), ctx_size=512, threads=1, extra=flags), binary) as server:
        logged = re.search(r"synthetic acceptance: n_max = 5, mean length = ([\d.]+), rates = \[([^\]]*)\]",
                           server.log_text())
    assert logged is not None
    rates = rates_from_length(2.7, 5)
    assert [f"{r:.6g}" for r in rates] == logged.group(2).split(", ")
    assert sum(rates) == pytest.approx(1.7, abs=1e-6) and float(logged.group(1)) == pytest.approx(2.7, abs=1e-5)
    assert conditional(rates) == pytest.approx([rates[0]] * 5)  # p^i: every conditional p
    assert conditional([0.5, 0.0, 0.0]) == [0.5, 0.0, 0.0]
