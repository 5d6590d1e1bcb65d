"""The streams replay (benchmarks/bench_llamacpp_replay_batches.py, `streams_seconds`): the B-client
check out of phase rebuilt from each request's own steps — lead-ins, fillers, prompt steps and gaps
as engines/llamacpp/streams.py runs them — priced by llama.cpp's equal split."""
import numpy as np
import pytest

from benchmarks.bench_llamacpp_replay_batches import streams_seconds
from specdec.engines.llamacpp.streams import lead_in, stream_requests

U = np.array([[1.0, 1.5, 2.0], [1.6, 2.7, 3.8], [2.2, 3.9, 5.6], [2.8, 5.1, 7.4]])  # u(r, m), r = 1..4, m = 1..3


def plain(j: int, count: int) -> list[tuple[int, int]]:
    return [(0, 0)] * (count - 1)


@pytest.mark.parametrize("B", [1, 2, 4])
def test_full_batches_of_plain_steps_cost_t_B_1_a_token(B):
    # no gap: every slot feeds one token at every step, so each timed token costs u(B, 1)
    decode, tokens = streams_seconds(B, 8, 0, 12, plain, U, 0.0, 0)
    assert tokens == 8 * 11
    assert decode == pytest.approx(tokens * U[B - 1, 0])


def test_one_stream_prices_each_step_of_each_request():
    # B = 1: the requests run one after another; a request's decode is its steps after the prompt's
    steps = [(2, 1), (0, 0), (2, 2)]  # 1 + (1 + 1) + 1 + (1 + 2) = 7 tokens
    accept_s = 0.25
    decode, tokens = streams_seconds(1, 2, 0, 7, lambda j, count: steps, U, accept_s, 0)
    assert tokens == 2 * 6
    assert decode == pytest.approx(2 * (U[0, 2] + U[0, 0] + U[0, 2] + 3 * accept_s))


def test_a_gap_empties_slots_and_cheapens_the_steps():
    # a stream sitting out steps between requests leaves smaller batches: cheaper than u(2, 1), dearer than u(1, 1)
    decode, tokens = streams_seconds(2, 8, 0, 12, plain, U, 0.0, 2)
    assert U[0, 0] < decode / tokens < U[1, 0]
    fractional, _ = streams_seconds(2, 8, 0, 12, plain, U, 0.0, 0.5)
    assert decode / tokens < fractional / tokens < U[1, 0]


def test_streams_start_apart_and_fill_until_every_timed_request_ends():
    # stream 1 leads in with half a request, so stream 0 finishes first and keeps its slot busy with fillers:
    # every timed step of stream 1 is then a full batch of 2
    calls = []

    def record(j, count):
        calls.append((j, count))
        return plain(j, count)

    decode, tokens = streams_seconds(2, 2, 0, 10, record, U, 0.0, 0, warm_up=0)  # a check before the warm-up
    assert lead_in(2, 1, 10) == 5 and stream_requests(2, 2, 1) == [1]
    assert (1, 5) in calls and calls.count((0, 10)) == 2  # stream 1's lead-in; stream 0's request, its whole filler
    assert decode == pytest.approx(tokens * U[1, 0])
    calls.clear()  # a check from before 2026-11-29: half-request fillers
    assert streams_seconds(2, 2, 0, 10, record, U, 0.0, 0, filler_share=0.5, warm_up=0)[0] == pytest.approx(decode)
    assert (0, 5) in calls  # its filler: half of request 0


@pytest.mark.parametrize("B", [2, 4])
def test_the_warm_up_keeps_the_lead_ins_beside_no_timed_request(B):
    # the lead-ins (the only requests shorter than new_tokens here) draft at every step, the rest never: with the
    # warm-up every timed step is a full batch of plain steps; without it stream 0's first request shares its
    # steps with the other streams' drafting lead-ins
    def steps(j, count):
        return [(1, 0) if count < 16 else (0, 0)] * (count - 1)

    decode, tokens = streams_seconds(B, 8, 0, 16, steps, U, 0.0, 0, warm_up=1)
    assert decode == pytest.approx(tokens * U[B - 1, 0])
    unwarmed, same = streams_seconds(B, 8, 0, 16, steps, U, 0.0, 0, warm_up=0)
    assert same == tokens and unwarmed > decode * 1.01
    assert streams_seconds(1, 8, 0, 16, steps, U, 0.0, 0, warm_up=1) == streams_seconds(1, 8, 0, 16, steps, U, 0.0, 0,
                                                                                           warm_up=0)  # alone: none


def test_untimed_requests_come_from_one_queue_over_all_prompts():
    # prompt 0 drafts 3 tokens a step (few steps), prompt 1 never: a stream cycling its own prompt 0 keeps its slot in
    # prompt 0's drafting steps for the whole round; one shared queue serves both prompts as often as each other,
    # so each holds the slots for a time in proportion to its steps, as in the B = 1 law
    def run(untimed):
        calls = []

        def steps(j, count):
            calls.append(j)
            return [(3, 3)] * ((count - 1) // 4) if j == 0 else [(0, 0)] * (count - 1)

        streams_seconds(2, 2, 0, 21, steps, U, 0.0, 0, untimed=untimed)
        return calls[2:]  # after each stream's first request (stream 1's lead-in, stream 0's warm-up)

    own, shared = run("own"), run("shared")
    assert own.count(0) >= 3 * own.count(1)
    assert abs(shared.count(0) - shared.count(1)) <= 2


def test_one_slot_beside_neighbours_of_its_own_law_is_the_equal_split_prediction():
    # benchmarks/check_llamacpp_batches.py --per-prompt-neighbours: the timed slot's law and its neighbours' apart
    from benchmarks.check_llamacpp_batches import slot_speedup
    from specdec.simulator.equal_split import predict_equal_split

    law = np.array([[0.7, 0.0, 0.0], [0.05, 0.05, 0.0], [0.05, 0.05, 0.1]])
    heavy = np.array([[0.4, 0.0, 0.0], [0.1, 0.1, 0.0], [0.1, 0.1, 0.2]])
    rng = np.random.default_rng(1)
    pooled = predict_equal_split(law, 4, U, 0.0, rng).prediction.speedup
    assert slot_speedup(law, law, 4, U, U[3, 0], 0.0, rng) == pytest.approx(pooled, rel=0.01)
    assert slot_speedup(law, heavy, 4, U, U[3, 0], 0.0, rng) < 0.97 * pooled  # neighbours drafting more: dearer steps
