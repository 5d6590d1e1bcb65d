"""The target-aligned corpus: the target's own continuations of training-split prompts, as
token-id lines for lmplz (generated once, batched, cached by its parameters) — of the plain
corpus's prompts, or of the embedded workloads' training prompts in the target's chat template
(the target's own answers to code, summarize, rag, edit and chat requests; the prompts are kept
line by line beside them). Why and how: docs/ngram.md, docs/heads.md.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from specdec.errors import SpecdecError
from specdec.paths import write_atomic
from specdec.reference.data.corpus import CORPUS_VERSION, corpus_root, tokenizer_tag, train_prompts


PROMPT_KINDS = ("corpus", "workloads")
# Workload prompts longer than this are skipped: a batch is padded to its longest prompt, and one
# 3,700-token passage made a batch of 16 take 400 s instead of ~60 s.
LONGEST_ANSWERED = 1024


@dataclass(frozen=True)
class AlignedConfig:
    """How the aligned corpus is generated.

    tokens: stop once this many continuation tokens are collected (whole batches); with workload
        prompts, answer enough prompts for about this many (every one asked is answered).
    prompt_tokens: length of each training-split prompt.
    max_new_tokens: longest continuation per prompt.
    batch_size: prompts per `generate` call (2 CPU cores: 16 keeps both busy).
    temperature: 1.0 samples from p; 0 is greedy.
    seed: seeds torch's global generator once before generating.
    prompts: "corpus" (prompt_tokens-long training chunks, continued as plain text) or "workloads"
        (the workloads' training prompts, `workloads.training_prompts`, answered in the chat template).
    """

    tokens: int = 50_000
    prompt_tokens: int = 64
    max_new_tokens: int = 128
    batch_size: int = 16
    temperature: float = 1.0
    seed: int = 0
    prompts: str = "corpus"

    def __post_init__(self) -> None:
        if self.prompts not in PROMPT_KINDS:
            raise SpecdecError(f"aligned prompts must be one of {', '.join(PROMPT_KINDS)}, got {self.prompts!r}")
        if min(self.tokens, self.prompt_tokens, self.max_new_tokens, self.batch_size) < 1:
            raise SpecdecError(f"aligned corpus sizes must be >= 1: {self}")
        if self.temperature < 0:
            raise SpecdecError(f"temperature must be >= 0, got {self.temperature}")


@dataclass(frozen=True)
class AlignedCorpus:
    """The cached corpus: `path` holds one continuation of token ids a line; with workload
    prompts, `prompts_path` the prompt each continues, line for line."""

    path: Path
    meta: dict

    @property
    def prompts_path(self) -> Path | None:
        path = self.path.with_name("prompts.txt")
        return path if path.is_file() else None

    def lines(self) -> list[list[int]]:
        """The continuations, one list of token ids each."""
        return _id_lines(self.path)

    def prompt_lines(self) -> list[list[int]] | None:
        """The prompt of each continuation (workload prompts), or None (corpus prompts: not kept)."""
        return None if self.prompts_path is None else _id_lines(self.prompts_path)


def _id_lines(path: Path) -> list[list[int]]:
    return [[int(t) for t in line.split()] for line in path.read_text().splitlines()]


def aligned_dir(config: AlignedConfig, model_dir: str | os.PathLike, cache_dir: Path | None = None) -> Path:
    """Cache folder for a config and target: parameters hashed into the name (cache_dir: the
    corpus folder, default `specdec.paths.corpus_dir()`)."""
    params = {k: v for k, v in asdict(config).items() if not (k == "prompts" and v == "corpus")}  # keys of old caches
    if config.prompts == "workloads":
        params["cycled"] = True  # workloads with a small training split are asked again (`training_prompts`)
    key = json.dumps({"config": params, "model": Path(model_dir).name, "corpus": CORPUS_VERSION},
                     sort_keys=True)
    return corpus_root(cache_dir) / "aligned" / tokenizer_tag(model_dir) / hashlib.sha1(key.encode()).hexdigest()[:12]


def generate_aligned(model_dir: str | os.PathLike, config: AlignedConfig = AlignedConfig(),
                     cache_dir: Path | None = None, progress: bool = False,
                     threads: int | None = None) -> AlignedCorpus:
    """Return the aligned corpus for (target, config), generating it on first use.

    threads: torch CPU threads for generation (None: torch's default). On a loaded 2-core
        machine 1 thread is much faster than 2 (threads spin against other processes).

    Raises:
        FileNotFoundError: the target folder is missing.
    """
    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise FileNotFoundError(f"no target model in {model_dir} (run `bash scripts/setup.sh`)")
    folder = aligned_dir(config, model_dir, cache_dir)
    path, meta_path = folder / "aligned.txt", folder / "meta.json"
    if path.is_file() and meta_path.is_file():
        return AlignedCorpus(path, json.loads(meta_path.read_text()))

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # progress is this function's own lines
    if threads is not None:
        torch.set_num_threads(threads)

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    eos_ids = model.generation_config.eos_token_id
    eos_ids = set(eos_ids if isinstance(eos_ids, list) else [eos_ids]) - {None}
    if tokenizer.eos_token_id is not None:
        eos_ids.add(tokenizer.eos_token_id)
    # enough prompts even if every continuation stopped at a quarter of max_new_tokens
    n_prompts = 4 * math.ceil(config.tokens / config.max_new_tokens) + config.batch_size
    prompts, categories = _prompts(config, n_prompts, tokenizer, model_dir, cache_dir)
    torch.manual_seed(config.seed)  # HF generate samples from the global generator
    sample = config.temperature > 0
    lines: list[list[int]] = []
    kept: list[int] = []  # the prompt index of each line
    collected = generated = stopped_at_eos = used = 0
    start = time.perf_counter()
    for b in range(0, len(prompts), config.batch_size):
        if collected >= config.tokens and categories is None:  # workload prompts: all of them (shortest first)
            break
        batch = tokenizer.pad({"input_ids": prompts[b:b + config.batch_size]}, return_tensors="pt")
        with torch.inference_mode():
            out = model.generate(
                **batch, max_new_tokens=config.max_new_tokens, do_sample=sample,
                temperature=config.temperature if sample else None, top_k=0 if sample else None,
                top_p=1.0 if sample else None, repetition_penalty=1.0,
                pad_token_id=tokenizer.pad_token_id, eos_token_id=sorted(eos_ids))
        new = out[:, batch["input_ids"].shape[1]:].tolist()
        used += len(new)
        for i, row in enumerate(new, b):
            cut = next((j for j, t in enumerate(row) if t in eos_ids), None)
            stopped_at_eos += cut is not None
            row = row[:cut] if cut is not None else row
            generated += len(row) + (cut is not None)
            if row:
                lines.append(row)
                kept.append(i)
                collected += len(row)
        if progress:
            rate = generated / (time.perf_counter() - start)
            print(f"[aligned] {collected}/{config.tokens} tokens, {rate:.1f} tokens/s", flush=True)
    seconds = time.perf_counter() - start
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(path, "".join(" ".join(map(str, row)) + "\n" for row in lines))
    if config.prompts == "workloads":
        write_atomic(folder / "prompts.txt", "".join(" ".join(map(str, prompts[i])) + "\n" for i in kept))
    meta = {"config": asdict(config), "model": str(model_dir), "lines": len(lines), "tokens": collected,
            "line_categories": None if categories is None else [categories[i] for i in kept],
            "generated_tokens": generated, "stopped_at_eos": stopped_at_eos,
            "prompts_used": used, "seconds": round(seconds, 1),
            "tokens_per_second": round(generated / seconds, 1) if seconds else None,
            "torch_threads": torch.get_num_threads(), "eos_ids": sorted(eos_ids)}
    write_atomic(meta_path, json.dumps(meta, indent=2) + "\n")
    return AlignedCorpus(path, meta)


def _prompts(config: AlignedConfig, n: int, tokenizer, model_dir: Path, cache_dir: Path | None
             ) -> tuple[list[list[int]], list[str] | None]:
    """(prompt ids, their workloads or None): n corpus prompts; or, in the chat template and
    shortest first (a batch is padded to its longest prompt, so similar lengths batch cheaply),
    enough workload prompts for config.tokens (every workload's training split, the same count
    of each, a workload with a small split asked again when the target samples; `training_prompts`)."""
    if config.prompts == "corpus":
        return train_prompts(n, config.prompt_tokens, tokenizer_dir=model_dir, cache_dir=cache_dir), None
    from specdec.reference.data.prompts import encode_prompt
    from specdec.reference.data.workloads import TRAINED_ON, training_prompts

    wanted = math.ceil(1.15 * config.tokens / config.max_new_tokens)  # some answers stop early
    chosen = training_prompts(math.ceil(wanted / len(TRAINED_ON)), cycle=config.temperature > 0)
    encoded = [(encode_prompt(tokenizer, p, "auto", 1 << 20, "refuse")[0], p.category) for p in chosen]
    kept = sorted(((ids, category) for ids, category in encoded if len(ids) <= LONGEST_ANSWERED),
                  key=lambda pair: len(pair[0]))
    return [ids for ids, _ in kept], [category for _, category in kept]
