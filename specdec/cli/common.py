"""What the commands share: the option-checking layer, options, prompt loading, seeded
generators, strict JSON and safe writes.

Every check raises `click.BadParameter` naming its option, so bad input is one line and exit
status 2, before any model loads (see `preflight_target`)."""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Callable, Sequence

import click

from specdec.reference.drafters.spec import SPEC_HELP

MAX_GAMMA = 64  # most drafts per iteration a command accepts (a verify pass over 65 tokens)
MAX_SEED = 2**63 - 1  # torch.Generator.manual_seed takes a signed 64-bit integer


def stack(*options: Callable) -> Callable[[Callable], Callable]:
    """One decorator applying several click options, in the order written."""
    def apply(f: Callable) -> Callable:
        for option in reversed(options):
            f = option(f)
        return f
    return apply


# ---- single values ---------------------------------------------------------------------
def in_range(low: float | None = None, high: float | None = None, low_open: bool = False,
             high_open: bool = False) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A click callback: the value (if given) is finite and in the stated interval."""
    def describe() -> str:
        left = "-inf" if low is None else f"{low:g}"
        right = "inf" if high is None else f"{high:g}"
        return f"{'(' if low_open or low is None else '['}{left}, {right}{')' if high_open or high is None else ']'}"

    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value is None:
            return None
        ok = math.isfinite(value)
        ok = ok and (low is None or (value > low if low_open else value >= low))
        ok = ok and (high is None or (value < high if high_open else value <= high))
        if not ok:
            kind = "in" if isinstance(value, int) else "finite and in"
            shown = value if isinstance(value, int) else f"{value:g}"
            raise click.BadParameter(f"must be {kind} {describe()}, got {shown}", ctx=ctx, param=param)
        return value
    return callback


positive = in_range(1)
nonnegative = in_range(0)
probability = in_range(0, 1)


def check_text(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Text options (one value or several) must be valid UTF-8 (the shell may pass any bytes)."""
    for text in (value if isinstance(value, tuple) else (value,)):
        if text is None:
            continue
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise click.BadParameter("is not valid UTF-8 text", ctx=ctx, param=param) from None
    return value


# ---- lists -----------------------------------------------------------------------------
def parse_floats(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[float, ...] | None:
    """"1,0.5,0.3" -> (1.0, 0.5, 0.3): finite numbers, at least one."""
    if value is None:
        return None
    try:
        out = tuple(float(x) for x in value.split(",") if x.strip())
    except ValueError:
        raise click.BadParameter(f"expected comma-separated numbers, got {value!r}", ctx=ctx, param=param) from None
    if not out:
        raise click.BadParameter("expected at least one number", ctx=ctx, param=param)
    if not all(math.isfinite(x) for x in out):
        raise click.BadParameter(f"numbers must be finite, got {value!r}", ctx=ctx, param=param)
    return out


def parse_lenience(ctx: click.Context, param: click.Parameter, value: str) -> tuple[float, ...]:
    values = parse_floats(ctx, param, value)
    bad = [l for l in values if not 0 < l <= 1]
    if bad:
        raise click.BadParameter(f"lenience values must be in (0, 1], got {bad[0]:g}", ctx=ctx, param=param)
    return values


def parse_positive_ints(ctx: click.Context, param: click.Parameter, value: str) -> tuple[int, ...]:
    """"1,2,4" -> (1, 2, 4): distinct positive integers up to MAX_GAMMA."""
    numbers = parse_floats(ctx, param, value)
    if any(g != int(g) or not 1 <= g <= MAX_GAMMA for g in numbers):
        raise click.BadParameter(f"expected comma-separated integers in [1, {MAX_GAMMA}], got {value!r}",
                                 ctx=ctx, param=param)
    if len(set(numbers)) != len(numbers):
        raise click.BadParameter(f"values must be distinct, got {value!r}", ctx=ctx, param=param)
    return tuple(int(g) for g in numbers)


def parse_temperatures(ctx: click.Context, param: click.Parameter, value: str) -> tuple[float, ...]:
    numbers = parse_floats(ctx, param, value)
    if any(t < 0 for t in numbers):
        raise click.BadParameter(f"temperatures must be >= 0, got {value!r}", ctx=ctx, param=param)
    if len(set(numbers)) != len(numbers):
        raise click.BadParameter(f"temperatures must be distinct, got {value!r}", ctx=ctx, param=param)
    return numbers


# ---- drafters --------------------------------------------------------------------------
def parse_drafter(ctx: click.Context | None, param: click.Parameter | None, value: str | None) -> str | None:
    """Check a drafter spec's grammar (not its files) before any model loads."""
    from specdec.reference.drafters.spec import DrafterSpec

    if value is not None:
        try:
            spec = DrafterSpec.parse(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc), ctx=ctx, param=param, param_hint="--drafter") from None
        for path in spec.paths:
            if not Path(path).exists():
                raise click.BadParameter(f"{spec.kind}:{spec.arg}: {path}: no such file or folder", ctx=ctx,
                                         param=param, param_hint="--drafter")
        if spec.kind == "heads":
            from specdec.reference.heads.files import heads_folder
            try:
                heads_folder(spec.paths[0])
            except FileNotFoundError as exc:
                raise click.BadParameter(str(exc), ctx=ctx, param=param, param_hint="--drafter") from None
    return value


def require_drafter(spec: str, why: str) -> None:
    """A usage error when `spec` is 'none' for a command that needs a real drafter."""
    from specdec.reference.drafters.spec import DrafterSpec

    if DrafterSpec.parse(spec).kind == "none":
        raise click.BadParameter(why, param_hint="--drafter")


