"""`specdec plan`: the best draft length and what it gains, from an acceptance rate (Leviathan
et al., ICML 2023), from a serving engine's counts (`--from`) or for draft trees from a lattice
study (`--trees`; `specdec plan-trees STUDY` is the same command).

Names follow the paper: `alpha` acceptance rate, `gamma` draft tokens per iteration, `c`
(`c_hat`) draft/target time (arithmetic) ratio.

Thin: parse, check, read cost files (`specdec.costfiles`), plan (`specdec.simulator`), render
(`specdec.report`). Values are checked by the simulator's own checks, turned into
click.BadParameter so the message names the option. torch is never imported, and matplotlib
only for `--figure`, so `specdec plan` starts fast.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import click
from click.core import ParameterSource

from specdec.cli.common import json_option
from specdec.cli.outputs import check_creatable
from specdec.cli.types import Checked, Number
from specdec.costfiles import (read_batch_times, read_context_times, read_lattice_study, read_tree_steps,
                               read_verify_cost, study_tree_steps)
from specdec.engines import registry
from specdec.errors import SpecdecError
from specdec.report import engine_plan_dict, engine_plan_text, plan_dict, plan_text, tree_plan_dict, tree_plan_text
from specdec.simulator.checks import (MAX_GAMMA, check_alpha, check_cost_ratio, check_gamma, check_max_gamma,
                                      check_per_position, check_verify_cost)
from specdec.simulator.optimal import DEFAULT_MAX_GAMMA
from specdec.simulator.plan import make_plan
from specdec.strict_json import to_json


def _at_most_max(g, name: str):
    if int(g) > MAX_GAMMA:
        raise SpecdecError(f"{name} must be at most {MAX_GAMMA}, got {int(g)}")
    return g


def _positive(gamma):
    """A draft the engine ran is at least one token long (0 would divide every count by nothing)."""
    if gamma < 1:
        raise SpecdecError(f"draft length must be at least 1, got {int(gamma)}")
    return gamma


def _read(reader: Callable[..., Any], path: Path, option: str, *args: Any) -> Any:
    """A cost-file reader's result; its SpecdecError becomes a BadParameter naming the option."""
    try:
        return reader(path, *args)
    except SpecdecError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None


TREE_COSTS_HELP = ("another machine's costs instead of the study's own verify steps: benchmarks/bench_costs.py "
                   "output (steps timed on trees) or `specdec estimate --json` (verify_cost and "
                   "cost.target_step_seconds).")
DRAFT_MS_HELP = "this many milliseconds for the heads' pass per iteration instead of the study's measured one."
cost_file_type = click.Path(exists=True, dir_okay=False, path_type=Path)


class EngineChoice(click.Choice):
    """--engine's choices: the engines of the registry when the option is parsed or shown (so an
    engine registered at run time is one)."""

    def __init__(self) -> None:
        super().__init__(registry.names())

    @property  # type: ignore[override]
    def choices(self) -> tuple[str, ...]:
        return registry.names()

    @choices.setter
    def choices(self, value) -> None:  # click.Choice.__init__ sets it; the registry is the truth
        pass


@click.command()
@click.option("--alpha", type=Checked(lambda a: check_alpha(a, allow_one=False)),
              help="Acceptance rate alpha in [0, 1) (i.i.d. model of the paper).")
@click.option("--alpha-per-position", "alpha_per_position", metavar="A1,A2,...",
              type=Checked(check_per_position, many=True, max_len=MAX_GAMMA + 1),
              help="Per-position acceptances alpha_1,...,alpha_K, each in [0, 1]: alpha_i is the chance "
                   "draft i is accepted given drafts 1..i-1 were. Replaces --alpha; gamma > K reuses alpha_K.")
@click.option("--c", "c", type=Checked(lambda c: check_cost_ratio(c, "c")),
              help="Cost coefficient c in [0, 1e6]: time of one draft step / time of one target step. "
                   "Required, except with --trees.")
