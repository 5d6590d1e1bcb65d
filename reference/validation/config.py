"""The sizes of one validation run (docs/validation.md)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from specdec.errors import SpecdecError
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.data.prompts import PromptSource
from specdec.reference.distributed.ranks import Placement
from specdec.reference.estimate.alpha import DEFAULT_LENIENCE
from specdec.reference.measure.interference import DEFAULT_THRESHOLD

TOLERANCE = 0.10  # the goal: extended model within 10% of the measured speedup
COST_TOLERANCE = 0.05  # the cost model's goal (issue 48): iteration time within 5% of its prediction
STEADY_TOLERANCE = 0.10  # probes and priced t(1) further apart (most / least - 1): two machines met in one check


@dataclass(frozen=True)
class ValidationConfig:
    """Sizes of one validation run.

    gammas / temperatures: the grid (every drafter runs every gamma at every temperature).
    top_k / top_p: applied at every temperature > 0 (0 / 1 = off).
    prompts, prompt_tokens, new_tokens, repeats: the decode runs (held-out prompts).
    alpha_prompts, alpha_new_tokens: the estimator's sample (alpha_prompts x alpha_new_tokens
        target-sampled positions per temperature).
    context_tokens: KV-cache length for the cost timings (None: prompt_tokens + new_tokens/2,
        the mean context of the decode runs).
    max_k: verify-cost curve v(1..max_k); gammas must be < max_k.
    timing_repeats: runs of each k in the up-front timing of t(1..max_k);
    sweep_repeats: runs of each k = 1..max(gammas)+1 timed again before every decode block
        (0 = off), at a context cycling through `sweep_contexts()`; a temperature's v(k) pools
        the up-front runs and its sweeps (so the cost model's inputs are sampled across the
        decodes' contexts and while they run).
    retries, interference_threshold: a timed run during which other processes kept more than
        the threshold (cores, average) busy is redone up to `retries` times.
    probe: time a few one-token target passes between decode runs, to also report the
        measured speedup in target steps of the moment (drift-corrected).
    policies: draft-length rules every drafter also decodes under (`parse_policy` spellings,
        e.g. 'confidence:tau=0.5,n_max=8', 'heuristic:initial=2,n_max=8,persist=1'), each
        compared with `specdec.simulator.dynamic` (`specdec.reference.validation.dynamic`);
        their largest draft must be < max_k.
    """

    gammas: tuple[int, ...] = (1, 2, 4)
    temperatures: tuple[float, ...] = (0.0, 1.0)
    top_k: int = 0
    top_p: float = 1.0
    prompts: int = 12
    prompt_tokens: int = 64
    new_tokens: int = 16
    repeats: int = 1
    alpha_prompts: int = 32
    alpha_new_tokens: int = 64
    batch_size: int = 16
    context_tokens: int | None = None
    max_k: int = 16
    timing_repeats: int = 7
    sweep_repeats: int = 2
    retries: int = 3
    interference_threshold: float = DEFAULT_THRESHOLD
    probe: bool = True
    draft_repeats: int = 20
    bootstrap: int = 2000
    lenience: tuple[float, ...] = DEFAULT_LENIENCE
    seed: int = 0
    policies: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.gammas or min(self.gammas) < 1:
            raise SpecdecError(f"gammas must be positive integers, got {self.gammas}")
        if max(self.gammas) >= self.max_k:
            raise SpecdecError(f"gammas must be < max_k = {self.max_k} (v(gamma + 1) is needed), got {max(self.gammas)}")
        if not self.temperatures or min(self.temperatures) < 0:
            raise SpecdecError(f"temperatures must be >= 0, got {self.temperatures}")
        if self.sweep_repeats < 0 or self.retries < 0:
            raise SpecdecError(f"sweep_repeats and retries must be >= 0, got {self.sweep_repeats}, {self.retries}")
        for name in ("prompts", "prompt_tokens", "new_tokens", "repeats", "alpha_prompts", "alpha_new_tokens",
                     "batch_size", "timing_repeats", "draft_repeats", "bootstrap"):
            if getattr(self, name) < 1:
                raise SpecdecError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.policies:
            from specdec.reference.core.policy import parse_policy

            for spelling in self.policies:
                top = parse_policy(spelling, max(self.gammas)).k_max
                if top >= self.max_k:
                    raise SpecdecError(f"draft-length rule {spelling!r} drafts up to {top}: must be < max_k = "
                                       f"{self.max_k}")
        if self.new_tokens < 2:
            raise SpecdecError(f"new_tokens must be >= 2, got {self.new_tokens}")

    @property
    def draft_top(self) -> int:
        """The longest draft any decoded method makes (the gammas, the rules' n_max): the
        estimator's block width, so that its per-position confidence law has a row for every
        draft position a rule reaches."""
        from specdec.reference.core.policy import parse_policy

        return max([max(self.gammas)] + [parse_policy(s, max(self.gammas)).k_max for s in self.policies])

    @property
    def context(self) -> int:
        return self.context_tokens or self.prompt_tokens + self.new_tokens // 2

    def sweep_contexts(self) -> list[int]:
        """KV-cache lengths the sweeps cycle through: the quartiles of the decodes' context
        (prompt_tokens + new_tokens / 4, / 2, 3 / 4), since t(k) grows with the context."""
        if self.context_tokens:
            return [self.context_tokens]
        return [self.prompt_tokens + (q * self.new_tokens) // 4 for q in (1, 2, 3)]

    def sampling(self, temperature: float) -> SamplingConfig:
        if temperature == 0:
            return SamplingConfig(0.0)
        return SamplingConfig(temperature, self.top_k, self.top_p)


@dataclass(frozen=True)
class ValidationJob:
    """What one `specdec validate` runs: the target folder, the drafters (label -> spec), where
    the models go, the prompts (`PromptSource`: held out, a file or workloads; one validation per
    category) and the sizes."""

    target: Path
    drafters: dict[str, str]
    config: ValidationConfig = field(default_factory=ValidationConfig)
    placement: Placement = field(default_factory=Placement)
    dtype: str = "float32"
    backend: str = "auto"
    source: PromptSource = field(default_factory=PromptSource)