def refuse_tree_drafter(spec: str, why: str | None = None, temperatures: Sequence[float] = ()) -> None:
    """A usage error for a heads lattice drafter (several drafts a pass) where the command
    cannot take one (why), or at a temperature above 0 (trees are verified greedily)."""
    from specdec.reference.drafters.spec import DrafterSpec, heads_args

    s = DrafterSpec.parse(spec)
    if s.kind != "heads" or not heads_args(s.arg)[1]:
        return
    if why is not None:
        raise click.BadParameter(f"{spec}: {why}", param_hint="--drafter")
    if any(t > 0 for t in temperatures):
        raise click.BadParameter(f"{spec}: several drafts a pass (a draft tree) are verified at temperature 0 only",
                                 param_hint="--drafter")


def split_label(spec: str) -> tuple[str, str]:
    """"bigram=ngram:PATH" -> ("bigram", "ngram:PATH"); a plain spec is its own label."""
    label, sep, rest = spec.partition("=")
    if sep and label and not any(ch in label for ch in ":/\\"):
        return label, rest
    return spec, spec


# ---- options ---------------------------------------------------------------------------
model_options = stack(
    click.option("--target", "target_path", type=click.Path(file_okay=False), default=None,
                 help="Target model: a local Hugging Face causal LM folder. "
                      "Default: the embedded SmolLM2-135M-Instruct."),
    click.option("--device", default="cpu", show_default=True, help="cpu, cuda or cuda:N"),
    click.option("--dtype", default="float32", show_default=True,
                 type=click.Choice(["float32", "bfloat16", "float16"]),
                 help="Weights' dtype; bfloat16/float16 are different models from the float32 one (alpha must be "
                      "measured against the one that runs)."),
)
backend_option = click.option(
    "--target-backend", "backend", default="auto", show_default=True, type=click.Choice(["auto", "eager", "fast"]),
    help="How the models' matrix products run: eager (PyTorch) or fast (a packed-weight kernel for passes over "
         "1..16 tokens, CPU float32, built once); auto = fast where it runs.")
sampling_options = stack(
    click.option("--temperature", type=float, default=0.0, show_default=True, callback=nonnegative,
                 help="0 = greedy (argmax); > 0 samples from the tempered distribution."),
    click.option("--top-k", type=int, default=0, show_default=True, callback=nonnegative,
                 help="Keep the k most likely tokens; 0 = off."),
    click.option("--top-p", type=float, default=1.0, show_default=True, callback=in_range(0, 1, low_open=True),
                 help="Keep the smallest set of tokens with this much mass, in (0, 1]; 1 = off."),
)
drafter_option = click.option("--drafter", default="lookup", show_default=True, callback=parse_drafter,
                              help=f"Draft model: {SPEC_HELP}")
seed_option = click.option("--seed", type=int, default=0, show_default=True, callback=in_range(0, MAX_SEED),
                           help="The one seed (0 .. 2^63 - 1): every random stream (a prompt's sampling, a decode, the "
                                "bootstrap) gets a seed derived from it.")
json_option = click.option("--json", "as_json", is_flag=True,
                           help="Print one JSON object on stdout (progress stays on stderr).")
prompts_file_option = click.option("--prompts-file", type=click.Path(dir_okay=False), default=None,
                                   help="UTF-8 text file with one prompt a line, instead of the held-out "
                                        "corpus prompts.")


# ---- before any model loads ----------------------------------------------------------
def preflight_target(target_path: str | None) -> tuple[Path, int | None]:
    """The target folder and its position limit, checked without loading the model: a
    missing config, weights or tokenizer is a usage error naming --target."""
    from specdec.reference.core.models import check_model_folder, context_limit

    if target_path is None:
        from specdec.reference.data.default_model import default_target_path
        target_path = default_target_path()
    try:
        path = check_model_folder(target_path)
        return path, context_limit(path)
    except (OSError, ValueError) as exc:
        raise click.BadParameter(str(exc), param_hint="--target") from None


def check_context(limit: int | None, tokens: int, what: str, option: str) -> None:
    """A usage error when `tokens` positions exceed the model's limit."""
    if limit is not None and tokens > limit:
        raise click.BadParameter(f"{what} needs {tokens} positions, more than the model's {limit}",
                                 param_hint=option)


def check_out_dir(path: str | os.PathLike, option: str = "--out") -> Path:
    """Create the output folder now and check that it is writable, so a run cannot fail at
    its end for want of a place to write."""
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".specdec-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise click.BadParameter(f"cannot write to {str(out)!r}: {exc.strerror or exc}", param_hint=option) from None
    return out


def load_prompts(target, n: int, prompt_tokens: int, prompts_file: str | None) -> tuple[list[list[int]], list[str]]:
    """n prompts: the first n lines of prompts_file, or n held-out corpus prompts."""
    from specdec.reference.data.prompts import held_out_prompts, prompts_from_file

    if prompts_file is not None:
        ids, names = prompts_from_file(prompts_file, target.tokenizer, prompt_tokens)
        return ids[:n], names[:n]
    return held_out_prompts(n, prompt_tokens, target.path)


def generator(device, seed: int):
    """A torch.Generator on `device` seeded with `seed`: the one seeding point of a command."""
    import torch

    return torch.Generator(device=device).manual_seed(seed)


# ---- output ----------------------------------------------------------------------------
def finite_or_none(value: Any) -> Any:
    """The value with every NaN / infinite float (nested in dicts, lists, tuples) as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_none(v) for v in value]
    return value


def to_json(value: Any, indent: int | None = None) -> str:
    """Strict JSON: undefined rates are null, never NaN or Infinity."""
    return json.dumps(finite_or_none(value), indent=indent, allow_nan=False)


def write_atomic(path: Path, text: str) -> None:
    """Write to a temporary name beside `path`, then rename: a crash never leaves half a file."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)
