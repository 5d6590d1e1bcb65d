"""Bad inputs raise SpecdecError (a ValueError) with a message that names the parameter and quotes
the value (simulator/checks.py and the shape checks beside the functions).

Names follow Leviathan et al. (2023): alpha, gamma, c, c_hat, p target, q draft.
"""
from __future__ import annotations

import numpy as np
import pytest

from specdec.errors import SpecdecError
from specdec.simulator import (acceptance_rate, expected_tokens, make_plan, operation_increase, optimal_gamma,
                       oracle_expected_tokens, positional_expected_tokens, simulate_iid,
                       simulate_speculative_sampling, verify_cost_walltime_improvement, walltime_improvement)


@pytest.mark.parametrize("call,message", [
    (lambda: expected_tokens(1.2, 3), r"alpha must be in \[0, 1\], got 1.2"),
    (lambda: expected_tokens([0.5, -0.1], 3), r"alpha must be in \[0, 1\], got -0.1"),
    (lambda: oracle_expected_tokens(1.0), r"alpha must be in \[0, 1\), got 1.0"),
    (lambda: make_plan(c=0.1, alpha=1.2), r"alpha must be in \[0, 1\), got 1.2"),
    (lambda: expected_tokens("high", 3), r"alpha must be a number or an array of numbers, got 'high'"),
    (lambda: walltime_improvement(0.5, 3, -0.1), r"c must be >= 0, got -0.1"),
    (lambda: walltime_improvement(0.5, 3, np.inf), r"c must be finite, got inf"),
    (lambda: operation_increase(0.5, 3, -1), r"c_hat must be >= 0, got -1.0"),
    (lambda: expected_tokens(0.5, -1), r"gamma must be a non-negative integer, got -1"),
    (lambda: expected_tokens(0.5, 2.5), r"gamma must be a non-negative integer, got 2.5"),
    (lambda: expected_tokens(0.5, "three"), r"gamma must be a non-negative integer, got 'three'"),
    (lambda: optimal_gamma(0.5, 0.1, max_gamma=-3), r"max_gamma must be a non-negative integer, got -3"),
    (lambda: positional_expected_tokens([0.9, 1.5], 2), r"per-position acceptances must each be in \[0, 1\], got 1.5"),
    (lambda: positional_expected_tokens([], 2), r"per-position acceptances must hold at least one value"),
    (lambda: verify_cost_walltime_improvement(0.5, 1, 0.1, [1.2, 1.5]), r"verify_cost\[0\] .* must be 1"),
    (lambda: verify_cost_walltime_improvement(0.5, 1, 0.1, [1.0, -1.0]), r"verify_cost values must be finite and > 0"),
    (lambda: acceptance_rate([0.5, 0.4], [0.5, 0.5]), r"p must sum to 1 along the last axis, got a sum of 0.9"),
    (lambda: acceptance_rate([0.5, 0.5], [1.5, -0.5]), r"q must be non-negative and finite, got -0.5"),
    (lambda: acceptance_rate([0.5, 0.5], [0.5, 0.5], lenience=0), r"lenience must be in \(0, 1\], got 0.0"),
    (lambda: simulate_iid(0.5, 3, 0, np.random.default_rng(0)), r"n_iterations must be a positive integer"),
    (lambda: simulate_speculative_sampling(np.ones((2, 3)) / 3, np.ones(3) / 3, 3, 10, np.random.default_rng(0)),
     r"p must have shape \[vocab\] or \[gamma \+ 1, vocab\] = \[4, vocab\], got \(2, 3\)"),
    (lambda: make_plan(c=0.1), r"give exactly one of alpha and alpha_per_position"),
])
def test_bad_input_messages(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()
    with pytest.raises(SpecdecError):  # the user's to fix: the command line prints it as one line
        call()
