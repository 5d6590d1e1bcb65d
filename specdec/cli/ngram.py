"""`specdec ngram`: build KenLM n-gram drafters over the target's token ids.

    specdec ngram corpus                     normalise + tokenize the plain corpus, print stats
    specdec ngram aligned [--tokens N]       generate the target-aligned corpus (cached)
    specdec ngram build --order N --out DIR [--corpus plain|aligned|mixed]

Each command is thin: parse, call `ngram` / `specdec.reference.data.aligned_corpus`, print text or JSON.
"""
from __future__ import annotations

import re
from pathlib import Path

import click

from specdec.cli.common import MAX_SEED, json_option, preflight_target, stack, target_option
from specdec.cli.outputs import check_creatable
from specdec.cli.types import NONNEGATIVE, POSITIVE, Number, Renamed
from specdec.paths import writing
from specdec.strict_json import to_json

CORPORA = ("plain", "aligned", "mixed")


def _target_dir(target: str | None) -> Path:
    """The target folder whose tokenizer defines the token ids (default: embedded SmolLM2; a .gguf
    file's converted folder), checked as every command checks it (`preflight_target`)."""
    return preflight_target(target)[0]


def _aligned_config(tokens: int, new_tokens: int, batch_size: int, temperature: float, seed: int):
    from specdec.reference.data.aligned_corpus import AlignedConfig
    return AlignedConfig(tokens=tokens, max_new_tokens=new_tokens, batch_size=batch_size,
                         temperature=temperature, seed=seed)


aligned_options = stack(
    click.option("--aligned-tokens", "tokens", type=POSITIVE, default=50_000, show_default=True,
                 help="Continuation tokens to generate for the aligned corpus."),
    click.option("--new-tokens", "new_tokens", cls=Renamed, old=("--max-new-tokens",), type=POSITIVE, default=128,
                 show_default=True, help="Longest continuation per training prompt."),
    click.option("--batch-size", type=POSITIVE, default=16, show_default=True,
                 help="Prompts generated together in one batch."),
    click.option("--aligned-temperature", "temperature", type=Number(float, 0), default=1.0, show_default=True,
                 help="1 samples from the target (q ~ p); 0 is greedy (BiLD)."),
    click.option("--seed", type=Number(int, 0, MAX_SEED), default=0, show_default=True,
                 help="Seeds torch once before generating the aligned corpus."),
    click.option("--threads", type=POSITIVE, default=None,
                 help="torch CPU threads for generation (default: torch's choice)."),
)




@click.group()
def ngram() -> None:
    """Build KenLM n-gram drafters (c ~ 0) over the target's token ids."""


@ngram.command()
@target_option
@json_option
def corpus(target_path, as_json):
    """Normalise and tokenize Shakespeare + Austen (cached); print the corpus statistics."""
    from specdec.reference.data.corpus import prepare_corpus

    result = prepare_corpus(_target_dir(target_path))
    report = {"train": str(result.train), "heldout": str(result.heldout), **result.meta}
    _emit(report, as_json)


@ngram.command()
@target_option
@aligned_options
@json_option
def aligned(target_path, tokens, new_tokens, batch_size, temperature, seed, threads, as_json):
    """Generate (once) the target-aligned corpus: the target's own continuations of
    training-split prompts."""
    from specdec.reference.data.aligned_corpus import generate_aligned

    config = _aligned_config(tokens, new_tokens, batch_size, temperature, seed)
    result = generate_aligned(_target_dir(target_path), config, progress=not as_json, threads=threads)
    _emit({"path": str(result.path), **result.meta}, as_json)


@ngram.command()
@click.option("--order", type=Number(int, 1, 5), required=True, help="n-gram order, 1 to 5.")
@click.option("--corpus", "corpus_name", type=click.Choice(CORPORA), default="plain", show_default=True,
              help="plain: Shakespeare + Austen; aligned: the target's own continuations; "
                   "mixed: both.")
@click.option("--text", "text_path", type=click.Path(dir_okay=False), default=None,
              help="Train on this file of token-id lines instead of --corpus "
                   "(needs --vocab-size; no tokenizer is loaded).")
@click.option("--vocab-size", type=POSITIVE, default=None, help="Target vocabulary size (with --text).")
@click.option("--eos-id", type=NONNEGATIVE, default=None,
              help="Target EOS id that </s> stands for (with --text), in 0 .. vocab-size - 1.")
@click.option("--out", type=click.Path(file_okay=False), required=True,
              help="Output folder (model.arpa, model.binary, tables, model.json); built beside it and renamed "
                   "into place when complete.")
@click.option("--force", is_flag=True, help="Replace a model already in --out (otherwise an error).")
@click.option("--memory", default="10%", show_default=True, callback=lambda ctx, param, value: _memory(value),
              help="lmplz -S memory bound: a whole number with a suffix, 1..100% of physical memory or b, K (the "
                   "default), M, G, T.")
@click.option("--discount-fallback/--no-discount-fallback", default=None,
              help="Force lmplz --discount_fallback on/off (default: only if lmplz needs it).")
