"""The target-aligned corpus: the target's own continuations of training-split prompts, as
token-id lines for lmplz (generated once, batched, cached by its parameters). Why and how:
docs/ngram.md.
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


@dataclass(frozen=True)
class AlignedConfig:
    """How the aligned corpus is generated.

    tokens: stop once this many continuation tokens are collected (whole batches).
    prompt_tokens: length of each training-split prompt.
    max_new_tokens: longest continuation per prompt.
    batch_size: prompts per `generate` call (2 CPU cores: 16 keeps both busy).
    temperature: 1.0 samples from p; 0 is greedy.
    seed: seeds torch's global generator once before generating.
    """

    tokens: int = 50_000
    prompt_tokens: int = 64
    max_new_tokens: int = 128
    batch_size: int = 16
    temperature: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if min(self.tokens, self.prompt_tokens, self.max_new_tokens, self.batch_size) < 1:
            raise SpecdecError(f"aligned corpus sizes must be >= 1: {self}")
        if self.temperature < 0:
            raise SpecdecError(f"temperature must be >= 0, got {self.temperature}")


@dataclass(frozen=True)
class AlignedCorpus:
    """The cached corpus: `path` holds one continuation of token ids a line."""

    path: Path
    meta: dict


def aligned_dir(config: AlignedConfig, model_dir: str | os.PathLike, cache_dir: Path | None = None) -> Path:
    """Cache folder for a config and target: parameters hashed into the name (cache_dir: the
    corpus folder, default `specdec.paths.corpus_dir()`)."""
    key = json.dumps({"config": asdict(config), "model": Path(model_dir).name, "corpus": CORPUS_VERSION},
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
    prompts = train_prompts(n_prompts, config.prompt_tokens, tokenizer_dir=model_dir, cache_dir=cache_dir)
    torch.manual_seed(config.seed)  # HF generate samples from the global generator
    sample = config.temperature > 0
    lines: list[list[int]] = []
    collected = generated = stopped_at_eos = used = 0
    start = time.perf_counter()
    for b in range(0, len(prompts), config.batch_size):
        if collected >= config.tokens:
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
        for row in new:
            cut = next((i for i, t in enumerate(row) if t in eos_ids), None)
            stopped_at_eos += cut is not None
            row = row[:cut] if cut is not None else row
            generated += len(row) + (cut is not None)
            if row:
                lines.append(row)
                collected += len(row)
        if progress:
            rate = generated / (time.perf_counter() - start)
            print(f"[aligned] {collected}/{config.tokens} tokens, {rate:.1f} tokens/s", flush=True)
    seconds = time.perf_counter() - start
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(path, "".join(" ".join(map(str, row)) + "\n" for row in lines))
    meta = {"config": asdict(config), "model": str(model_dir), "lines": len(lines), "tokens": collected,
            "generated_tokens": generated, "stopped_at_eos": stopped_at_eos,
            "prompts_used": used, "seconds": round(seconds, 1),
            "tokens_per_second": round(generated / seconds, 1) if seconds else None,
            "torch_threads": torch.get_num_threads(), "eos_ids": sorted(eos_ids)}
    write_atomic(meta_path, json.dumps(meta, indent=2) + "\n")
    return AlignedCorpus(path, meta)
