"""`specdec llamacpp`: llama.cpp in the loop. `costs` measures the engine's own t(B, k) inside
llama-server and writes a cost file `plan --batch-cost-file` reads; `validate` runs a grid of
speculative configurations (and the flags a plan printed) on the workload prompts, measured
against no speculation, beside the prediction from the engine's counts and its costs.

Thin: parse and check everything (options, files, the binary, the model) before any server
starts; the work is in `specdec.engines.llamacpp` (costs, validation); output through a temporary
name. Method and commands: docs/engines.md.
"""
from __future__ import annotations

import os
from pathlib import Path

import click

from specdec.cli.outputs import check_creatable
from specdec.cli.types import Number, NumberList, PromptsFile, Workloads

THREADS_HELP = ("llama-server's -t. Default 1: on a shared 2-core machine two threads spin-wait on each other "
                "whenever another process takes a core (a step 9 ms quiet, 260 ms contended, measured).")


def _binary(path: str | None) -> Path:
    from specdec.engines.llamacpp.server import find_binary
    from specdec.errors import SpecdecError

    try:
        return find_binary(path)
    except SpecdecError as exc:
        raise click.BadParameter(str(exc), param_hint="--llama-server") from None


def _model(path: str | None, option: str = "--model") -> Path:
    from specdec.engines.llamacpp.server import default_model
    from specdec.errors import SpecdecError

    if path is None:
        try:
            path = default_model()
        except SpecdecError as exc:
            raise click.BadParameter(str(exc), param_hint=option) from None
    model = Path(path)
    try:
        with open(model, "rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise click.BadParameter(f"{path}: {exc.strerror}", param_hint=option) from None
    if magic != b"GGUF":
        raise click.BadParameter(f"{path} is not a GGUF file (llama-server loads GGUF only)", param_hint=option)
    return model


def _write(out: Path, data: dict) -> None:
    """The JSON file, through a temporary name beside it (never half written)."""
    from specdec.strict_json import to_json

    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(to_json(data, indent=1))
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)


server_options = [
    click.option("--llama-server", "llama_server", default=None, metavar="PATH",
                 help="A llama-server binary [default: $SPECDEC_LLAMA_SERVER, else scripts/llamacpp.sh's build]."),
    click.option("--model", default=None, metavar="GGUF",
                 help="The target's GGUF [default: the default target's Q4_1, SmolLM2-135M-Instruct]."),
    click.option("--threads", type=Number(int, 1, 256), default=1, show_default=True, help=THREADS_HELP),
]


def _server_options(f):
    for option in reversed(server_options):
        f = option(f)
    return f


@click.group("llamacpp")
def llamacpp() -> None:
    """llama.cpp in the loop: its own costs, and specdec's predictions checked against it."""


@llamacpp.command("costs")
@_server_options
@click.option("--k", "ks", default="1,2,3,4,6,8,12,16,24,32", show_default=True,
              type=NumberList(int, 1, 80, increasing=True, what="verify lengths"),
              help="Verify lengths k timed (k - 1 drafts; must start at 1); t is linear in between.")
@click.option("--batch-sizes", default="1,2,4", show_default=True,
              type=NumberList(int, 1, 64, increasing=True, what="batch sizes"),
              help="Slots (-np B) decoding at once, B concurrent requests.")
@click.option("--contexts", default="128,512", show_default=True,
              type=NumberList(int, 64, 8192, increasing=True, what="context lengths"),
              help="Prompt lengths in tokens (about: the file records the real ones).")
@click.option("--repeats", type=Number(int, 1, 100), default=3, show_default=True,
              help="Interleaved repeats (the median is kept).")
@click.option("--new-tokens", type=Number(int, 8, 4096), default=64, show_default=True,
              help="Tokens each timed request decodes.")
@click.option("--draft", "drafts", multiple=True, metavar="GGUF",
              help="A draft model's GGUF (repeatable): its own plain step t_d(1) and its passes inside the "
                   "speculative loop are timed at each context too (`draft_seconds` in the file).")
@click.option("--mixed-k", "mixed_ks", type=NumberList(int, 2, 80, increasing=True, what="verify lengths"),
              default=None, metavar="K,...", help="Also time, on each B's server verifying K (each one of --k), "
              "steps whose first r < B slots verify K, the rest one token: how it runs drafts K - 1 long (`mixed`).")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The cost file to write (`specdec plan --batch-cost-file`).")
