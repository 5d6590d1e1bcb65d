"""Input checks shared by the simulator's functions, raising SpecdecError (a ValueError) that
names the parameter.

Names follow Leviathan et al. (ICML 2023): `alpha` is the acceptance rate, `gamma` the
number of draft tokens per iteration, `c` (`c_hat`) the draft/target time (arithmetic)
ratio, `p` the target distribution and `q` the draft distribution.

Every check returns the value as a numpy array of the right dtype, so callers validate
and convert in one step. Messages quote the first offending value, e.g.
"alpha must be in [0, 1), got 1.2".
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from specdec.errors import SpecdecError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# Tolerance for "sums to 1" and "verify_cost[0] is 1": loose enough for float32 softmax output.
PROBABILITY_ATOL = 1e-6
# Bounds that keep every computation finite and small (a plan is a table of gamma = 0..MAX_GAMMA).
MAX_GAMMA = 1024
MAX_COST_RATIO = 1e6


def _first_bad(values: np.ndarray, ok: np.ndarray) -> str:
    """The first value where `ok` is False, formatted for an error message."""
    return repr(values[~ok].flat[0].item())


def as_float_array(value: npt.ArrayLike, name: str) -> FloatArray:
    """`value` as a float64 array, or a SpecdecError naming `name` when it is not numeric."""
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise SpecdecError(f"{name} must be a number or an array of numbers, got {value!r}") from None


def check_alpha(alpha: npt.ArrayLike, *, allow_one: bool = True, name: str = "alpha") -> FloatArray:
    """Acceptance rate(s) in [0, 1], or [0, 1) when `allow_one` is False.

    alpha = 1 (draft always accepted) is the finite limit of the fixed-gamma formulas; the
    oracle bound 1/(1 - alpha) and the CLI need alpha < 1.
    """
    a = as_float_array(alpha, name)
    ok = (a >= 0.0) & ((a <= 1.0) if allow_one else (a < 1.0))
    if not ok.all():
        interval = "[0, 1]" if allow_one else "[0, 1)"
        raise SpecdecError(f"{name} must be in {interval}, got {_first_bad(a, ok)}")
    return a


def check_nonnegative(value: npt.ArrayLike, name: str) -> FloatArray:
    """A finite cost ratio >= 0 (`c`, `c_hat`)."""
    x = as_float_array(value, name)
    if not (x >= 0.0).all():
        raise SpecdecError(f"{name} must be >= 0, got {_first_bad(x, x >= 0.0)}")
    if not np.isfinite(x).all():
        raise SpecdecError(f"{name} must be finite, got {_first_bad(x, np.isfinite(x))}")
    return x


def check_gamma(gamma: npt.ArrayLike, name: str = "gamma") -> IntArray:
    """Non-negative integer draft length(s); integral floats such as 3.0 are accepted."""
    try:
        g = np.asarray(gamma)
    except (TypeError, ValueError):
        raise SpecdecError(f"{name} must be a non-negative integer, got {gamma!r}") from None
    if g.dtype == bool or not (np.issubdtype(g.dtype, np.integer) or np.issubdtype(g.dtype, np.floating)):
        raise SpecdecError(f"{name} must be a non-negative integer, got {gamma!r}")
    if g.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(g) & (g >= 0) & (np.mod(g, 1) == 0)
    else:
        ok = g >= 0
    if not np.all(ok):
        raise SpecdecError(f"{name} must be a non-negative integer, got {_first_bad(g, np.asarray(ok))}")
    return g.astype(np.int64)


def check_max_gamma(max_gamma: int) -> int:
    """The search bound for the optimal gamma: one integer in 0..MAX_GAMMA."""
    g = check_gamma(max_gamma, name="max_gamma")
    if g.ndim != 0:
        raise SpecdecError(f"max_gamma must be a single non-negative integer, got {max_gamma!r}")
    if int(g) > MAX_GAMMA:
        raise SpecdecError(f"max_gamma must be at most {MAX_GAMMA}, got {int(g)}")
    return int(g)


def check_cost_ratio(value: npt.ArrayLike, name: str) -> FloatArray:
    """A cost ratio (c or c_hat): finite, in [0, MAX_COST_RATIO]."""
    x = check_nonnegative(value, name)
    if np.any(x > MAX_COST_RATIO):
        raise SpecdecError(f"{name} must be at most {MAX_COST_RATIO:g} (a draft step that costs more is no plan), "
                           f"got {_first_bad(x, x <= MAX_COST_RATIO)}")
    return x


def check_per_position(alphas: npt.ArrayLike) -> FloatArray:
    """Per-position acceptances alpha_1..alpha_K along the last axis, each in [0, 1]."""
    a = as_float_array(alphas, "per-position acceptances")
    if a.ndim == 0 or a.shape[-1] == 0:
        raise SpecdecError("per-position acceptances must hold at least one value (alpha_1, alpha_2, ...)")
    ok = (a >= 0.0) & (a <= 1.0)
    if not ok.all():
        raise SpecdecError(f"per-position acceptances must each be in [0, 1], got {_first_bad(a, ok)}")
    return a


def check_verify_cost(verify_cost: npt.ArrayLike) -> FloatArray:
    """A verify-cost curve v(1..K) (shape [K]): finite, v(1) = 1 and v(k) >= 1 for every k.

    No pass over k tokens can be cheaper than the one-token pass the baseline pays for each
    token (a curve below 1 would plan speedups beyond tokens per iteration); a measured curve
    may still dip between k's (small-M matrix kernels do), so it need not be monotone.
    """
    v = as_float_array(verify_cost, "verify_cost")
    if v.ndim != 1 or v.size == 0:
        raise SpecdecError(f"verify_cost must be a non-empty list v(1), ..., v(K), got shape {v.shape}")
    ok = np.isfinite(v) & (v > 0.0)
    if not ok.all():
        raise SpecdecError(f"verify_cost values must be finite and > 0, got {_first_bad(v, ok)}")
    if abs(v[0] - 1.0) > PROBABILITY_ATOL:
        raise SpecdecError("verify_cost[0] = v(1), one target pass over 1 token, must be 1 because "
                           f"costs are relative to it; got {float(v[0])!r}")
    if v.size > MAX_GAMMA + 1:
        raise SpecdecError(f"verify_cost may give at most {MAX_GAMMA + 1} values, got {v.size}")
    ok = v >= 1.0 - PROBABILITY_ATOL
    if not ok.all():
        raise SpecdecError("verify_cost values must be >= v(1) = 1 (no k-token pass is cheaper than the one-token "
                           f"pass), got {_first_bad(v, ok)} at k = {int(np.argmin(ok)) + 1}")
    return v


def check_distribution(dist: npt.ArrayLike, name: str) -> FloatArray:
    """Probability distribution(s) along the last axis: non-negative, finite, summing to 1."""
    d = as_float_array(dist, name)
    if d.ndim == 0 or d.shape[-1] == 0:
        raise SpecdecError(f"{name} must have a vocabulary axis (the last axis), got shape {d.shape}")
    ok = np.isfinite(d) & (d >= 0.0)
    if not ok.all():
        raise SpecdecError(f"{name} must be non-negative and finite, got {_first_bad(d, ok)}")
    sums = d.sum(axis=-1)
    close = np.abs(sums - 1.0) <= PROBABILITY_ATOL
    if not close.all():
        raise SpecdecError(f"{name} must sum to 1 along the last axis, got a sum of {_first_bad(sums, close)}")
    return d


def check_lenience(lenience: float) -> float:
    """The lenience factor l of Appendix A.5, in (0, 1]; l = 1 is exact speculative sampling."""
    try:
        value = float(lenience)
    except (TypeError, ValueError):
        raise SpecdecError(f"lenience must be a number in (0, 1], got {lenience!r}") from None
    if not 0.0 < value <= 1.0:
        raise SpecdecError(f"lenience must be in (0, 1], got {value!r}")
    return value


def check_n_iterations(n_iterations: int) -> int:
    """A positive number of simulated iterations."""
    n = check_gamma(n_iterations, name="n_iterations")
    if n.ndim != 0 or int(n) < 1:
        raise SpecdecError(f"n_iterations must be a positive integer, got {n_iterations!r}")
    return int(n)
