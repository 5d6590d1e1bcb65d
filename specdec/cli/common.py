"""What the commands share: click options, list parsers, prompt loading, seeded generators.

Every parser raises `click.BadParameter` naming its option, so bad input is one line and
exit status 2, before any model loads."""
from __future__ import annotations

from typing import Callable

import click

from specdec.reference.drafters.spec import SPEC_HELP


def stack(*options: Callable) -> Callable[[Callable], Callable]:
    """One decorator applying several click options, in the order written."""
    def apply(f: Callable) -> Callable:
        for option in reversed(options):
            f = option(f)
        return f
    return apply


model_options = stack(
    click.option("--target", "target_path", type=click.Path(file_okay=False), default=None,
                 help="Target model: a local Hugging Face causal LM folder. "
                      "Default: the embedded SmolLM2-135M-Instruct."),
    click.option("--device", default="cpu", show_default=True, help="cpu or cuda"),
    click.option("--dtype", default="float32", show_default=True,
                 type=click.Choice(["float32", "bfloat16", "float16"])),
)

sampling_options = stack(
    click.option("--temperature", type=float, default=0.0, show_default=True,
                 help="0 = greedy (argmax); > 0 samples from the tempered distribution."),
    click.option("--top-k", type=int, default=0, show_default=True, help="0 = off"),
    click.option("--top-p", type=float, default=1.0, show_default=True, help="1 = off"),
)

def parse_drafter(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Check a drafter spec's grammar (not its files) before any model loads."""
    from specdec.reference.drafters.spec import DrafterSpec

    if value is not None:
        try:
            DrafterSpec.parse(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc), ctx=ctx, param=param, param_hint="--drafter") from None
    return value


def require_drafter(spec: str, why: str) -> None:
    """A usage error when `spec` is 'none' for a command that needs a real drafter."""
    from specdec.reference.drafters.spec import DrafterSpec

    if DrafterSpec.parse(spec).kind == "none":
        raise click.BadParameter(why, param_hint="--drafter")


drafter_option = click.option("--drafter", default="lookup", show_default=True, callback=parse_drafter,
                              help=f"Draft model: {SPEC_HELP}")
seed_option = click.option("--seed", type=int, default=0, show_default=True,
                           help="Seeds the one torch.Generator used for all sampling.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")


def parse_floats(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[float, ...] | None:
    """"1,0.5,0.3" -> (1.0, 0.5, 0.3); a bad list is a one-line usage error naming the option."""
    if value is None:
        return None
    try:
        out = tuple(float(x) for x in value.split(",") if x.strip())
    except ValueError:
        raise click.BadParameter(f"expected comma-separated numbers, got {value!r}", ctx=ctx, param=param) from None
    if not out:
        raise click.BadParameter("expected at least one number", ctx=ctx, param=param)
    return out


def parse_lenience(ctx: click.Context, param: click.Parameter, value: str) -> tuple[float, ...]:
    values = parse_floats(ctx, param, value)
    bad = [l for l in values if not 0 < l <= 1]
    if bad:
        raise click.BadParameter(f"lenience values must be in (0, 1], got {bad[0]:g}", ctx=ctx, param=param)
    return values


def positive(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    if value is not None and value < 1:
        raise click.BadParameter(f"must be >= 1, got {value}", ctx=ctx, param=param)
    return value


def load_prompts(target, n: int, prompt_tokens: int, prompts_file: str | None) -> tuple[list[list[int]], list[str]]:
    """n prompts: the first n lines of prompts_file, or n held-out corpus prompts."""
    from specdec.reference.estimate.samples import held_out_prompts, prompts_from_file

    if prompts_file is not None:
        ids, names = prompts_from_file(prompts_file, target.tokenizer, prompt_tokens)
        return ids[:n], names[:n]
    return held_out_prompts(n, prompt_tokens, target.path)


def parse_positive_ints(ctx: click.Context, param: click.Parameter, value: str) -> tuple[int, ...]:
    """"1,2,4" -> (1, 2, 4); every entry a positive integer."""
    numbers = parse_floats(ctx, param, value)
    if any(g != int(g) or g < 1 for g in numbers):
        raise click.BadParameter(f"expected comma-separated positive integers, got {value!r}", ctx=ctx, param=param)
    return tuple(int(g) for g in numbers)


def parse_temperatures(ctx: click.Context, param: click.Parameter, value: str) -> tuple[float, ...]:
    numbers = parse_floats(ctx, param, value)
    if any(t < 0 for t in numbers):
        raise click.BadParameter(f"temperatures must be >= 0, got {value!r}", ctx=ctx, param=param)
    return numbers


def split_label(spec: str) -> tuple[str, str]:
    """"bigram=ngram:PATH" -> ("bigram", "ngram:PATH"); a plain spec is its own label."""
    label, sep, rest = spec.partition("=")
    if sep and label and not any(ch in label for ch in ":/\\"):
        return label, rest
    return spec, spec


def generator(device, seed: int):
    """A torch.Generator on `device` seeded with `seed`: the one seeding point of a command."""
    import torch

    return torch.Generator(device=device).manual_seed(seed)