@click.option("--kenlm-bin", type=click.Path(file_okay=False), default=None,
              help="Folder of lmplz/build_binary (default: $SPECDEC_KENLM_BIN or the cache's kenlm/bin).")
@target_option
@aligned_options
@json_option
def build(order, corpus_name, text_path, vocab_size, eos_id, out, force, memory, discount_fallback, kenlm_bin,
          target_path, tokens, new_tokens, batch_size, temperature, seed, threads, as_json):
    """Estimate an order-N model with lmplz, binarize it, and cache its query tables."""
    from specdec.ngram.build import build_model
    from specdec.reference.data.corpus import prepare_corpus

    folder = Path(out)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())) and not force:
        raise click.BadParameter(f"{out} already holds files; pass --force to replace them", param_hint="--out")
    check_creatable(out, "--out", folder=True)
    if text_path is not None:
        if vocab_size is None:
            raise click.BadParameter("--text needs --vocab-size", param_hint="--vocab-size")
        if eos_id is not None and eos_id >= vocab_size:
            raise click.BadParameter(f"must be below --vocab-size {vocab_size}, got {eos_id}", param_hint="--eos-id")
        from specdec.errors import SpecdecError
        from specdec.ngram.build import check_text

        try:  # the file's problems are the option's: status 2, before anything is built
            check_text(text_path, vocab_size)
        except (SpecdecError, FileNotFoundError) as exc:
            raise click.BadParameter(str(exc), param_hint="--text") from None
        report = build_model(text_path, order, out, vocab_size=vocab_size, eos_id=eos_id, memory=memory,
                             discount_fallback=discount_fallback, bin_dir=kenlm_bin,
                             extra={"corpus": "text", "text": str(text_path)}, force=force)
        return _print_build(report, "text", Path(text_path), as_json)
    target_dir = _target_dir(target_path)
    plain = prepare_corpus(target_dir)
    extra: dict = {"corpus": corpus_name, "tokenizer": str(target_dir)}
    if corpus_name == "plain":
        text = plain.train
    else:
        from specdec.reference.data.aligned_corpus import generate_aligned

        config = _aligned_config(tokens, new_tokens, batch_size, temperature, seed)
        aligned_corpus = generate_aligned(target_dir, config, progress=not as_json, threads=threads)
        extra["aligned"] = {"path": str(aligned_corpus.path), **aligned_corpus.meta}
        text = aligned_corpus.path
        if corpus_name == "mixed":
            text = _concatenate([plain.train, aligned_corpus.path], aligned_corpus.path.with_name("mixed.txt"))
    report = build_model(text, order, out, vocab_size=plain.meta["vocab_size"], eos_id=plain.meta["eos_id"],
                         memory=memory, discount_fallback=discount_fallback, bin_dir=kenlm_bin, extra=extra,
                         force=force)
    _print_build(report, corpus_name, text, as_json)


def _memory(value: str) -> str:
    """lmplz's -S size as lmplz parses it (util/usage.cc ParseSize: an integer, one suffix of
    %bKMGTPEZY, K by default; a decimal point is refused there too), checked before anything runs."""
    m = re.fullmatch(r"([1-9][0-9]{0,12})([%bkKMGTPEZY]?)", value.strip())
    if m is None or (m.group(2) == "%" and int(m.group(1)) > 100):
        raise click.BadParameter(f"{value!r} is not a memory size: a whole number with one suffix, e.g. 10%, 500M, "
                                 "2G (percent at most 100)", param_hint="--memory")
    return value.strip()


def _print_build(report, corpus_name: str, text: Path, as_json: bool) -> None:
    result = report.to_json()
    result["training_text"] = str(text)
    order, out = report.order, report.out
    if as_json:
        click.echo(to_json(result))
        return
    click.echo(f"built order-{order} n-gram model ({corpus_name} corpus) in {out}")
    click.echo(f"  training: {report.training_tokens:,} tokens in {report.training_lines:,} lines ({text})")
    click.echo("  n-grams: " + ", ".join(f"{k + 1}-grams {n:,}" for k, n in enumerate(report.counts)))
    click.echo(f"  sizes: ARPA {_mb(report.arpa_bytes)}, binary {_mb(report.binary_bytes)}, "
               f"tables {_mb(report.tables_bytes)}")
    click.echo(f"  time: lmplz {report.lmplz_seconds:.2f} s, build_binary {report.build_binary_seconds:.2f} s, "
               f"tables {report.tables_seconds:.2f} s"
               + (" (lmplz needed --discount_fallback)" if report.discount_fallback else ""))


def _concatenate(parts: list[Path], dest: Path) -> Path:
    """Write the files `parts` one after another into dest (atomic); reused if up to date."""
    if dest.is_file() and all(dest.stat().st_mtime >= p.stat().st_mtime for p in parts):
        return dest
    with writing(dest) as tmp, open(tmp, "wb") as out:
        for part in parts:
            out.write(Path(part).read_bytes())
    return dest


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def _emit(report: dict, as_json: bool) -> None:
    if as_json:
        click.echo(to_json(report))
        return
    for key, value in report.items():
        click.echo(f"{key}: {value}")
