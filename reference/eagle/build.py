"""`specdec eagle train` end to end: the heads' training text and target passes (shared and
cached: `specdec.reference.heads.build.distillation_data`) -> the feature draft -> card."""
from __future__ import annotations

import platform
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from specdec.reference.core.models import LoadedModel
from specdec.reference.core.progress import phase
from specdec.reference.eagle.model import draft_on
from specdec.reference.eagle.store import save_eagle
from specdec.reference.eagle.train import EagleTrainConfig, evaluate, train_eagle
from specdec.reference.heads.build import DataConfig, coverage, distillation_data
from specdec.reference.heads.data import frequent_vocab
from specdec.reference.heads.store import weights_fingerprint

EVAL_DEPTH = 6  # depths reported on the held-out windows


def build_eagle(target: LoadedModel, out: str | Path, data_config: DataConfig = DataConfig(),
                train_config: EagleTrainConfig = EagleTrainConfig(), force: bool = False, progress: bool = False
                ) -> dict[str, Any]:
    """Train a feature draft for `target` and save it with its card in `out`; returns the card."""
    start = time.perf_counter()
    phase("hashing the target's weights", progress)
    fingerprint = weights_fingerprint(target.path)
    train, held, sources, seconds = distillation_data(target, fingerprint, data_config, progress)
    eos = target.tokenizer.eos_token_id
    vocab = frequent_vocab(train, train_config.vocab, always=[] if eos is None else [eos])
    torch.manual_seed(train_config.seed)
    draft = draft_on(target.model, vocab)
    lap = time.perf_counter()
    log = train_eagle(draft, train, train_config, progress=progress)
    seconds["train"] = time.perf_counter() - lap
    held_out = evaluate(draft, held, max(EVAL_DEPTH, train_config.ttt))
    seconds["total"] = time.perf_counter() - start
    card = {
        "target": {"name": target.path.name, "path": str(target.path), "weights_sha256": fingerprint,
                   "hidden_size": draft.shape.hidden, "vocab_size": int(target.vocab_size)},
        "layer": draft.shape.to_dict(), "vocab": int(vocab.numel()),
        "trained_parameters": int(sum(p.numel() for p in draft.trained().values())),
        "vocab_coverage_held_out": coverage(held, vocab),
        "data": {**asdict(data_config), **sources, "train_tokens": int(train.tokens.numel())},
        "training": {**train_config.to_dict(), **log}, "held_out": held_out,
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
        "machine": {"device": str(draft.vocab.device), "torch": torch.__version__, "threads": torch.get_num_threads(),
                    "platform": platform.platform()},
    }
    save_eagle(draft, card, out, force=force)
    return card
