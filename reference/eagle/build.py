"""`specdec eagle train` end to end: the heads' training text and target passes (shared and
cached: `specdec.reference.heads.build.distillation_data`) -> the feature draft -> card."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from specdec.reference.model.models import LoadedModel
from specdec.reference.eagle.model import check_fuse, draft_on
from specdec.reference.eagle.store import save_eagle
from specdec.reference.eagle.train import EagleTrainConfig, evaluate, train_eagle
from specdec.reference.heads.build import DataConfig, trainee_data

EVAL_DEPTH = 6  # depths reported on the held-out windows


def build_eagle(target: LoadedModel, out: str | Path, data_config: DataConfig = DataConfig(),
                train_config: EagleTrainConfig = EagleTrainConfig(), force: bool = False, progress: bool = False
                ) -> dict[str, Any]:
    """Train a feature draft for `target` and save it with its card in `out`; returns the card."""
    start = time.perf_counter()
    fuse = train_config.fuse
    check_fuse(target.model.config, fuse)  # before the target's passes
    _, train, held, vocab, about, seconds = trainee_data(target, data_config, train_config.vocab, progress, fuse)
    torch.manual_seed(train_config.seed)
    draft = draft_on(target.model, vocab, fuse, train_config.draft_layers)
    lap = time.perf_counter()
    log = train_eagle(draft, train, train_config, progress=progress)
    seconds["train"] = time.perf_counter() - lap
    held_out = evaluate(draft, held, max(EVAL_DEPTH, train_config.ttt))
    seconds["total"] = time.perf_counter() - start
    card = {**about(draft.shape.hidden, draft.vocab.device), "layer": draft.shape.to_dict(), "fuse_layers": list(fuse),
            "draft_layers": draft.depth,
            "trained_parameters": int(sum(p.numel() for p in draft.trained().values())),
            "training": {**train_config.to_dict(), **log}, "held_out": held_out,
            "seconds": {k: round(v, 1) for k, v in seconds.items()}}
    save_eagle(draft, card, out, force=force)
    return card
