"""What the commands share: options (one vocabulary across commands), the checks that need more
than one value or a file, and the seeded generator. Single values are checked by their
parameter types (`specdec.cli.types`).

Every check raises `click.BadParameter` naming its option, so bad input is one line and exit
status 2, before any model loads (see `preflight_target`)."""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Callable

import click

from specdec.cli.types import (NONNEGATIVE, POSITIVE, UNIT_OPEN_LOW, Device, DrafterSpecType, ModelPath, Number,
                               NumberList, PromptsFile, Renamed, Workloads)
from specdec.errors import SpecdecError
from specdec.reference.data.python_source import MAX_TOKENS as MAX_CODE_TOKENS
from specdec.reference.drafters.spec import SPEC_HELP

MAX_DECODE_GAMMA = 64  # most drafts per iteration a decoding command accepts (a verify pass over 65 tokens)
MAX_TOKENS = 10_000_000  # most positions an estimate scores (hours on a GPU; refused above, before allocating)
MAX_TRAIN_TOKENS = 16_000_000  # most teacher-forced tokens a draft trains on (4x the largest run so far; days on a CPU)
MAX_DRAFT_VOCAB = 262_144  # most output ids a trained draft proposes (the largest vocabularies in use: 256 k)
MAX_PROMPTS = 10_000  # most prompts a decoding command runs
MAX_REPEATS = 1000  # most repeats of a timing or a decode
MAX_BOOTSTRAP = 100_000  # most bootstrap resamples
MAX_SEED = 2**63 - 1  # torch.Generator.manual_seed takes a signed 64-bit integer


def stack(*options: Callable) -> Callable[[Callable], Callable]:
    """One decorator applying several click options, in the order written."""
    def apply(f: Callable) -> Callable:
        for option in reversed(options):
            f = option(f)
        return f
    return apply


# ---- drafters --------------------------------------------------------------------------
def require_drafter(spec: str, why: str) -> None:
    """A usage error when `spec` is 'none' for a command that needs a real drafter."""
    from specdec.reference.drafters.spec import DrafterSpec

    if DrafterSpec.parse(spec).kind == "none":
        raise click.BadParameter(why, param_hint="--drafter")


def check_heads_prompts(spec: str, prompt_tokens: int) -> None:
    """A usage error when heads (which draft from the state under the prompt's last-but-one
    token) are estimated on prompts shorter than 2 tokens."""
    from specdec.reference.drafters.spec import DRAFTER_KINDS, DrafterSpec

    if DRAFTER_KINDS[DrafterSpec.parse(spec).kind].causal_only and prompt_tokens < 2:  # on the target's states
        raise click.BadParameter(f"{spec}: drafters on the target's features need prompts of at least 2 tokens",
                                 param_hint="--prompt-tokens")


def refuse_tree_drafter(spec: str, why: str) -> None:
    """A usage error for a drafter that proposes token trees (several drafts a pass) where the
    command cannot take one (why). Every tree drafter's trees are deterministic, so decoding
    verifies them at any temperature."""
    from specdec.reference.drafters.spec import DrafterSpec

    if DrafterSpec.parse(spec).tree:
        raise click.BadParameter(f"{spec}: {why}", param_hint="--drafter")


training_data_options = stack(  # what a trained drafter learns from (specdec.reference.heads.build.DataConfig)
    click.option("--tokens", type=Number(int, 1, MAX_TRAIN_TOKENS), default=49_152, show_default=True,
                 help="Teacher-forced training tokens in all (target samples + corpus windows; the heads and the "
                      "feature draft share the target's passes over the same data options, cached)."),
    click.option("--aligned-tokens", type=Number(int, 0, MAX_TRAIN_TOKENS), default=16_000, show_default=True,
                 help="Of them, about this many tokens the target sampled itself (generated once, cached; 0: corpus "
                      "only)."),
    click.option("--sampled-from", type=click.Choice(["workloads", "corpus"]), default="workloads", show_default=True,
                 help="What the target answers for those: the embedded workloads' training prompts in its chat "
                      "template (code, summarize, rag, edit, chat; never a held-out prompt), or plain corpus prompts."),
    click.option("--code-tokens", type=Number(int, 0, MAX_CODE_TOKENS), default=0, show_default=True,
                 help="Of them, this many tokens of Python source (this interpreter's standard library, "
                      "teacher-forced), taken from the corpus windows' share: what the code workload's 82 training "
                      "tasks lack (docs/eagle.md)."),
    click.option("--window", type=Number(int, 8, 4096), default=128, show_default=True,
                 help="Tokens per training window."))


