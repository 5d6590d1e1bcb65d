"""Engine output that cannot come from one engine's run is refused with one line naming what
disagrees (issue 53): a series given twice, a sample line cut short, totals that contradict each
other or the per-position counts, two engines' pages in one input. Pages are the captured
fixtures, edited."""
from __future__ import annotations

from pathlib import Path

import pytest

from specdec.engines.metrics import read_counts
from specdec.errors import SpecdecError

FIXTURES = Path(__file__).parent / "fixtures"
VLLM = (FIXTURES / "engines" / "vllm_metrics.txt").read_text()
LLAMACPP = (FIXTURES / "llamacpp" / "metrics_ngram_mod.txt").read_text()  # captured from a real llama-server
ACCEPTED_0 = 'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1068.0'


def test_the_captured_pages_agree_with_themselves() -> None:
    v, ll = read_counts(VLLM), read_counts(LLAMACPP)
    assert sum(v.accepted) == v.accepted_tokens == 1780 and v.draft_tokens == 3000
    assert sum(ll.accepted) == ll.accepted_tokens == 23


@pytest.mark.parametrize("edit, message", [
    (lambda t: t + ACCEPTED_0 + "\n", "twice"),  # a series repeated: two pages pasted together
    (lambda t: t + ACCEPTED_0.replace("_total", "") + "\n", "twice"),  # with and without _total
    (lambda t: t.replace(ACCEPTED_0, ACCEPTED_0[:60]), "malformed sample line"),  # cut mid-line
    (lambda t: t.replace("1068.0", "1100.0"), "per-position counts accept 1780 tokens, the total says 1812"),
    (lambda t: t.replace("1068.0", "2900.0"), "accepted tokens of 3000 drafted"),
])
def test_contradictions_are_one_line(edit, message: str) -> None:
    with pytest.raises(SpecdecError, match=message):
        read_counts(edit(VLLM))


def test_a_scrape_taken_while_counting_passes() -> None:
    """Counters read one by one while the engine runs may be a token apart: still read."""
    counts = read_counts(VLLM.replace("1068.0", "1069.0"))
    assert counts.accepted_tokens == 1781 and sum(counts.accepted) == 1780


def test_two_engines_pages_in_one_input_are_refused() -> None:
    with pytest.raises(SpecdecError, match="vLLM and llama.cpp|llama.cpp and vLLM"):
        read_counts(VLLM + "\n" + LLAMACPP)
