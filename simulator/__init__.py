"""The theory of speculative decoding (Leviathan et al., ICML 2023, Section 3) as numpy functions.

Names follow the paper: `alpha` acceptance rate, `gamma` draft tokens per iteration, `c`
(`c_hat`) draft/target time (arithmetic) ratio, `p` target and `q` draft distribution.
Pure numpy, no I/O; every closed form broadcasts over arrays of alpha, gamma and c. Planning
returns typed results (`Plan`, `BatchPlan`, `EnginePlan`, `TreePlan`); `specdec.report` renders them.
"""
from specdec.simulator.acceptance import acceptance_rate, lk_divergence, speculative_output_distribution
from specdec.simulator.batch import BatchPlan, BatchTimes, batch_plan
from specdec.simulator.closed_forms import (expected_tokens, gamma1_walltime_improvement, memory_access_reduction,
                                            operation_increase, oracle_expected_tokens, oracle_walltime_improvement,
                                            speculation_helps, walltime_improvement)
from specdec.simulator.counts import (Acceptance, accepted_histogram, mean_tokens, mean_tokens_standard_error,
                                      operation_increase_from_counts, per_position_acceptance,
                                      walltime_improvement_from_counts)
from specdec.simulator.engine_plan import EnginePlan, engine_plan
from specdec.simulator.montecarlo import (SampledIterations, simulate_iid, simulate_per_position,
                                          simulate_speculative_sampling)
from specdec.simulator.optimal import DEFAULT_MAX_GAMMA, OptimalGamma, optimal_gamma, walltime_improvement_by_gamma
from specdec.simulator.plan import Plan, make_plan
from specdec.simulator.positional import (extend_per_position, positional_expected_tokens,
                                          positional_expected_tokens_by_gamma, positional_operation_increase,
                                          positional_optimal_gamma, positional_walltime_improvement)
from specdec.simulator.trees import TreePlan, TreeRow, plan_trees
from specdec.simulator.verify_cost import iteration_time, verify_cost_walltime_improvement

__all__ = [
    "DEFAULT_MAX_GAMMA", "Acceptance", "BatchPlan", "BatchTimes", "EnginePlan", "OptimalGamma", "Plan",
    "SampledIterations", "TreePlan", "TreeRow",
    "accepted_histogram", "acceptance_rate", "batch_plan", "engine_plan", "expected_tokens", "extend_per_position",
    "gamma1_walltime_improvement", "iteration_time", "lk_divergence", "make_plan", "mean_tokens",
    "mean_tokens_standard_error", "memory_access_reduction", "operation_increase",
    "operation_increase_from_counts", "optimal_gamma", "oracle_expected_tokens",
    "oracle_walltime_improvement", "per_position_acceptance", "plan_trees", "positional_expected_tokens",
    "positional_expected_tokens_by_gamma", "positional_operation_increase", "positional_optimal_gamma",
    "positional_walltime_improvement", "simulate_iid", "simulate_per_position",
    "simulate_speculative_sampling", "speculation_helps", "speculative_output_distribution",
    "verify_cost_walltime_improvement", "walltime_improvement", "walltime_improvement_by_gamma",
    "walltime_improvement_from_counts",
]
