"""`specdec heads train` end to end: training text -> self-distillation data -> heads -> card.

The text is the target's own sampled answers to the embedded workloads' training prompts (code,
summarize, rag, edit, chat, in its chat template: the traffic the heads serve; or, with
sampled_from="corpus", its plain continuations of corpus prompts, the aligned corpus the n-gram
drafters share), both generated once and cached, plus training-split corpus windows and, if
asked, windows of Python source (the interpreter's standard library) the target scores; all
are teacher-forced once through the target. Held out: whole windows of the
target's own text (what decoding sees). Choices and what they cost: docs/heads.md.
"""
from __future__ import annotations

import collections
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from specdec.errors import SpecdecError
from specdec.reference.model.models import LoadedModel
from specdec.reference.data.aligned_corpus import PROMPT_KINDS
from specdec.reference.core.progress import phase
from specdec.reference.heads.data import Distillation, distill, frequent_vocab, tail_windows, windows
from specdec.reference.heads.store import heads_on, save_heads, weights_fingerprint
from specdec.reference.heads.train import TrainConfig, evaluate, train_heads


@dataclass(frozen=True)
class DataConfig:
    """tokens: teacher-forced tokens in all; aligned_tokens: of them, the target's own samples
    (0: corpus text only); sampled_from: what the target answered ("workloads": the workloads'
    training prompts, each window the answer's last `window` tokens with the prompt's tail before
    it; "corpus": corpus prompts, windows cut from the continuations); code_tokens: of them,
    Python source (`specdec.reference.data.python_source`), the rest corpus prose; window:
    tokens per window; held_out: windows held out."""

    tokens: int = 49_152
    aligned_tokens: int = 16_000
    sampled_from: str = "workloads"
    code_tokens: int = 0
    window: int = 128
    held_out: int = 16
    top_k: int = 16

    def __post_init__(self) -> None:
        if self.window < 8 or self.tokens < self.window * (self.held_out + 1) or self.aligned_tokens < 0 \
                or not 0 <= self.code_tokens <= self.tokens - self.aligned_tokens or self.held_out < 1 \
                or self.top_k < 1 or self.sampled_from not in PROMPT_KINDS:
            raise SpecdecError(f"need window >= 8, tokens >= window * (held_out + 1), aligned_tokens >= 0, "
                               f"0 <= code_tokens <= tokens - aligned_tokens, "
                               f"held_out >= 1, top_k >= 1, sampled_from in {PROMPT_KINDS}: {self}")


