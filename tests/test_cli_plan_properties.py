"""`specdec plan` fed random option values, valid and not (seeded numpy Generator, 400 command
lines, in process through the real entry point): it never prints a traceback, NaN or
infinity; it exits 0 or 2 (a usage error is one line naming an option); `--json` parses with
a strict parser; and every speedup it reports respects the bound
E[tokens] / (gamma c + v(gamma + 1)) with E[tokens] <= gamma + 1 (Eq. 1 for i.i.d. alpha)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from tests.cli_helpers import run_main, strict_json

# (valid values, invalid values) per option; an option takes an invalid value 15% of the time
ALPHAS = (["0", "0.3", "0.5", "0.8", "0.99", "0.999999", "1e-300"], ["1", "1.5", "-0.1", "nan", "inf", "abc", ""])
COSTS = (["0", "0.01", "0.05", "0.5", "1", "3", "1e6", "1e-300"], ["-0.1", "nan", "inf", "-inf", "1e308", "2e6", "x"])
INTS = (["0", "1", "3", "16", "200", "1024"], ["1025", "100000000", "-1", "2.5", "x"])
CURVES = (["1,1.1,1.2,1.5", "1,1.5,1.2,1.9", "1,1", "1,1,1,1,1,1,1,1", ",".join(["1.5"] * 1025).replace("1.5", "1", 1)],
          ["1,0.5", "0.9,1", "1,nan", "1,inf", "", ",".join(["1"] * 1100), "1,2,x", "1"])
PER_POSITION = (["0.9,0.8,0.7", "1,1,1", "0.5", "0,0.2"], ["1.2,0.5", "nan", "", "0.3,-0.1"])
NON_FINITE = re.compile(r"\b(nan|NaN|inf|Infinity)\b")


def pick(rng: np.random.Generator, pools: tuple[list[str], list[str]]) -> str:
    valid, invalid = pools
    return str(rng.choice(invalid if rng.random() < 0.15 else valid))


def random_argv(rng: np.random.Generator) -> list[str]:
    argv = ["plan"]
    if rng.random() < 0.8:
        argv += ["--alpha", pick(rng, ALPHAS)]
    if rng.random() < 0.25:
        argv += ["--alpha-per-position", pick(rng, PER_POSITION)]
    if rng.random() < 0.97:
        argv += ["--c", pick(rng, COSTS)]
    if rng.random() < 0.3:
        argv += ["--c-hat", pick(rng, COSTS)]
    if rng.random() < 0.3:
        argv += ["--gamma", pick(rng, INTS)]
    if rng.random() < 0.3:
        argv += ["--max-gamma", pick(rng, INTS)]
    if rng.random() < 0.4:
        argv += ["--verify-cost", pick(rng, CURVES)]
    if rng.random() < 0.5:
        argv.append("--json")
    return argv


def check_bounds(d: dict) -> None:
    v = d["verify_cost"]
    for row in d["table"]:
        g = row["gamma"]
        assert 1.0 - 1e-12 <= row["expected_tokens"] <= g + 1 + 1e-9
        step = g * d["c"] + (1.0 if v is None else v[g])
        assert row["speedup"] <= row["expected_tokens"] / step * (1 + 1e-9) + 1e-12, (row, d["c"])
        if d["alpha"] is not None:
            a = d["alpha"]
            assert row["expected_tokens"] == pytest.approx((1 - a ** (g + 1)) / (1 - a))


def test_random_plan_command_lines(capsys) -> None:
    rng = np.random.default_rng(2026)
    outcomes = {0: 0, 2: 0}
    for _ in range(400):
        argv = random_argv(rng)
        code, stdout, stderr = run_main(capsys, argv)
        assert code in (0, 2), (argv, code, stderr)
        assert "Warning" not in stderr, (argv, stderr)
        assert not NON_FINITE.search(stdout), (argv, stdout)
        outcomes[code] += 1
        if code == 2:
            lines = stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("Error:") and "--" in lines[0], (argv, lines)
        elif "--json" in argv:
            check_bounds(strict_json(stdout))
    assert outcomes[0] > 40 and outcomes[2] > 40, outcomes  # both kinds were exercised
