"""Click options shared by the commands that load models (decode, estimate, validate, bild)."""
from __future__ import annotations

from typing import Callable

import click

from specdec.drafter_help import SPEC_HELP


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

drafter_option = click.option("--drafter", default="lookup", show_default=True,
                              help=f"Draft model: {SPEC_HELP}")
seed_option = click.option("--seed", type=int, default=0, show_default=True,
                           help="Seeds the one torch.Generator used for all sampling.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