@click.option("--c-hat", "c_hat", type=Checked(lambda c: check_cost_ratio(c, "c_hat")),
              help="Arithmetic-operations ratio c_hat in [0, 1e6] for the operations factor (Theorem 10). "
                   "Default: equal to --c.")
@click.option("--gamma", type=Checked(lambda g: _at_most_max(check_gamma(g), "gamma"), int),
              help=f"Evaluate this number of draft tokens per iteration, 0..{MAX_GAMMA}. Default: the optimal gamma.")
@click.option("--max-gamma", "max_gamma", type=Checked(check_max_gamma, int), default=DEFAULT_MAX_GAMMA,
              show_default=True,
              help=f"Largest gamma the optimal-gamma search tries, 0..{MAX_GAMMA}.")
@click.option("--verify-cost", "verify_cost", metavar="V1,V2,...",
              type=Checked(check_verify_cost, many=True, max_len=MAX_GAMMA + 1),
              help="Verify-cost curve v(1),...,v(K): time of one target pass over k tokens / time over 1 "
                   "token (so v(1) = 1, and every v(k) >= 1). An iteration then takes gamma*c + v(gamma+1) target steps "
                   "instead of the paper's gamma*c + 1, and gamma is limited to K - 1.")
@click.option("--verify-cost-file", "verify_cost_file", type=cost_file_type,
              help='A verify-cost curve from a JSON file: [1, 1.1, ...] or {"verify_cost": [...]} (`specdec estimate '
                   f"--json`). With --trees: {TREE_COSTS_HELP}")
@click.option("--context", "context", type=Number(int, 1, 1 << 20), default=None, metavar="TOKENS",
              help="Plan at this many tokens of context: v(k) interpolated from the times at several context lengths "
                   "in --verify-cost-file (`specdec estimate --json`: context_times), and t(B, k) from those in "
                   "--batch-cost-file (`specdec serve-bench`: serve.json); never extrapolated.")
@click.option("--from", "source", metavar="FILE|-|URL",
              help="Acceptance counts an engine reported instead of --alpha, a file, an http(s) URL (a /metrics "
                   f"page) or '-' (standard input): {registry.formats_text()}; JSON ({registry.formats_json()}); or "
                   "`specdec decode --json` output. Formats: docs/engines.md.")
@click.option("--draft-length", type=Checked(lambda g: _at_most_max(_positive(check_gamma(g, "draft length")),
                                                                    "draft length"), int), default=None,
              help="With --from: the draft length the engine ran with, for sources that do not state it (the error "
                   "says when it is needed).")
@click.option("--extrapolate", is_flag=True,
              help="With --from: also plan draft lengths beyond the observed positions (alpha_i = the last observed; "
                   "flagged in the output).")
@click.option("--batch-cost-file", type=cost_file_type,
              help="With --from: t(B, k) per batch size (`specdec estimate --batch-sizes ... --json`): the best draft "
                   "length per batch-size range. With --stopping: a serving engine's cost file that timed a draft "
                   "model inside its loop (docs/engines.md, \"A draft model\"): that engine's plan priced at its own "
                   "costs, at --context (default: the estimate's).")
@click.option("--engine", type=EngineChoice(), default=None,
              help="With --from: print that engine's configuration for the plan [default: the engine the counts came "
                   "from].")
@click.option("--method", default="ngram", show_default=True,
              help="The speculative method (ngram, draft_model, eagle, eagle3, mtp, ...: the names of docs/engines.md), "
                   "which each engine's configuration maps to its own (ngram: prompt lookup where that is the engine's "
                   "n-gram method).")
@click.option("--figure", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="With --batch-cost-file: write the speedup-vs-batch-size figure (PNG) here.")
@click.option("--trees", "study_path", metavar="STUDY", type=cost_file_type,
              help="Instead: the best parallel-drafts configuration (method, k, p, depth h) of a saved lattice study "
                   "(`specdec heads lattice --save`), with its own verify steps or --verify-cost-file.")
