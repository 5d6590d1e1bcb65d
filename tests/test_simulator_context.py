"""t(k, L) at a few context lengths, interpolated linearly in L (specdec.simulator.context)."""
from __future__ import annotations

import numpy as np
import pytest

from specdec.errors import SpecdecError
from specdec.simulator.context import check_context_times, merge_context_times


def test_an_affine_table_is_interpolated_exactly_and_timed_lengths_are_returned_as_timed() -> None:
    # t(k, L) = a_k + b_k L is what a pass costs when weights (a) and attention over L keys (b) dominate
    a, b = np.array([10.0, 14.0, 16.0]), np.array([0.01, 0.012, 0.015])
    lengths = [50, 400, 2000]
    times = check_context_times(lengths, [(a + b * n).tolist() for n in lengths])
    for n in (50, 123, 400, 999, 2000):
        assert times.at(n) == pytest.approx(tuple(a + b * n))
        assert times.verify_cost_at(n) == pytest.approx(tuple((a + b * n) / (a[0] + b[0] * n)))
    assert times.bracket(400) == (400, 400) and times.bracket(401) == (400, 2000) and times.bracket(50) == (50, 50)


def test_never_extrapolated() -> None:
    times = check_context_times([100, 200], [[1.0, 1.2], [1.1, 1.3]])
    for n in (99, 201):
        with pytest.raises(SpecdecError, match=f"context {n} is outside the timed contexts 100..200"):
            times.at(n)


@pytest.mark.parametrize("contexts,seconds,message", [
    ([], [], "one list of seconds"),
    ([100, 200], [[1.0]], "one list of seconds"),
    ([200, 100], [[1.0], [1.0]], "must increase"),
    ([0, 100], [[1.0], [1.0]], "integers >= 1"),
    ([True, 100], [[1.0], [1.0]], "integers >= 1"),
    ([100], [[1.0, float("nan")]], "positive finite"),
    ([100], [[-1.0, 1.0]], "positive finite"),
    ([100], [[]], "positive finite"),
    ([100], [[2.0, 1.0]], "verify_cost values must be >= v(1)"),
])
def test_bad_tables_are_refused(contexts, seconds, message) -> None:
    with pytest.raises(SpecdecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_context_times(contexts, seconds)


def test_merge_keeps_every_length_averages_repeats_and_the_shortest_curve() -> None:
    one = check_context_times([100, 300], [[1.0, 2.0, 3.0], [2.0, 3.0, 4.0]])
    two = check_context_times([50, 300], [[0.5, 1.0], [4.0, 5.0]])
    merged = merge_context_times([one, two])
    assert merged.contexts == (50, 100, 300) and merged.max_k == 2
    assert merged.seconds == ((0.5, 1.0), (1.0, 2.0), (3.0, 4.0))
    with pytest.raises(SpecdecError):
        merge_context_times([])