def preflight_training(target_path, out, force: bool, tokens: int, aligned_tokens: int, sampled_from: str,
                       code_tokens: int, window: int):
    """(target folder, DataConfig) of a `train` command (heads, feature draft), its options
    checked before any model loads: the window within the target's positions, --out empty
    unless --force, enough tokens for the held-out windows."""
    from specdec.cli.outputs import check_creatable

    check_creatable(out, "--out", folder=True)
    path, limit = preflight_target(target_path, "training a drafter on the target's features")
    if limit is not None and window > limit:
        raise click.BadParameter(f"{window} tokens exceed the target's {limit} positions", param_hint="--window")
    folder = Path(out)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())) and not force:
        raise click.BadParameter(f"{out} already holds files; pass --force to replace them", param_hint="--out")
    aligned_tokens = min(aligned_tokens, tokens)
    if code_tokens > tokens - aligned_tokens:
        raise click.BadParameter(f"{code_tokens} exceeds --tokens minus --aligned-tokens ({tokens - aligned_tokens})",
                                 param_hint="--code-tokens")
    from specdec.reference.heads.build import DataConfig  # torch: after the options are checked

    try:
        return path, DataConfig(tokens=tokens, aligned_tokens=aligned_tokens, sampled_from=sampled_from,
                                code_tokens=code_tokens, window=window)
    except SpecdecError:
        raise click.BadParameter(f"needs at least {window * 17} tokens (16 held-out windows + 1)",
                                 param_hint="--tokens") from None


# ---- options ---------------------------------------------------------------------------
GAMMAS = NumberList(int, 1, MAX_DECODE_GAMMA, distinct=True, what="values")  # "1,2,4": distinct draft lengths
TEMPERATURES = NumberList(float, 0, distinct=True, what="temperatures")
LENIENCE = NumberList(float, 0, 1, low_open=True, what="lenience values")

target_option = click.option("--target", "target_path", type=ModelPath(), default=None,
                             help="Target model: a local Hugging Face causal LM folder (its tokenizer defines the "
                                  "token ids) or a .gguf file (dequantized once into the cache). Default: the "
                                  "embedded SmolLM2-135M-Instruct.")
device_option = click.option("--device", default="cpu", show_default=True, type=Device(), help="cpu, cuda or cuda:N")
model_options = stack(
    target_option,
    device_option,
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
    click.option("--temperature", type=Number(float, 0), default=0.0, show_default=True,
                 help="0 = greedy (argmax); > 0 samples from the tempered distribution."),
    click.option("--top-k", type=NONNEGATIVE, default=0, show_default=True,
                 help="Keep the k most likely tokens; 0 = off."),
    click.option("--top-p", type=UNIT_OPEN_LOW, default=1.0, show_default=True,
                 help="Keep the smallest set of tokens with this much mass, in (0, 1]; 1 = off."),
    click.option("--min-p", type=Number(float, 0, 1), default=0.0, show_default=True,
                 help="Keep the tokens at least this many times as likely as the most likely one, in [0, 1]; 0 = "
                      "off (llama-server's default sampler: --top-k 40 --top-p 0.95 --min-p 0.05)."),
)
drafter_option = click.option("--drafter", default="lookup", show_default=True, type=DrafterSpecType(),
                              help=f"Draft model: {SPEC_HELP}")
seed_option = click.option("--seed", type=Number(int, 0, MAX_SEED), default=0, show_default=True,
                           help="The one seed (0 .. 2^63 - 1): every random stream (a prompt's sampling, a decode, the "
                                "bootstrap) gets a seed derived from it.")
json_option = click.option("--json", "as_json", is_flag=True,
                           help="Print one JSON object on stdout (progress stays on stderr).")
prompts_file_option = click.option(
    "--prompts-file", type=PromptsFile(), default=None,
    help="Prompts instead of the held-out corpus: JSON lines (MT-bench / Spec-Bench {\"category\", \"turns\": [...]} "
         "or {\"prompt\", \"category\"}; newlines kept) or plain text, one prompt a line (docs/workloads.md).")
encoder_inputs_option = click.option(
    "--encoder-inputs", type=click.Path(dir_okay=False), default=None, metavar="FILE.npy|FILE.pt",
    help="Encoder-decoder targets whose encoder reads features (Whisper): precomputed inputs, one example [F, T] or "
         "a batch [N, F, T], one prompt each (docs/encoder-decoder.md).")