@click.option("--draft-ms", type=Number(float, 0, 1e6, high_open=True), default=None,
              help=f"With --trees: plan with {DRAFT_MS_HELP}")
@click.option("--stopping", "stopping_path", metavar="ESTIMATE", type=cost_file_type,
              help="Instead: plan a confidence-threshold stopping rule (tau, n_min, n_max) from the confidence law and "
                   "costs of an estimate (`specdec estimate --json`) or a validation.json, with each engine's "
                   "flags, the best fixed gamma beside it and the break-even ceiling (docs/theory.md).")
@click.option("--category", default=None, help="With --stopping: the category of a file with several.")
@click.option("--drafter", "stopping_drafter", default=None,
              help="With --stopping on a validation.json: the drafter's label.")
@click.option("--temperature", "stopping_temperature", type=float, default=None,
              help="With --stopping on a validation.json: the temperature.")
@json_option
def plan(alpha: float | None, alpha_per_position: tuple[float, ...] | None, c: float | None, c_hat: float | None,
         gamma: int | None, max_gamma: int, verify_cost: tuple[float, ...] | None, verify_cost_file: Path | None,
         context: int | None, source: str | None, draft_length: int | None, extrapolate: bool, batch_cost_file: Path | None,
         engine: str | None, method: str, figure: Path | None, study_path: Path | None, draft_ms: float | None,
         stopping_path: Path | None, category: str | None, stopping_drafter: str | None,
         stopping_temperature: float | None, as_json: bool) -> None:
    """Expected speedup, operations and memory traffic of speculative decoding, and the best gamma.

    Implements Leviathan et al. (ICML 2023): expected tokens per iteration (Eq. 1), walltime
    improvement (Theorem 8), operations increase (Theorem 10), memory-access reduction
    (Section 3.4), the gamma = 1 guarantee (Corollary 9) and the oracle-gamma bound
    (Section 3.5). Without --gamma the optimal gamma in 0..--max-gamma is evaluated
    (0 = do not speculate, i.e. alpha <= c). Give --alpha, --alpha-per-position, --from
    (an engine's counts) or --trees (a lattice study).

    \b
    Examples:
      specdec plan --alpha 0.8 --c 0.05
      specdec plan --alpha 0.75 --gamma 7 --c 0.02 --json
      specdec plan --alpha-per-position 0.9,0.8,0.7 --c 0.05 --verify-cost 1,1.5,1.6,1.7,1.8
      specdec plan --alpha 0.6 --c 0 --verify-cost-file estimate.json --context 900
      specdec plan --from metrics.txt --c 0 --batch-cost-file costs.json
      specdec plan --trees study.json --verify-cost-file gpu-costs.json --draft-ms 0.3
      specdec plan --stopping estimate.json --max-gamma 8
    """
    _check_options(click.get_current_context())
    if stopping_path is not None:
        from specdec.stopping import engine_curve, read_stopping_inputs, require_costs, stopping_plan, stopping_text

        try:
            inputs = read_stopping_inputs(stopping_path, category, stopping_drafter, stopping_temperature)
        except SpecdecError as exc:
            raise click.BadParameter(str(exc), param_hint="--stopping") from None
        engine_costs = None
        if batch_cost_file is not None:
            try:
                engine_costs = engine_curve(batch_cost_file, context if context is not None else inputs.context)
            except SpecdecError as exc:
                raise click.BadParameter(str(exc), param_hint="--batch-cost-file") from None
        try:
            require_costs(inputs, engine_costs)
        except SpecdecError as exc:
            raise click.BadParameter(str(exc), param_hint="--stopping") from None
        try:
            result = stopping_plan(inputs, max_gamma, engine_costs)
        except SpecdecError as exc:
            raise click.BadParameter(str(exc), param_hint="--max-gamma") from None
        click.echo(to_json(result, indent=2) if as_json else stopping_text(result))
        return
    if study_path is not None:
        _tree_plan(study_path, verify_cost_file, draft_ms, as_json, "--trees")
        return
    curve_file, at_context = _curve_file(verify_cost_file, None if verify_cost_file is None and batch_cost_file
                                         is not None else context)
    for option, given_curve in (("--verify-cost", verify_cost), ("--verify-cost-file", curve_file)):
        if given_curve is not None and len(given_curve) < 2:  # else "no gamma beats plain decoding", never evaluated
            raise click.BadParameter("v(1) alone evaluates no draft length: give v(1), ..., v(K) with K >= 2",
                                     param_hint=option)
    if c is None:
        ctx = click.get_current_context()
        raise click.MissingParameter(ctx=ctx, param=next(p for p in ctx.command.params if p.name == "c"))
    if source is not None:
        if verify_cost is not None and curve_file is not None:
            raise click.UsageError("give either --verify-cost or --verify-cost-file, not both")
        _engine_plan(source, c, draft_length, max_gamma if max_gamma != DEFAULT_MAX_GAMMA else None, extrapolate,
                     verify_cost if verify_cost is not None else curve_file, batch_cost_file, engine, method, figure,
                     as_json, at_context, context)
        return
    if alpha is None and alpha_per_position is None:
        raise click.UsageError("give --alpha, --alpha-per-position or --from (or --trees STUDY)")
    if alpha is not None and alpha_per_position is not None:
        raise click.UsageError("give either --alpha or --alpha-per-position, not both")
    if verify_cost is not None and curve_file is not None:
        raise click.UsageError("give either --verify-cost or --verify-cost-file, not both")
    curve = verify_cost if verify_cost is not None else curve_file
    if curve is not None and gamma is not None and gamma > len(curve) - 1:
        raise click.BadParameter(f"gamma = {gamma} needs v({gamma + 1}), but the verify-cost curve gives "
                                 f"v(1..{len(curve)}) only", param_hint="--gamma")
    try:
        result = make_plan(c=c, alpha=alpha, alpha_per_position=alpha_per_position, c_hat=c_hat, gamma=gamma,
                           max_gamma=max_gamma, verify_cost=curve)
    except SpecdecError as exc:  # a combination of options the simulator refuses
        raise click.UsageError(f"{exc} (options --alpha/--alpha-per-position, --c, --gamma, --max-gamma, "
                               "--verify-cost)") from None
    _echo(plan_dict(result), plan_text(result), at_context, as_json)


