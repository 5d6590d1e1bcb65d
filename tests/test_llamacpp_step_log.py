"""The step-log reader (benchmarks/bench_llamacpp_step_log.py) on a real llama-server log:
tests/fixtures/llamacpp/server-step-log.txt holds three steps of a B = 8 streams round logged by
the set-up's llama-server (0c1e570, `--log-timestamps -lv 5`, LLAMA_TRACE=1; ngram-simple g4,
T = 1, f32; 2026-11-29), cut at the decodes: one where slot 2 starts a request (its restored
prompt's last token) and two where slots draft."""
from pathlib import Path

import pytest

from benchmarks.bench_llamacpp_step_log import drafting_shares, stamped, steps

LOG = Path(__file__).parent / "fixtures" / "llamacpp" / "server-step-log.txt"


def test_steps_read_each_decode_time_and_every_slot_feed():
    rows, dropped = steps(stamped(LOG), 8, 0.0)
    assert dropped == 0
    assert [feeds for _, feeds in rows] == [(1, 1, 1, 5, 1, 1, 5, 1), (1, 1, 1, 5, 5, 1, 5, 1),
                                            (1, 1, 5, 1, 1, 1, 1, 1)]
    assert [1e3 * d for d, _ in rows] == pytest.approx([161.918, 158.409, 98.366], abs=1e-6)


def test_decodes_before_the_start_are_left_out_and_an_unfinished_one_counted():
    lines = stamped(LOG)
    assert len(steps(lines, 8, 35.0)[0]) == 2
    cut = [x for x in lines if x[0] < 35.9]  # the last decode's end is past the cut
    rows, dropped = steps(cut, 8, 0.0)
    assert len(rows) == 2 and dropped == 1


def test_drafting_shares_count_every_slot_step_once():
    by_position, by_kind = drafting_shares(stamped(LOG), 0.0, 96)
    assert sum(n for n, _ in by_position.values()) == sum(n for n, _ in by_kind.values()) == 23
    assert sum(d for _, d in by_position.values()) == 6
