"""The advice run (`specdec llamacpp validate --advise`): `specdec plan --from` the engine's counts
of one grid configuration, with the engine's cost file, picks a draft length; its printed flags
run against no speculation and the grid's two best configurations, and the regret is measured
(docs/engines.md, "llama.cpp in the loop")."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from specdec.engines.llamacpp.validation import (BOOTSTRAP, Config, EngineCosts, Record, Request, as_dicts, cells,
                                                 from_flags, metrics_page, run_grid)
from specdec.errors import SpecdecError


def advise(binary: Path, model: Path, records: Sequence[Record], costs: EngineCosts, cost_data: dict,
           configs: Sequence[Config], source: str, temperature: float, requests: Sequence[Request], repeats: int, new_tokens: int,
           threads: int | None, log: Callable[[str], None] = lambda line: None, seed: int = 0) -> dict:
    """`plan --from <source's counts at this temperature> --c 0 --batch-cost-file <costs> --context L`,
    then its printed flags for the source's n-gram type run against no speculation and the grid's
    two best configurations at this temperature that decode the target's output (synthetic
    acceptance does not), interleaved, fresh servers: the regret is the best one's measured
    speedup over the advice's, minus 1 (0 when the advice is the best)."""
    from specdec.engines.acceptance import acceptance_from_counts
    from specdec.engines.configs import engine_config
    from specdec.engines.metrics import read_counts
    from specdec.costfiles import batch_times_of
    from specdec.simulator.batch import batch_times_within
    from specdec.simulator.engine_plan import engine_plan

    rows = [r for r in records if r.config == source and r.temperature == temperature]
    page = metrics_page(rows)
    context = int(np.median([r.prompt_tokens + r.tokens / 2 for r in rows]))
    batch = batch_times_within(batch_times_of(cost_data, Path("the engine's cost file")), context)
    counts = read_counts(page)
    plan = engine_plan(acceptance_from_counts(counts), 0.0, counts.source, batch_times=batch,
                       draft_share=counts.draft_share)
    config = engine_config(plan, "llamacpp", "ngram")
    spec_type = next(c.spec_type for c in configs if c.label == source)
    gamma = config.get("gamma_ngram_simple", 0) if spec_type == "ngram-simple" else plan.plan.optimal_gamma
    flags = (config.get("flags_ngram") or {}).get(spec_type) if gamma > 0 else None
    if gamma > 0 and flags is None:
        raise SpecdecError(f"{source}: the plan writes draft-length flags for the n-gram types only, not {spec_type}")
    advised = from_flags("advice", flags) if flags else Config("advice", None)
    labels = {c.label: c for c in configs}
    grid = [c for c in cells(records, costs, seed, configs) if c.temperature == temperature
            and not labels[c.config].synthetic]  # forced acceptance: not the target's output, no rival
    best = sorted(grid, key=lambda c: -c.measured)[:2]
    rivals = [labels[c.config] for c in best if c.config in labels]
    log(f"T={temperature:g}: plan from {source} (context {context}): gamma {gamma} -> "
        f"{advised.command_line() or 'no speculation'}; against {', '.join(c.label for c in rivals)}")
    second = run_grid(binary, model, [Config("none", None), advised, *rivals], requests, [temperature], repeats,
                      new_tokens, threads, log, seed + 7)
    measured = {c.config: c for c in cells(second, costs, seed, configs)}
    advice_speedup = measured["advice"].measured if gamma > 0 else 1.0
    top = max([advice_speedup] + [measured[c.label].measured for c in rivals if c.label in measured])
    interval = regret_interval(second, "advice" if gamma > 0 else "none", [c.label for c in rivals], seed)
    return {"temperature": temperature, "source": source, "context": context, "gamma": gamma,
            "predicted": float(plan.plan.walltime_improvement[gamma]), "flags": advised.command_line(),
            "plan_command": f"specdec plan --from METRICS --c 0 --batch-cost-file COSTS --context "
                            f"{batch.context_tokens} --engine llamacpp",
            "engine_config": config, "metrics_page": page,
            "measured": {k: asdict(c) for k, c in measured.items()}, "advice_measured": advice_speedup,
            "regret": top / advice_speedup - 1, "regret_interval": interval, "records": as_dicts(second)}


def regret_interval(records: Sequence[Record], advice: str, rivals: Sequence[str], seed: int = 0
                    ) -> tuple[float, float]:
    """95 % interval of the regret, best / advice - 1, by a paired bootstrap over the run's (prompt,
    repeat) pairs: each resample times every configuration on the same requests, no speculation
    among them (the advice "none" when it says not to speculate, then at 1 exactly). A regret whose
    interval reaches 0 is one the run cannot tell from noise: at T = 1 two plain servers measured
    0.95x and 1.04x against each other (2026-11-27, f32)."""
    rng = np.random.default_rng(seed)
    keys = sorted({(r.prompt, r.repeat) for r in records if r.config == "none"})
    labels = [advice, *(r for r in rivals if r != advice)]
    ms = {(r.config, r.prompt, r.repeat): (r.decode_ms, max(r.tokens - 1, 1)) for r in records}
    keys = [k for k in keys if all((c, *k) in ms for c in ["none", *labels])]
    if not keys:
        raise SpecdecError("the advice run has no request answered by every configuration")
    table = np.array([[ms[(c, *k)] for k in keys] for c in ["none", *labels]])  # [config, pair, (ms, steps)]

    def regret(idx: np.ndarray) -> float:
        per_step = table[:, idx, 0].sum(axis=1) / table[:, idx, 1].sum(axis=1)
        speedup = per_step[0] / per_step[1:]  # the advice first
        return float(speedup.max() / speedup[0] - 1)

    boot = [regret(rng.integers(0, len(keys), len(keys))) for _ in range(BOOTSTRAP)]
    return float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))