# The three plans of `specdec plan`, each picked by one option (the first given, in this order; the
# last is the default) with the options it takes: any other option given is one usage error.
STOPPING = frozenset({"category", "stopping_drafter", "stopping_temperature"})
PLANS: tuple[tuple[str | None, frozenset[str]], ...] = (
    ("stopping_path", frozenset({"max_gamma", "as_json", "batch_cost_file", "context"}) | STOPPING),  # --stopping
    ("study_path", frozenset({"verify_cost_file", "draft_ms", "as_json"})),  # --trees STUDY
    ("source", frozenset({"c", "max_gamma", "verify_cost", "verify_cost_file", "context", "draft_length",
                          "extrapolate", "batch_cost_file", "engine", "method", "figure", "as_json"})),  # --from
    (None, frozenset({"alpha", "alpha_per_position", "c", "c_hat", "gamma", "max_gamma", "verify_cost",
                      "verify_cost_file", "context", "as_json"})),  # --alpha / --alpha-per-position
)
GIVEN = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)


def _check_options(ctx: click.Context) -> None:
    """Which plan the options ask for (PLANS), and one usage error for an option it does not take."""
    given = [p for p in ctx.command.params if ctx.get_parameter_source(p.name) in GIVEN]
    names = {p.name for p in given}
    key, takes = next((k, t) for k, t in PLANS if k is None or k in names)
    extra = [p for p in given if p.name != key and p.name not in takes]
    if not extra:
        return
    flags = [p.opts[0] for p in extra]
    if key == "stopping_path":
        raise click.UsageError(f"--stopping plans from the file's confidence law and costs: drop {', '.join(flags)}")
    if extra[0].name in STOPPING:
        raise click.UsageError(f"{flags[0]} needs --stopping (an estimate or validation.json)")
    if key == "study_path":
        raise click.UsageError(f"--trees plans from the lattice study and its costs alone: drop {', '.join(flags)}")
    if extra[0].name in dict(PLANS)["study_path"]:
        raise click.UsageError(f"{flags[0]} needs --trees (a lattice study)")
    if key == "source" and extra[0].name in ("alpha", "alpha_per_position", "gamma"):
        raise click.UsageError("--from replaces --alpha, --alpha-per-position and --gamma")
    if key == "source":
        raise click.UsageError(f"--from plans from the engine's counts: {flags[0]} is not used with it")
    raise click.UsageError(f"{flags[0]} needs --from (engine counts)")