def costs(llama_server, model, threads, ks, batch_sizes, contexts, repeats, new_tokens, drafts, mixed_ks, out) -> None:
    """Time t(B, k) inside llama-server: every step a k-token verify (synthetic acceptance 0 on
    n-gram drafts of k - 1 tokens), B slots at once, at each context; and the cost of an accepted
    token. Writes a `specdec.estimate` cost file with the engine's version and flags."""
    from specdec.engines.llamacpp.costs import measure

    if ks[0] != 1 or len(ks) < 2:
        raise click.BadParameter("the verify lengths must start at 1 (the plain step) and hold one more",
                                 param_hint="--k")
    if drafts and max(ks) < 3:
        raise click.BadParameter("a draft's loop costs need drafts of two lengths: time k up to 3 at least",
                                 param_hint="--k")
    if drafts and batch_sizes[0] != 1:
        raise click.BadParameter("a draft is timed beside the target at B = 1: the batch sizes must start at 1",
                                 param_hint="--batch-sizes")
    if any(K not in ks for K in mixed_ks or ()):
        raise click.BadParameter(f"{list(mixed_ks)}: not all among the timed {list(ks)}", param_hint="--mixed-k")
    check_creatable(out, "--out")
    binary, gguf = _binary(llama_server), _model(model)
    data = measure(binary, gguf, ks, batch_sizes, contexts, repeats, new_tokens, threads, log=lambda line: click.echo(
        line, err=True), drafts=tuple(_model(d, "--draft") for d in drafts), mixed_ks=tuple(mixed_ks or ()))
    _write(out, data)
    first = data["batch_timing"][0]
    click.echo(f"wrote {out}: t(1) {1e3 * first['seconds'][0][0]:.2f} ms at {first['context_tokens']} tokens, "
               f"v(k) " + " ".join(f"{k}:{data['verify_cost'][k - 1]:.2f}" for k in ks)
               + (f", accepted token {1e3 * data['accept_seconds']:.3f} ms" if data["accept_seconds"] is not None
                  else ""))


@llamacpp.command("validate")
@_server_options
@click.option("--costs", "costs_path", required=True, type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="The engine's cost file (`specdec llamacpp costs --out`).")
@click.option("--workloads", default="code,summarize,rag,edit,chat", show_default=True, type=Workloads(),
              help="Embedded workloads (`all` or names), their held-out prompts through the chat template.")
@click.option("--prompts", "per_workload", type=Number(int, 0, 100), default=1, show_default=True,
              help="Prompts per workload.")
@click.option("--prompts-file", type=PromptsFile(), default=None,
              help="More prompts (one a line, or JSON lines: docs/workloads.md); user turns go through the chat "
                   "template, plain lines to /completion.")
@click.option("--temperatures", default="0,1", show_default=True,
              type=NumberList(float, 0, 2, distinct=True, what="temperatures"), help="Sampling temperatures.")
@click.option("--repeats", type=Number(int, 1, 100), default=2, show_default=True,
              help="Repeats of the whole grid (fresh servers each), interleaved.")
@click.option("--new-tokens", type=Number(int, 8, 4096), default=128, show_default=True,
              help="Tokens each request decodes.")
@click.option("--grid", "grid_spec", default=None, metavar="LABEL=FLAGS;...",
              help="Instead of the default grid: configurations as LABEL=--spec-type T ... separated by ';' "
                   "(`none` is always run).")
@click.option("--draft", "draft_gguf", default=None, metavar="GGUF",
              help="Add draft-model rows (--spec-type draft-simple -md GGUF) at each --draft-gammas; the cost file "
                   "must have timed this GGUF (`specdec llamacpp costs --draft GGUF`).")
@click.option("--draft-gammas", default="1,3", show_default=True,
              type=NumberList(int, 1, 64, increasing=True, what="draft lengths"),
              help="Draft lengths of the --draft rows (--spec-draft-n-max).")
@click.option("--draft-p-min", "draft_p_mins", default="0", show_default=True,
              type=NumberList(float, 0, 1, increasing=True, what="confidence cut-offs"),
              help="Confidence cut-offs of the --draft rows (--spec-draft-p-min), a row per (length, cut-off); "
                   "prediction (b) of a cut-off above 0 reads the estimate's confidence law (`specdec estimate "
                   "--confidence-top-k 10`).")
@click.option("--estimate", "estimates", multiple=True, metavar="LABEL=FILE",
              help="Prediction (b) for the configuration LABEL: `specdec estimate --json` of its specdec drafter on "
                   "the same prompts (the draft's HF folder, lookup:1 for a 1-token ngram-simple lookup and the "
                   "synthetic rows) at one temperature; repeatable (docs/engines.md).")