prompt_source_options = stack(
    prompts_file_option,
    encoder_inputs_option,
    click.option("--workload", "workloads", type=Workloads(), default=None, metavar="NAME[,NAME]|all",
                 help="Embedded workloads (code, summarize, rag, edit, chat, continue; default: continue, the held-out "
                      "corpus): per-category results."),
    click.option("--category", "categories", default=None, metavar="NAME[,NAME]",
                 help="Keep only these categories of the prompts."),
    click.option("--chat-template", type=click.Choice(["auto", "none"]), default="auto", show_default=True,
                 help="auto: apply the target tokenizer's chat template to user turns (JSON prompts, instruction "
                      "workloads) when it has one; none: never."),
    click.option("--max-prompt-tokens", type=POSITIVE, default=2048, show_default=True,
                 help="Longest prompt (template included); longer ones are refused, or cut with --truncate left."),
    click.option("--truncate", type=click.Choice(["refuse", "left"]), default="refuse", show_default=True,
                 help="left: cut an over-long prompt's user content from its start (the template and the "
                      "instruction at its end stay)."),
)
new_tokens_option = click.option("--new-tokens", "new_tokens", cls=Renamed, old=("--max-new-tokens",),
                                 type=POSITIVE, default=64, show_default=True,
                                 help="Most tokens to generate per prompt (the prompt plus these must fit the model's "
                                      "context).")
NEW_TOKENS_HINT = "'--new-tokens' / '--max-new-tokens'"  # how click names that option in its errors


# ---- before any model loads ----------------------------------------------------------
def preflight_target(target_path: str | None, causal_only: str | None = None) -> tuple[Path, int | None]:
    """The target folder (a .gguf file's converted folder, converting it on first use) and its
    position limit, checked before any other model loads: a missing config, weights or tokenizer
    (its tokenizer is loaded here), or a GGUF file that cannot be converted, is a usage error
    naming --target; so is an encoder-decoder where the command needs a causal LM (`causal_only`:
    what it does, for the message)."""
    from specdec.reference.model.gguf import model_folder
    from specdec.reference.model.model_files import check_model_folder, context_limit

    if target_path is None:
        from specdec.reference.data.default_model import default_target_path
        target_path = default_target_path()
    try:
        path = check_model_folder(model_folder(target_path))
        limit = context_limit(path)
    except (OSError, SpecdecError, json.JSONDecodeError, UnicodeDecodeError) as exc:  # a corrupt config.json too
        raise click.BadParameter(str(exc), param_hint="--target") from None
    if causal_only:
        from specdec.reference.model.model_files import require_causal
        try:
            require_causal(path, causal_only)
        except SpecdecError as exc:
            raise click.BadParameter(str(exc), param_hint="--target") from None
    try:  # whatever AutoTokenizer loads (a byte-level tokenizer needs no vocabulary file)
        target_tokenizer(path)
    except Exception as exc:  # transformers raises many types for a missing or broken tokenizer
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise click.BadParameter(f"cannot load the tokenizer in {str(path)!r}: {first}",
                                 param_hint="--target") from None
    return path, limit


def prompt_source(prompts_file, workloads, categories, chat_template, max_prompt_tokens, truncate,
                  prompt_tokens: int = 64, encoder_inputs=None):
    """The `PromptSource` of the prompt options (`prompt_source_options`)."""
    from specdec.reference.data.prompts import PromptSource

    if prompts_file is not None and workloads:
        raise click.BadParameter("give --prompts-file or --workload, not both", param_hint="--workload")
    if encoder_inputs is not None and (prompts_file is not None or workloads or categories):
        raise click.BadParameter("encoder inputs are the prompts: give them without --prompts-file, --workload or "
                                 "--category", param_hint="--encoder-inputs")
    names = None
    if categories is not None:
        names = tuple(c.strip() for c in categories.split(","))
        if not all(names):
            raise click.BadParameter(f"needs category names separated by commas, got {categories!r}",
                                     param_hint="--category")
    if prompts_file is not None and truncate == "refuse":
        _refuse_certainly_long(prompts_file, max_prompt_tokens)
    return PromptSource(file=Path(prompts_file) if prompts_file else None, workloads=workloads or (),
                        categories=names, chat_template=chat_template, prompt_tokens=prompt_tokens,
                        max_prompt_tokens=max_prompt_tokens, truncate=truncate,
                        encoder_inputs=Path(encoder_inputs) if encoder_inputs else None)


MAX_TOKEN_CHARS = 1024  # no vocabulary entry spells more characters (SmolLM2's longest: 81)