def _curve_file(path: Path | None, context: int | None) -> tuple[tuple[float, ...] | None, dict | None]:
    """The verify-cost curve of --verify-cost-file, at --context tokens when given (with where
    it was interpolated from)."""
    if context is None:
        return (None if path is None else _read(read_verify_cost, path, "--verify-cost-file")), None
    if path is None:
        raise click.UsageError("--context needs --verify-cost-file: an estimate with times at several context "
                               "lengths (`specdec estimate --json`)")
    times = _read(read_context_times, path, "--verify-cost-file")
    try:
        low, high = times.bracket(context)
    except SpecdecError as exc:
        raise click.BadParameter(f"{exc} ({path})", param_hint="--context") from None
    return times.verify_cost_at(context), {"tokens": context, "interpolated_between": [low, high],
                                           "timed_contexts": list(times.contexts), "file": str(path),
                                           "target_step_seconds": times.at(context)[0]}


def _echo(as_dict: dict, text: str, at_context: dict | None, as_json: bool) -> None:
    """The plan as JSON or text, with the context its verify costs were taken at."""
    if as_json:
        click.echo(to_json(as_dict if at_context is None else {**as_dict, "context": at_context}, indent=2))
        return
    if at_context is not None:
        low, high = at_context["interpolated_between"]
        where = f"timed at {low}" if low == high else f"interpolated between the timed {low} and {high}"
        text = (f"context {at_context['tokens']} tokens: t(1) {1000 * at_context['target_step_seconds']:.2f} ms, "
                f"v(k) {where} ({at_context['file']})\n" + text)
    click.echo(text)


def _engine_plan(source: str, c: float, draft_length: int | None, max_gamma: int | None, extrapolate: bool,
                 verify_cost: tuple[float, ...] | None, batch_cost_file: Path | None, engine: str | None,
                 method: str, figure: Path | None, as_json: bool, at_context: dict | None = None,
                 context: int | None = None) -> None:
    """`plan --from`: the engine's counts -> alpha_i -> the plan -> the engine's configuration."""
    from specdec.engines.acceptance import acceptance_from_counts
    from specdec.engines.configs import engine_config
    from specdec.engines.metrics import MAX_SOURCE_BYTES, read_counts, read_source
    from specdec.engines.registry import splits_batches
    from specdec.inputs import read_stdin
    from specdec.simulator.engine_plan import engine_plan

    if figure is not None:
        check_creatable(figure, "--figure")
    tables = [] if batch_cost_file is None else _read(read_batch_times, batch_cost_file, "--batch-cost-file")
    batch_times = _batch_at(tables, context, batch_cost_file)
    if figure is not None and batch_times is None:
        raise click.UsageError("--figure draws the batch plan: give --batch-cost-file")
    text = _read(read_source, source, "--from", _read(read_stdin, MAX_SOURCE_BYTES, "--from") if source == "-" else None)
    try:
        counts = read_counts(text)
        result = engine_plan(acceptance_from_counts(counts, draft_length), c, counts.source, max_gamma, extrapolate,
                             verify_cost, batch_times, tables if len(tables) > 1 else (), counts.draft_share,
                             splits_batches(counts.engine))
    except SpecdecError as exc:
        raise click.BadParameter(str(exc), param_hint="--from") from None
    engine = engine or counts.engine  # the configuration of the engine the counts came from, unless named
    try:
        config = None if engine is None else engine_config(result, engine, method)
    except SpecdecError as exc:
        raise click.BadParameter(str(exc), param_hint="--method") from None
    drawn = None
    if figure is not None:
        from specdec.figures.batch import batch_figure
        drawn = str(batch_figure(result, figure))
    _echo(engine_plan_dict(result, config, drawn), engine_plan_text(result, config, drawn), at_context, as_json)