@click.option("--advise/--no-advise", default=True, show_default=True,
              help="Then plan from the engine's counts of --advise-from (`plan --from ... --batch-cost-file "
                   "COSTS`), run the printed ngram flags and report the regret against the grid's best.")
@click.option("--advise-from", default="ngram-simple g16", show_default=True,
              help="The grid configuration whose counts the plan reads.")
@click.option("--batch-sizes", default=None, type=NumberList(int, 1, 64, increasing=True, what="batch sizes"),
              help="Instead of the grid's single requests: for each B, every prompt once a repeat in waves of B "
                   "concurrent clients against -np B; the throughput speedup per B and the crossover, measured and "
                   "predicted by llama.cpp's equal micro-batches (and by one packed pass) from the cost file's "
                   "t(B, k) (which must hold these B). No advice run.")
@click.option("--arrivals", type=click.Choice(["waves", "streams"]), default="waves", show_default=True,
              help="With --batch-sizes: waves of B requests that start together, or B clients each sending its "
                   "requests back to back out of phase, as a server's users do (batch sizes from 1: docs/engines.md).")
@click.option("--seed", type=Number(int, 0, 2**31 - 1), default=0, show_default=True,
              help="Seeds the requests' sampling and the bootstrap.")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The result (JSON): every request, every cell, the advice.")
def validate(llama_server, model, threads, costs_path, workloads, per_workload, prompts_file, temperatures, repeats,
             new_tokens, grid_spec, draft_gguf, draft_gammas, draft_p_mins, estimates, advise, advise_from, batch_sizes,
             arrivals, seed, out) -> None:
    """Run a grid of speculative configurations in llama-server on the workload prompts, paired with
    no speculation, and print per configuration and temperature: the measured speedup (95%
    bootstrap interval over prompt x repeat pairs), tokens per step and prediction (a) from the
    engine's reported counts and its measured costs. With --advise, the plan's pick run too;
    with --batch-sizes, B clients at once per B instead (throughput and crossover)."""
    from specdec.engines.llamacpp import validation as v
    from specdec.errors import SpecdecError

    check_creatable(out, "--out")
    try:
        from specdec.strict_json import loads
        cost_data = loads(costs_path.read_text())
        costs = v.EngineCosts.from_file(cost_data)
    except (SpecdecError, ValueError, KeyError, TypeError, IndexError, OSError) as exc:
        raise click.BadParameter(f"{costs_path} is not a llama.cpp cost file ({str(exc)[:120]})",
                                 param_hint="--costs") from None
    configs = v.default_grid() if grid_spec is None else _grid(grid_spec)
    if draft_gguf is not None:
        gguf_draft = _model(draft_gguf, "--draft")
        configs += [v.draft(gguf_draft, g, p) for g in draft_gammas for p in draft_p_mins]
    replays = _estimates(estimates, configs)
    for c in configs:  # a draft model's tokens are priced at its own step: the cost file must hold it
        if c.draft_model is not None:
            try:
                costs.t_draft(c.draft_model, 0)
            except SpecdecError as exc:
                raise click.BadParameter(str(exc), param_hint="--draft" if draft_gguf else "--grid") from None
    if batch_sizes is not None:
        timed = cost_data["batch_timing"] if isinstance(cost_data["batch_timing"], list) else [cost_data["batch_timing"]]
        lacking = [b for b in batch_sizes if any(b not in t.get("batch_sizes", []) for t in timed)]
        if lacking:
            raise click.BadParameter(f"{costs_path} holds no t(B, k) for B = {','.join(map(str, lacking))} "
                                     "(`specdec llamacpp costs --batch-sizes`)", param_hint="--batch-sizes")
        if arrivals == "streams" and batch_sizes[0] != 1:
            raise click.BadParameter("streams are predicted from B = 1: start the batch sizes at 1",
                                     param_hint="--arrivals")
        advise = False
    elif arrivals != "waves":
        raise click.BadParameter("streams need --batch-sizes", param_hint="--arrivals")
    if advise and advise_from not in [c.label for c in configs]:
        raise click.BadParameter(f"{advise_from!r} is not a configuration of the grid", param_hint="--advise-from")
    requests = _requests(workloads, per_workload, prompts_file)
    binary, gguf = _binary(llama_server), _model(model)
    log = lambda line: click.echo(line, err=True)  # noqa: E731
    if batch_sizes is not None:
        _validate_batches(binary, gguf, configs, requests, temperatures, batch_sizes, repeats, new_tokens, threads,
                          log, seed, cost_data, costs_path, out, arrivals)
        return
    records = v.run_grid(binary, gguf, configs, requests, temperatures, repeats, new_tokens, threads, log, seed)
    result = {"kind": "specdec.llamacpp-validation", "costs": str(costs_path), "engine": cost_data.get("engine"),
              "grid": [{"label": c.label, "flags": c.command_line()} for c in configs],
              "temperatures": list(temperatures), "sampler": v.SAMPLER, "repeats": repeats, "new_tokens": new_tokens,
              "threads": threads, "prompts": [r.name for r in requests], "records": v.as_dicts(records),
              "cells": [v.asdict(c) for c in v.cells(records, costs, seed, configs)],
              "baselines": v.baselines(records, costs)}
    _with_b(result, records, configs, replays, costs)
    if advise:
        from specdec.engines.llamacpp.advice import advise as advice_run

        result["advice"] = [advice_run(binary, gguf, records, costs, cost_data, configs, advise_from, t, requests,
                                       repeats, new_tokens, threads, log, seed) for t in temperatures]
    for a in result.get("advice", []):  # the counts the plan read, as the page `plan --from` takes
        page = out.with_name(f"{out.stem}.T{a['temperature']:g}.metrics.txt")
        page.write_text(a["metrics_page"])
        a["plan_command"] = a["plan_command"].replace("METRICS", str(page)).replace("COSTS", str(costs_path))
    _write(out, result)
    click.echo(render(result))


