"""The mixed steps of llama.cpp's cost file (`specdec llamacpp costs --mixed-k`), their arithmetic without
a server: a raw row recovers the steps it was built from (the noise's sampling cost and the drafting slots'
plain steps taken off), and the check prices a configuration by the mixed steps of its own draft length
only, at every context between the timed ones, in today's file format and the first one."""
from __future__ import annotations

import numpy as np
import pytest

from specdec.engines.llamacpp.batches import mixed_seconds, speculating_ubatches
from specdec.engines.llamacpp.costs import Sample, _mixed_row
from specdec.errors import SpecdecError
from specdec.simulator.equal_split import mixed_ubatches


def test_a_raw_row_recovers_the_steps_it_was_built_from() -> None:
    # B = 4 slots, the first r verifying 5 tokens on a share q = 0.9 of the steps (in phase), plain steps
    # t0 otherwise; the B - r noise slots add (B - r) d / B a step for their sampling, d timed apart.
    B, k, n, q, d, t0 = 4, 5, 50, 0.9, 0.0012, 0.030
    true = [t0, 0.041, 0.049, 0.056]

    def sample(r: int) -> Sample:
        mean = q * true[r] + (1 - q) * t0 + (B - r) * d / B if r else t0 + d
        return Sample(1000 * mean * B * n, B * n, 200, round(r * q * n), 4 * round(r * q * n), 0)

    row = _mixed_row({r: [sample(r), sample(r)] for r in range(B)}, 0.062, k, B, d)
    assert row["seconds"] == pytest.approx(true + [0.062]) and row["sampling_seconds"] == d
    assert row["share"] == pytest.approx([0.0, 0.225, 0.45, 0.675])
    assert mixed_ubatches(np.full((B, k), 0.02), row["seconds"], k)[0, k - 2] == pytest.approx(0.041 - t0)
    leaky = {r: [sample(r)] for r in range(B)} | {0: [Sample(1000 * t0 * B * n, B * n, 200, 30, 120, 0)]}
    with pytest.raises(SpecdecError, match="plain slots' numbers drafted at 15 %"):
        _mixed_row(leaky, 0.062, k, B, d)


def _table(context: int, scale: float, mixed) -> dict:
    return {"batch_sizes": [1, 2], "context_tokens": context, "mixed": mixed,
            "seconds": [[scale * x for x in (0.010, 0.013, 0.016)], [scale * x for x in (0.014, 0.020, 0.026)]]}


@pytest.mark.parametrize("form", ["list", "first"])
def test_the_check_prices_a_draft_length_by_its_own_mixed_steps(form) -> None:
    steps = {3: [[0.010, 0.016], [0.013, 0.021, 0.026]], 2: [[0.010, 0.013], [0.013, 0.017, 0.020]]}
    if form == "list":
        tables = [_table(L, s, [{"k": K, "seconds": [[s * x for x in r] for r in rows]} for K, rows in steps.items()])
                  for L, s in ((100, 1.0), (300, 2.0))]
    else:  # before 2026-11-29 07:10 UTC: one object, one K
        tables = [_table(L, s, {"k": 3, "seconds": [[s * x for x in r] for r in steps[3]]})
                  for L, s in ((100, 1.0), (300, 2.0))]
    mixed = mixed_seconds({"batch_timing": tables}, 200)  # halfway: 1.5 times the first context's
    assert sorted(mixed) == ([2, 3] if form == "list" else [3])
    assert mixed[3][2] == pytest.approx([1.5 * x for x in steps[3][1]])
    u = np.full((2, 3), 0.05)
    priced, by_mixed = speculating_ubatches(u, 2, 2, mixed)  # drafts of 2: the K = 3 server's steps
    assert by_mixed and priced[1, 0] == pytest.approx(1.5 * 0.013) and priced[0, 1] == pytest.approx(1.5 * 0.008)
    for B, longest in ((2, 3), (4, 2)):  # a draft length the file did not time, a batch size it did not
        same, by_mixed = speculating_ubatches(u, B, longest, mixed)
        assert same is u and not by_mixed