def _batch_at(tables: list, context: int | None, path: Path | None):
    """The batch table to plan with: the file's one table, or at --context tokens between the
    contexts it timed (`specdec.simulator.batch.batch_times_at`)."""
    from specdec.simulator.batch import batch_times_at

    if not tables:
        return None
    if context is None:
        if len(tables) > 1:
            raise click.BadParameter(f"{path} times t(B, k) at contexts "
                                     f"{', '.join(str(t.context_tokens) for t in tables)}: give --context",
                                     param_hint="--context")
        return tables[0]
    try:
        return batch_times_at(tables, context)
    except SpecdecError as exc:
        raise click.BadParameter(f"{exc} ({path})", param_hint="--context") from None


def _tree_plan(study_path: Path, cost_path: Path | None, draft_ms: float | None, as_json: bool,
               study_hint: str) -> None:
    """`plan --trees`: predicted speedup of every (method, depth) of a lattice study, best first,
    and the drafter spec and --gamma of the best. Model and assumptions: `specdec.simulator.trees`."""
    from specdec.simulator.trees import plan_trees

    study = _read(read_lattice_study, study_path, study_hint)
    heads_ms = draft_ms if draft_ms is not None else study.get("heads_pass_ms")
    if heads_ms is None:
        raise click.BadParameter("the study was run with --no-timing: give --draft-ms", param_hint="--draft-ms")
    if cost_path is not None:
        steps = _read(read_tree_steps, cost_path, "--verify-cost-file")
    else:
        steps = _read(lambda path: study_tree_steps(study, path), study_path, study_hint)
        if steps is None:
            raise click.BadParameter("the study was run with --no-timing: give a verify-cost file",
                                     param_hint="--verify-cost-file")
    try:
        tree = plan_trees(study["by_depth"], steps.seconds, heads_ms / 1000, skip_larger=True)
    except SpecdecError as exc:
        raise click.BadParameter(str(exc), param_hint="--verify-cost-file" if cost_path else study_hint) from None
    args = (tree, study, str(study_path), steps.source, heads_ms)
    click.echo(to_json(tree_plan_dict(*args)) if as_json else tree_plan_text(*args))


@click.command("plan-trees", hidden=True)
@click.argument("study_path", metavar="STUDY", type=cost_file_type)
@click.option("--verify-cost-file", "verify_cost_file", type=cost_file_type, help=f"Plan with {TREE_COSTS_HELP}")
@click.option("--draft-ms", type=Number(float, 0, 1e6, high_open=True), default=None, help=f"Plan with {DRAFT_MS_HELP}")
@json_option
def plan_trees_command(study_path: Path, verify_cost_file: Path | None, draft_ms: float | None, as_json: bool) -> None:
    """The same as `specdec plan --trees STUDY`: the best parallel-drafts configuration of a saved
    lattice study (`specdec heads lattice --save`)."""
    _tree_plan(study_path, verify_cost_file, draft_ms, as_json, "STUDY")