def _estimates(specs, configs) -> dict:
    """{(label, temperature): {category: `Estimated`}} from --estimate LABEL=FILE."""
    from specdec.engines.llamacpp.estimated import category_estimates
    from specdec.errors import SpecdecError
    from specdec.strict_json import loads

    labels = {c.label: c for c in configs}
    out = {}
    for spec in specs:
        label, eq, name = spec.rpartition("=")
        if not eq or label not in labels:
            raise click.BadParameter(f"{spec[:80]!r}: write LABEL=FILE with LABEL one of the grid's "
                                     f"({', '.join(labels)})", param_hint="--estimate")
        try:
            data = loads(Path(name).read_text())
            reports = data["categories"] if "categories" in data else {"": data}
            temperatures = {float(r["sampling"]["temperature"]) for r in reports.values()}
            if len(temperatures) != 1:
                raise SpecdecError("its categories were sampled at different temperatures")
            out[(label, temperatures.pop())] = category_estimates(data, labels[label], Path(name))
            other = _other_sampler(next(iter(reports.values()))["sampling"])
        except (SpecdecError, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise click.BadParameter(f"{name}: not a usable `specdec estimate --json` output ({str(exc)[:160]})",
                                     param_hint="--estimate") from None
        if other:
            raise click.BadParameter(f"{name}: {other}", param_hint="--estimate")
    return out


def _other_sampler(sampling: dict) -> str | None:
    """Why an estimate sampled at T > 0 does not predict the engine's requests (their sampler is
    `validation.SAMPLER`), or None: its categories share one sampling (`run_estimate`)."""
    from specdec.engines.llamacpp.validation import SAMPLER

    if float(sampling["temperature"]) == 0:
        return None
    used = {"top_k": int(sampling.get("top_k", 0)), "top_p": float(sampling.get("top_p", 1.0)),
            "min_p": float(sampling.get("min_p", 0.0))}
    if used == SAMPLER:
        return None
    flags = " ".join(f"--{k.replace('_', '-')} {v:g}" for k, v in SAMPLER.items())
    return (f"sampled at top-k {used['top_k']}, top-p {used['top_p']:g}, min-p {used['min_p']:g}; the engine's "
            f"requests sample as llama-server's default does (`specdec estimate {flags}`)")


def _with_b(result: dict, records, configs, replays: dict, costs) -> None:
    """Prediction (b) beside (a) in each cell that has an estimate at its temperature."""
    from specdec.engines.llamacpp.estimated import predicted_b

    labels = {c.label: c for c in configs}
    for cell in result["cells"]:
        found = replays.get((cell["config"], float(cell["temperature"])))
        if found is None:
            continue
        rows = [r for r in records if r.config == cell["config"] and r.temperature == cell["temperature"]]
        cell["predicted_b"] = predicted_b(labels[cell["config"]], rows, found, costs)


def _validate_batches(binary, gguf, configs, requests, temperatures, batch_sizes, repeats, new_tokens, threads, log,
                      seed, cost_data, costs_path, out, arrivals) -> None:
    from dataclasses import asdict

    from specdec.engines.llamacpp import batches as b
    from specdec.engines.llamacpp.streams import design, run_streams
    from specdec.engines.llamacpp.validation import SAMPLER

    run = run_streams if (streams := arrivals == "streams") else b.run_batches
    accept = max(0.0, float(cost_data.get("accept_seconds") or 0.0))
    result = {"kind": "specdec.llamacpp-batches", "costs": str(costs_path), "engine": cost_data.get("engine"),
              "grid": [{"label": c.label, "flags": c.command_line()} for c in configs], "temperatures": [],
              "batch_sizes": list(batch_sizes), "repeats": repeats, "new_tokens": new_tokens, "threads": threads,
              "prompts": [r.name for r in requests], "seed": seed, "sampler": SAMPLER, "arrivals": arrivals,
              **(design() if streams else {})}
    for t in temperatures:
        records = run(binary, gguf, configs, requests, batch_sizes, t, repeats, new_tokens, threads, log, seed)
        result["temperatures"].append({"temperature": t, "configs": b.points(records, cost_data, accept, seed),
                                       "records": [asdict(r) for r in records]})
    _write(out, result)
    click.echo(b.render(result))


def _grid(spec: str):
    from specdec.engines.llamacpp.validation import Config, from_flags

    configs = [Config("none", None)]
    for part in (p.strip() for p in spec.split(";") if p.strip()):
        label, eq, flags = part.partition("=")
        if not eq or not label.strip() or "--spec-type" not in flags.split():
            raise click.BadParameter(f"{part[:60]!r}: write LABEL=--spec-type T [flags]", param_hint="--grid")
        if label.strip() == "none" or label.strip() in [c.label for c in configs]:
            raise click.BadParameter(f"{label.strip()!r}: labels must be distinct and not 'none'", param_hint="--grid")
        configs.append(from_flags(label.strip(), flags))
    if len(configs) < 2:
        raise click.BadParameter("no configuration besides none", param_hint="--grid")
    return configs


def _requests(workloads, per_workload: int, prompts_file):
    from specdec.engines.llamacpp.validation import Request
    from specdec.errors import SpecdecError
    from specdec.reference.data.prompt_sources import read_prompts_file
    from specdec.reference.data.workloads import workload_prompts

    prompts = []
    if per_workload:
        for name in workloads:
            try:
                prompts += workload_prompts(name, per_workload)
            except (SpecdecError, FileNotFoundError) as exc:
                raise click.BadParameter(str(exc), param_hint="--workloads") from None
    if prompts_file is not None:
        prompts += read_prompts_file(prompts_file)
    if not prompts:
        raise click.BadParameter("no prompt: give --prompts 1 or more, or --prompts-file", param_hint="--prompts")
    return [Request(p.name, p.category, p.text, p.turn) for p in prompts]


def render(result: dict) -> str:
    """The cells and the advice as text."""
    lines = [f"{'configuration':<22}{'T':>4}{'measured':>10}{'95% interval':>16}{'pred (a)':>10}{'error':>8}"
             f"{'tok/step':>9}{'draft':>7}{'pred (b)':>10}{'error':>8}"]
    for c in result["cells"]:
        draft = "-" if c["mean_draft"] is None else f"{c['mean_draft']:.1f}"
        lines.append(f"{c['config']:<22}{c['temperature']:>4g}{c['measured']:>9.3f}x  [{c['interval'][0]:.3f}, "
                     f"{c['interval'][1]:.3f}]{c['predicted']:>9.3f}x{100 * (c['predicted'] / c['measured'] - 1):>7.1f}%"
                     f"{c['tokens_per_step']:>9.2f}{draft:>7}"
                     + (f"{c['predicted_b']:>9.3f}x{100 * (c['predicted_b'] / c['measured'] - 1):>7.1f}%"
                        if c.get("predicted_b") is not None else ""))
    for b in result.get("baselines", []):
        lines.append(f"no speculation T={b['temperature']:g}: {b['measured_ms']:.2f} ms a step measured, "
                     f"{b['cost_file_ms']:.2f} ms from the cost file's t(1, L)")
    for a in result.get("advice", []):
        rivals = ", ".join(f"{k} {v['measured']:.3f}x" for k, v in a["measured"].items() if k != "advice")
        lines.append(f"advice T={a['temperature']:g}: gamma {a['gamma']} ({a['flags'] or 'no speculation'}), "
                     f"predicted {a['predicted']:.3f}x, measured {a['advice_measured']:.3f}x; {rivals}; "
                     f"regret {100 * a['regret']:.1f}%"
                     + (" [{:.1f}, {:.1f}]".format(*(100 * x for x in a["regret_interval"])) if "regret_interval" in a
                        else ""))
    return "\n".join(lines)
