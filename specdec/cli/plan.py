"""`specdec plan` and `specdec figures`: thin commands over simulator/ and figures/.

Names follow Leviathan et al. (ICML 2023): `alpha` acceptance rate, `gamma` draft tokens per
iteration, `c` (`c_hat`) draft/target time (arithmetic) ratio.

Both commands only parse, call the library and print. Values are checked by the simulator's
own checks, turned into click.BadParameter so the message names the option. matplotlib is
imported only by `figures`, and torch never, so `specdec plan` starts fast.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

import click

from specdec.cli.common import check_out_dir, to_json

from specdec.simulator.optimal import DEFAULT_MAX_GAMMA
from specdec.simulator.plan import Plan, make_plan
from specdec.simulator.validation import (MAX_GAMMA, check_alpha, check_cost_ratio, check_gamma, check_max_gamma,
                                          check_per_position, check_verify_cost)

# Rows shown past the larger of the optimal and the asked-for gamma in the human-readable table.
ROWS_PAST_BEST = 3


def _checked(check: Callable[[Any], Any]) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A click callback running a simulator check; its ValueError becomes a BadParameter."""
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value is None:
            return None
        try:
            check(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc), ctx=ctx, param=param) from None
        return value
    return callback


def _number_list(check: Callable[[Any], Any]) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A click callback parsing "0.9,0.8,0.7" into a tuple of floats, then running a simulator check."""
    def callback(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[float, ...] | None:
        if value is None:
            return None
        try:
            numbers = tuple(float(part) for part in value.split(","))
        except ValueError:
            raise click.BadParameter(f"expected comma-separated numbers such as 0.9,0.8,0.7, got {value!r}",
                                     ctx=ctx, param=param) from None
        if len(numbers) > MAX_GAMMA + 1:
            raise click.BadParameter(f"at most {MAX_GAMMA + 1} values, got {len(numbers)}", ctx=ctx, param=param)
        return _checked(check)(ctx, param, numbers)
    return callback


def _at_most_max(g, name: str):
    if int(g) > MAX_GAMMA:
        raise ValueError(f"{name} must be at most {MAX_GAMMA}, got {int(g)}")
    return g


def _verify_cost_file(ctx: click.Context, param: click.Parameter, value: Path | None) -> tuple[float, ...] | None:
    """Read a verify-cost curve: a JSON list v(1..K), or an object holding it under "verify_cost"."""
    if value is None:
        return None
    try:
        data = json.loads(value.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise click.BadParameter(f"cannot read {value} as JSON: {exc}", ctx=ctx, param=param) from None
    if isinstance(data, dict):
        data = data.get("verify_cost")
    if not isinstance(data, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in data):
        raise click.BadParameter(f"{value} must hold a JSON list of numbers v(1), ..., v(K) "
                                 'or an object {"verify_cost": [...]}', ctx=ctx, param=param)
    return _checked(check_verify_cost)(ctx, param, tuple(float(x) for x in data))


@click.command()
@click.option("--alpha", type=float, callback=_checked(lambda a: check_alpha(a, allow_one=False)),
              help="Acceptance rate alpha in [0, 1) (i.i.d. model of the paper).")
@click.option("--alpha-per-position", "alpha_per_position", metavar="A1,A2,...",
              callback=_number_list(check_per_position),
              help="Per-position acceptances alpha_1,...,alpha_K, each in [0, 1]: alpha_i is the chance "
                   "draft i is accepted given drafts 1..i-1 were. Replaces --alpha; gamma > K reuses alpha_K.")
@click.option("--c", "c", type=float, required=True, callback=_checked(lambda c: check_cost_ratio(c, "c")),
              help="Cost coefficient c in [0, 1e6]: time of one draft step / time of one target step.")
@click.option("--c-hat", "c_hat", type=float, callback=_checked(lambda c: check_cost_ratio(c, "c_hat")),
              help="Arithmetic-operations ratio c_hat in [0, 1e6] for the operations factor (Theorem 10). "
                   "Default: equal to --c.")
@click.option("--gamma", type=int, callback=_checked(lambda g: _at_most_max(check_gamma(g), "gamma")),
              help=f"Evaluate this number of draft tokens per iteration, 0..{MAX_GAMMA}. Default: the optimal gamma.")
@click.option("--max-gamma", "max_gamma", type=int, default=DEFAULT_MAX_GAMMA, show_default=True,
              callback=_checked(check_max_gamma), help=f"Largest gamma the optimal-gamma search tries, 0..{MAX_GAMMA}.")
@click.option("--verify-cost", "verify_cost", metavar="V1,V2,...", callback=_number_list(check_verify_cost),
              help="Verify-cost curve v(1),...,v(K): time of one target pass over k tokens / time over 1 "
                   "token (so v(1) = 1, and every v(k) >= 1). An iteration then takes gamma*c + v(gamma+1) target steps "
                   "instead of the paper's gamma*c + 1, and gamma is limited to K - 1.")
@click.option("--verify-cost-file", "verify_cost_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              callback=_verify_cost_file,
              help='Read the verify-cost curve from a JSON file: [1, 1.1, ...] or {"verify_cost": [...]}.')
@click.option("--from", "source", metavar="FILE|-|URL",
              help="Acceptance counts an engine reported instead of --alpha: vLLM /metrics text (file or "
                   "http(s) URL), vLLM or llama.cpp logs, vLLM per-request metrics JSON, or `specdec decode --json` "
                   "output ('-': standard input). Formats: docs/engines.md.")
@click.option("--draft-length", type=int, default=None, callback=_checked(lambda g: _at_most_max(check_gamma(g), "draft length")),
              help="With --from: the draft length the engine ran with, for sources that do not state it (llama-server).")
@click.option("--extrapolate", is_flag=True,
              help="With --from: also plan draft lengths beyond the observed positions (alpha_i = the last observed; "
                   "flagged in the output).")
@click.option("--batch-cost-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="With --from: t(B, k) per batch size (`specdec estimate --batch-sizes ... --json`): the best draft "
                   "length per batch-size range.")
@click.option("--engine", type=click.Choice(["vllm", "llamacpp", "hf"]), default=None,
              help="With --from: print that engine's configuration for the plan.")
@click.option("--method", default="ngram", show_default=True,
              help="With --engine: the engine's speculative method (vLLM: ngram, draft_model, eagle, ...; "
                   "hf: ngram means prompt lookup, anything else an assistant model).")
@click.option("--figure", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="With --batch-cost-file: write the speedup-vs-batch-size figure (PNG) here.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
def plan(alpha: float | None, alpha_per_position: tuple[float, ...] | None, c: float, c_hat: float | None,
         gamma: int | None, max_gamma: int, verify_cost: tuple[float, ...] | None,
         verify_cost_file: tuple[float, ...] | None, source: str | None, draft_length: int | None, extrapolate: bool,
         batch_cost_file: Path | None, engine: str | None, method: str, figure: Path | None, as_json: bool) -> None:
    """Expected speedup, operations and memory traffic of speculative decoding, and the best gamma.

    Implements Leviathan et al. (ICML 2023): expected tokens per iteration (Eq. 1), walltime
    improvement (Theorem 8), operations increase (Theorem 10), memory-access reduction
    (Section 3.4), the gamma = 1 guarantee (Corollary 9) and the oracle-gamma bound
    (Section 3.5). Without --gamma the optimal gamma in 0..--max-gamma is evaluated
    (0 = do not speculate, i.e. alpha <= c). Give --alpha or --alpha-per-position.

    \b
    Examples:
      specdec plan --alpha 0.8 --c 0.05
      specdec plan --alpha 0.75 --gamma 7 --c 0.02 --json
      specdec plan --alpha-per-position 0.9,0.8,0.7 --c 0.05 --verify-cost 1,1.5,1.6,1.7,1.8
    """
    if source is not None:
        if alpha is not None or alpha_per_position is not None or gamma is not None:
            raise click.UsageError("--from replaces --alpha, --alpha-per-position and --gamma")
        if verify_cost is not None and verify_cost_file is not None:
            raise click.UsageError("give either --verify-cost or --verify-cost-file, not both")
        _engine_plan(source, c, draft_length, max_gamma if max_gamma != DEFAULT_MAX_GAMMA else None, extrapolate,
                        verify_cost if verify_cost is not None else verify_cost_file, batch_cost_file, engine, method,
                        figure, as_json)
        return
    for name, value in (("--engine", engine), ("--batch-cost-file", batch_cost_file), ("--figure", figure),
                        ("--draft-length", draft_length)):
        if value is not None:
            raise click.UsageError(f"{name} needs --from (engine counts)")
    if alpha is None and alpha_per_position is None:
        raise click.UsageError("give --alpha, --alpha-per-position or --from")
    if alpha is not None and alpha_per_position is not None:
        raise click.UsageError("give either --alpha or --alpha-per-position, not both")
    if verify_cost is not None and verify_cost_file is not None:
        raise click.UsageError("give either --verify-cost or --verify-cost-file, not both")
    curve = verify_cost if verify_cost is not None else verify_cost_file
    if curve is not None and gamma is not None and gamma > len(curve) - 1:
        raise click.BadParameter(f"gamma = {gamma} needs v({gamma + 1}), but the verify-cost curve gives "
                                 f"v(1..{len(curve)}) only", param_hint="--gamma")
    try:
        result = make_plan(c=c, alpha=alpha, alpha_per_position=alpha_per_position, c_hat=c_hat, gamma=gamma,
                           max_gamma=max_gamma, verify_cost=curve)
    except ValueError as exc:  # a combination of options the simulator refuses
        raise click.UsageError(f"{exc} (options --alpha/--alpha-per-position, --c, --gamma, --max-gamma, "
                               "--verify-cost)") from None
    click.echo(to_json(result.as_dict(), indent=2) if as_json else format_plan(result))


def _engine_plan(source: str, c: float, draft_length: int | None, max_gamma: int | None, extrapolate: bool,
                    verify_cost: tuple[float, ...] | None, batch_cost_file: Path | None, engine: str | None,
                    method: str, figure: Path | None, as_json: bool) -> None:
    from specdec.engines.plan import engine_plan, read_source
    from specdec.engines.report import format_engine_plan

    batch_timing = None
    if batch_cost_file is not None:
        try:
            data = json.loads(batch_cost_file.read_text())
            batch_timing = data["batch_timing"] if "batch_timing" in data else None
            if not (isinstance(batch_timing, dict) and {"batch_sizes", "seconds"} <= set(batch_timing)):
                raise KeyError
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
            raise click.BadParameter(f"{batch_cost_file} holds no batch_timing (batch_sizes, seconds): write it with "
                                     "`specdec estimate --batch-sizes ... --json`", param_hint="--batch-cost-file") from None
    if figure is not None and batch_timing is None:
        raise click.UsageError("--figure draws the batch plan: give --batch-cost-file")
    try:
        text = read_source(source, sys.stdin.read() if source == "-" else None)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--from") from None
    try:
        result = engine_plan(text, c, draft_length, max_gamma, extrapolate, verify_cost, batch_timing, engine, method)
    except ValueError as exc:
        hint = "--batch-cost-file" if "t(B, k)" in str(exc) or "batch sizes" in str(exc) else "--from"
        raise click.BadParameter(str(exc), param_hint=hint) from None
    if figure is not None:
        from specdec.figures.batch import batch_figure
        result["figure"] = str(batch_figure(result["batch"], figure))
    click.echo(to_json(result, indent=2) if as_json else format_engine_plan(result))


def format_plan(result: Plan) -> str:
    """The human-readable report of `specdec plan`."""
    d = result.as_dict()
    acceptance = (f"alpha = {result.alpha:g} (i.i.d.)" if result.alpha is not None else
                  "alpha_i = " + ",".join(f"{a:g}" for a in result.alpha_per_position) + " (per position)")
    cost = ("v(k) = 1 (paper)" if result.verify_cost is None else
            f"v(1..{len(result.verify_cost)}) = " + ",".join(f"{v:g}" for v in result.verify_cost))
    which = "optimal" if d["gamma_is_optimal"] else f"given; optimal is {result.optimal_gamma}"
    iid = result.alpha is not None  # else per-position acceptances, an extension of the paper
    timed_as_paper = iid and result.verify_cost is None  # else a verify-cost curve as well

    def ref(source: str, as_paper: bool = iid) -> str:
        return f"({source})" if as_paper else "(extended model)"

    lines = [
        f"{acceptance}, c = {result.c:g}, c_hat = {result.c_hat:g}, verify cost {cost}",
        f"gamma = {result.gamma} ({which}, searched 0..{result.max_gamma}):",
        f"  expected tokens per iteration  {d['expected_tokens']:.3f}   {ref('Eq. 1')}, incl. the target's token",
        f"  walltime improvement           {d['speedup']:.3f}X  {ref('Theorem 8', timed_as_paper)}",
        f"  arithmetic operations          {d['op_increase']:.3f}X  {ref('Theorem 10')}",
        f"  target memory reads            {d['memory_reduction']:.3f}X fewer  {ref('Section 3.4')}",
        f"some gamma in 1..{result.max_gamma} beats plain decoding: {'yes' if d['speculation_helps'] else 'no'}"
        + ("" if d["gamma1_speedup"] is None else
           f"; at gamma = 1 the speedup is {d['gamma1_speedup']:.3f}X {ref('Corollary 9', timed_as_paper)}"),
    ]
    if d["oracle"] is not None:
        oracle_speedup = d["oracle"]["speedup"]
        lines.append(f"oracle gamma (Section 3.5): {d['oracle']['expected_tokens']:.3f} tokens per iteration"
                     + ("" if oracle_speedup is None else f", speedup {oracle_speedup:.3f}X"))
    lines += ["", f"{'gamma':>5}  {'tokens/iter':>11}  {'speedup':>8}  {'operations':>10}  {'memory reads':>12}"]
    last = min(len(d["table"]) - 1, max(result.optimal_gamma, result.gamma) + ROWS_PAST_BEST)
    for row in d["table"][:last + 1]:
        mark = "  <- best" if row["gamma"] == result.optimal_gamma else ""
        lines.append(f"{row['gamma']:>5}  {row['expected_tokens']:>11.3f}  {row['speedup']:>7.3f}X  "
                     f"{row['op_increase']:>9.3f}X  {row['memory_reduction']:>11.3f}X{mark}")
    return "\n".join(lines)


@click.command()
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Folder for the PNG figures and Markdown tables (created if missing).")
@click.option("--lattice", "study_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Instead: the BPD paper's Figures 6 and 7 and Tables 3/4/5/9 from a saved lattice study "
                   "(`specdec heads lattice --save`).")
def figures(out: Path, study_path: Path | None) -> None:
    """Reproduce the paper's Figures 2-4, Table 1 and Table 4's EXP column from the simulator.

    Also draws the extensions (verify-cost curve, per-position acceptance). Prints the
    paths written.
    """
    check_out_dir(out)
    if study_path is not None:
        from specdec.figures.lattice import write_lattice
        try:
            study = json.loads(study_path.read_text())
            if not {"block_efficiency", "oracle_curve", "repetition", "wins"} <= set(study):
                raise KeyError
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
            raise click.BadParameter(f"{study_path} is not a lattice study of this version (`specdec heads lattice "
                                     "--save`)", param_hint="--lattice") from None
        paths = write_lattice(study, out)
    else:
        from specdec.figures.theory import write_all  # matplotlib is imported here only
        paths = write_all(out)
    for path in paths:
        click.echo(str(path))