def _refuse_certainly_long(prompts_file, max_prompt_tokens: int) -> None:
    """A prompt too long for any tokenizer to fit in --max-prompt-tokens, refused from its length
    in characters before the tokenizer loads (the exact check, with the target's tokenizer,
    follows in `preflight_prompts`)."""
    from specdec.reference.data.prompt_sources import read_prompts_file

    for prompt in read_prompts_file(prompts_file):
        if len(prompt.text) > MAX_TOKEN_CHARS * max_prompt_tokens:
            raise click.BadParameter(f"prompt {prompt.name} has {len(prompt.text):,} characters, more than "
                                     f"{max_prompt_tokens} tokens can hold (raise it, or cut long prompts from the "
                                     "start with --truncate left)", param_hint="--max-prompt-tokens")


def preflight_prompts(path: Path, n: int, source):
    """The prompts read and encoded with the target's tokenizer alone, before any model loads:
    a bad file, an unknown category or an over-long prompt is a usage error naming its option."""
    from specdec.reference.data.corpus import load_tokenizer
    from specdec.reference.data.prompt_sources import read_prompts_file, select_categories
    from specdec.reference.data.prompts import encode_prompts

    features = preflight_encoder_inputs(path, source.encoder_inputs)
    if features is not None:
        return features
    try:
        prompts = read_prompts_file(source.file) if source.file is not None else None
    except SpecdecError as exc:
        raise click.BadParameter(str(exc), param_hint="--prompts-file") from None
    try:
        if prompts is not None:
            select_categories(prompts, source.categories)
        chosen = source.prompts(n, path)
    except SpecdecError as exc:
        raise click.BadParameter(str(exc), param_hint="--category" if source.categories else "--workload") from None
    except FileNotFoundError as exc:
        raise click.BadParameter(str(exc), param_hint="--workload") from None
    try:
        return encode_prompts(load_tokenizer(path), chosen, source)
    except SpecdecError as exc:
        raise click.BadParameter(str(exc), param_hint="--max-prompt-tokens") from None


def check_drafter_kinds(path: Path, specs, option: str = "--drafter") -> None:
    """Each drafter spec fits the target's kind of model (causal or encoder-decoder), from the
    config files alone: a usage error naming `option` otherwise."""
    from specdec.reference.drafters.factory import check_kind
    from specdec.reference.drafters.spec import DrafterSpec

    for spec in specs:
        try:
            check_kind(DrafterSpec.parse(spec), path)
        except SpecdecError as exc:
            raise click.BadParameter(str(exc), param_hint=option) from None


def preflight_encoder_inputs(path: Path, encoder_inputs: Path | None):
    """For an encoder-decoder target, the kind of prompt its encoder takes, checked before any
    model loads: --encoder-inputs read and matched to the config (returned as a `PromptSet`, the
    decoder starting from its start token), or None for text prompts. Usage errors name
    --encoder-inputs (given to a causal or text target, missing for a feature encoder, unreadable)."""
    from specdec.reference.data.encoder_inputs import preflight_feature_prompts, reads_features

    try:
        features_in = reads_features(path)
    except SpecdecError as exc:
        raise click.BadParameter(str(exc), param_hint="--target") from None
    try:
        return preflight_feature_prompts(path, encoder_inputs, features_in)
    except SpecdecError as exc:
        raise click.BadParameter(str(exc), param_hint="--encoder-inputs") from None


@functools.lru_cache(maxsize=4)
def target_tokenizer(path: Path):
    """The target folder's tokenizer, loaded once per command (preflight and prompts share it)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.model_max_length = 1 << 40  # an over-long prompt is refused by check_context, not warned about
    return tokenizer


def prompt_ids(path: Path, text: str) -> tuple[list[int], int]:
    """`--prompt`'s ids with the target's tokenizer alone (before any model loads), and the
    positions its decoder's prompt takes (`specdec.reference.data.encoder_inputs.text_ids`):
    an empty encoding is a usage error."""
    from specdec.reference.data.encoder_inputs import text_ids

    ids, positions = text_ids(path, target_tokenizer(path), text)
    if not ids:
        raise click.BadParameter("the prompt encodes to no tokens", param_hint="--prompt")
    return ids, positions


def check_context(limit: int | None, tokens: int, what: str, option: str) -> None:
    """A usage error when `tokens` positions exceed the model's limit."""
    if limit is not None and tokens > limit:
        raise click.BadParameter(f"{what} needs {tokens} positions, more than the model's {limit}",
                                 param_hint=option)


def generator(device, seed: int):
    """A torch.Generator on `device` seeded with `seed`: the one seeding point of a command."""
    import torch

    return torch.Generator(device=device).manual_seed(seed)