def training_windows(target: LoadedModel, config: DataConfig, progress: bool
                     ) -> tuple[list[list[int]], list[tuple[int, ...] | None], list[list[int]], dict[str, Any]]:
    """(target-sampled windows, the prompt each answers (None: corpus prompts), corpus windows,
    what was used)."""
    from specdec.reference.data.aligned_corpus import AlignedConfig, generate_aligned
    from specdec.reference.data.corpus import train_prompts
    from specdec.reference.data.python_source import python_windows

    sampled: list[list[int]] = []
    asked: list[tuple[int, ...] | None] = []
    meta: dict[str, Any] = {}
    if config.aligned_tokens > 0:
        corpus = generate_aligned(target.path, AlignedConfig(tokens=config.aligned_tokens,
                                                             prompts=config.sampled_from), progress=progress)
        lines, prompts = corpus.lines(), corpus.prompt_lines()
        if prompts is None:
            sampled = windows(lines, config.window)[: config.aligned_tokens // config.window]
            asked = [None] * len(sampled)
        else:  # each answer after its prompt, so the window's hidden states see the request
            answered = [(p, c, p + a) for p, a, c in zip(prompts, lines, corpus.meta["line_categories"])
                        if len(p) + len(a) >= config.window]
            sampled = tail_windows([seq for _, _, seq in answered], config.window)
            asked = [tuple(p) for p, _, _ in answered]
            meta["sampled_by_workload"] = dict(collections.Counter(c for _, c, _ in answered))
        meta["aligned_corpus"] = str(corpus.path)
    n_code = config.code_tokens // config.window
    n_corpus = max(0, config.tokens // config.window - len(sampled) - n_code)
    scored = train_prompts(n_corpus, config.window, tokenizer_dir=target.path) if n_corpus else []
    meta.update(sampled_windows=len(sampled), corpus_windows=len(scored), window=config.window)
    if n_code:  # after the prose, so held-out corpus windows stay prose
        code, about = python_windows(n_code, config.window, tokenizer_dir=target.path)
        scored += code
        meta.update(code_windows=len(code), **about)
    return sampled, asked, scored, meta


def split_held_out(sampled: list[list[int]], asked: list[tuple[int, ...] | None], scored: list[list[int]],
                   held_out: int) -> tuple[list[list[int]], list[list[int]], int]:
    """(held-out windows, training windows, answers left out): the first `held_out` of the
    target's samples when there are more, else of the corpus windows; the other answers to a
    held-out window's prompt (a prompt asked again) are neither held out nor trained on."""
    if len(sampled) <= held_out:
        return scored[:held_out], scored[held_out:] + sampled, 0
    held_prompts = {a for a in asked[:held_out] if a is not None}  # so a corpus prompt (None) is never left out
    rest = [w for w, a in zip(sampled[held_out:], asked[held_out:]) if a not in held_prompts]
    return sampled[:held_out], rest + scored, len(sampled) - held_out - len(rest)


def distillation_data(target: LoadedModel, fingerprint: str, config: DataConfig, progress: bool = False,
                      layer_ids: Sequence[int] = ()
                      ) -> tuple[Distillation, Distillation, dict[str, Any], dict[str, float]]:
    """(train, held-out, what was used, seconds by stage): the target's passes over the training
    windows, cached by the target's weights and the data configuration (the heads and the
    feature draft train on the same passes; a second build reads them back). layer_ids: hidden
    states after these decoder layers are kept too; a cache without all of them is redone with
    the union of its layers and these."""
    import hashlib
    import json

    from specdec.paths import cache_dir, writing

    # "split": 2, held-out answers' prompts kept out of training (`split_held_out`), not in older caches;
    # Python source differs between Python versions
    marks = {"split": 2, **({"python": platform.python_version()} if config.code_tokens else {})}
    key = hashlib.sha256(json.dumps([fingerprint, asdict(config), marks], sort_keys=True).encode()).hexdigest()[:16]
    cached = cache_dir() / "distill" / f"{target.path.name}-{key}.pt"
    start = time.perf_counter()
    stored: tuple[int, ...] = ()
    if cached.is_file():
        saved = torch.load(cached, weights_only=True)
        stored = tuple(saved.get("layer_ids", ()))
        if set(layer_ids) <= set(stored):
            phase(f"reading the target's passes over the training text ({cached})", progress)
            held, train = (Distillation(*saved[part], layer_ids=stored).with_layers(layer_ids)
                           for part in ("held", "train"))
            return train, held, json.loads(saved["sources"]), {"text": 0.0, "distill": time.perf_counter() - start}
    every = tuple(sorted({*stored, *layer_ids}))
    sampled, asked, scored, sources = training_windows(target, config, progress)
    seconds = {"text": time.perf_counter() - start}
    held_windows, train_windows, left_out = split_held_out(sampled, asked, scored, config.held_out)
    sources["left_out_beside_held_out"] = left_out
    if not train_windows:
        raise SpecdecError("no training windows left after holding some out: raise --tokens")
    lap = time.perf_counter()
    data = distill(target.model, held_windows + train_windows, config.top_k, progress=progress, layer_ids=every)
    held = data.select(torch.arange(len(held_windows)))
    train = data.select(torch.arange(len(held_windows), data.n_windows))
    seconds["distill"] = time.perf_counter() - lap
    sources["held_out_from"] = "target samples" if len(sampled) > config.held_out else "corpus"
    cached.parent.mkdir(parents=True, exist_ok=True)
    fields = ("tokens", "hidden", "top_ids", "top_probs", "layers")
    with writing(cached) as tmp:
        torch.save({"held": [getattr(held, f) for f in fields], "train": [getattr(train, f) for f in fields],
                    "layer_ids": list(every), "sources": json.dumps(sources)}, tmp)
    return train.with_layers(layer_ids), held.with_layers(layer_ids), sources, seconds


def build_heads(target: LoadedModel, out: str | Path, data_config: DataConfig = DataConfig(),
                train_config: TrainConfig = TrainConfig(), force: bool = False, progress: bool = False
                ) -> dict[str, Any]:
    """Train heads for `target` and save them with their card in `out`; returns the card."""
    start = time.perf_counter()
    fingerprint, train, held, vocab, about, seconds = trainee_data(target, data_config, train_config.vocab, progress)
    torch.manual_seed(train_config.seed)
    heads = heads_on(target.model, vocab, train_config.n_heads)
    lap = time.perf_counter()
    log = train_heads(heads, train, train_config, progress=progress)
    seconds["train"] = time.perf_counter() - lap
    held_out = evaluate(heads, held)
    seconds["total"] = time.perf_counter() - start
    card = {"n_heads": heads.n_heads, **about(heads.hidden_size, heads.weight.device),
            "training": {**train_config.to_dict(), **log}, "held_out": held_out,
            "seconds": {k: round(v, 1) for k, v in seconds.items()}}
    save_heads(heads, card, out, force=force)
    return card


def trainee_data(target: LoadedModel, data_config: DataConfig, vocab_size: int, progress: bool = False,
                 layer_ids: Sequence[int] = ()):
    """What a drafter trained on the target (heads, feature draft) starts from: (the target's
    weight hash, train, held-out (with the hidden states after `layer_ids`), the restricted
    vocabulary (its `vocab_size` most probable ids and EOS), about(hidden_size, device) -> the
    card's shared fields, seconds by stage)."""
    phase("hashing the target's weights", progress)
    fingerprint = weights_fingerprint(target.path)
    train, held, sources, seconds = distillation_data(target, fingerprint, data_config, progress, layer_ids)
    eos = target.tokenizer.eos_token_id
    vocab = frequent_vocab(train, vocab_size, always=[] if eos is None else [eos])

    def about(hidden_size: int, device: torch.device) -> dict[str, Any]:
        return {"target": {"name": target.path.name, "path": str(target.path), "weights_sha256": fingerprint,
                           "hidden_size": hidden_size, "vocab_size": int(target.vocab_size)},
                "vocab": int(vocab.numel()), "vocab_coverage_held_out": coverage(held, vocab),
                "data": {**asdict(data_config), **sources, "train_tokens": int(train.tokens.numel())},
                "machine": {"device": str(device), "torch": torch.__version__, "threads": torch.get_num_threads(),
                            "platform": platform.platform()}}

    return fingerprint, train, held, vocab, about, seconds


def coverage(data: Distillation, vocab: torch.Tensor) -> float:
    """Fraction of positions whose target argmax is inside the heads' vocabulary."""
    return float(torch.isin(data.top_ids[..., 0].long(), vocab.cpu()).float().mean())
