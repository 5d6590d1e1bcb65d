"""`specdec draft train` end to end: the target's passes over the heads' training data (shared
and cached: `specdec.reference.heads.build.distillation_data`) -> the draft cut from the
target -> KL distillation (resumable) -> held-out quality -> the saved folder, whose card also
holds alpha per workload measured by the estimator on the saved draft (`model:DIR`, T = 0).
"""
from __future__ import annotations

import hashlib
import json
import platform
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from specdec.paths import cache_dir
from specdec.reference.model.models import LoadedModel
from specdec.reference.core.progress import phase
from specdec.reference.data.prompts import PromptSource
from specdec.reference.draftmodel.model import DraftShape, draft_from, trained
from specdec.reference.draftmodel.store import check_out, save_draft
from specdec.reference.draftmodel.train import DraftTrainConfig, evaluate, train_draft
from specdec.reference.heads.build import DataConfig, distillation_data
from specdec.reference.heads.store import weights_fingerprint


def checkpoint_path(fingerprint: str, data_config: DataConfig, train_config: DraftTrainConfig) -> tuple[Path, str]:
    """(the checkpoint file, its key): one per (target weights, data, training), in the cache."""
    key = hashlib.sha256(json.dumps([fingerprint, asdict(data_config), train_config.to_dict()],
                                    sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir() / "draftmodel" / f"checkpoint-{key}.pt", key


def workload_alpha(target_dir: Path, draft_dir: Path, source: PromptSource, tokens: int, new_tokens: int,
                   seed: int) -> dict[str, Any]:
    """alpha at T = 0 per workload of `source` for the draft folder (the estimator, no timing)."""
    from specdec.reference.core.sampling import SamplingConfig
    from specdec.reference.estimate.run import EstimateConfig, run_estimate

    config = EstimateConfig(target=target_dir, drafter=f"model:{draft_dir}", sampling=SamplingConfig(0.0),
                            tokens=tokens, new_tokens=new_tokens, source=source, timing=False, seed=seed,
                            bootstrap=500)
    report = run_estimate(config)
    per = report.get("categories") or {report["category"]: report}
    return {"temperature": 0.0, "tokens_per_workload": tokens, "new_tokens": new_tokens,
            "workloads": {c: {"alpha": r["alpha"], "alpha_ci": r["alpha_ci"], "prompts": r["prompts"]}
                          for c, r in per.items()}}


def build_draft(target: LoadedModel, out: str | Path, data_config: DataConfig = DataConfig(),
                train_config: DraftTrainConfig = DraftTrainConfig(), alpha_source: PromptSource | None = None,
                alpha_tokens: int = 512, force: bool = False, progress: bool = False) -> dict[str, Any]:
    """Distil a draft model from `target` and save it (folder + card) in `out`; returns the card."""
    start = time.perf_counter()
    check_out(out, force)
    phase("hashing the target's weights", progress)
    fingerprint = weights_fingerprint(target.path)
    train, held, sources, seconds = distillation_data(target, fingerprint, data_config, progress)
    torch.manual_seed(train_config.seed)
    shape = DraftShape(train_config.layers, train_config.source_layers)
    draft = draft_from(target.model, shape)
    untrained = evaluate(draft, held, train_config.temperature)
    checkpoint, key = checkpoint_path(fingerprint, data_config, train_config)
    lap = time.perf_counter()
    log = train_draft(draft, train, train_config, checkpoint, key, progress=progress)
    seconds["train"] = time.perf_counter() - lap
    held_out = evaluate(draft, held, train_config.temperature)
    config = target.model.config

    def card(folder: Path) -> dict[str, Any]:
        alpha = None
        if alpha_source is not None and alpha_tokens > 0:
            phase("alpha per workload of the saved draft (the estimator, T = 0)", progress)
            lap = time.perf_counter()
            alpha = workload_alpha(target.path, folder, alpha_source, alpha_tokens, min(128, alpha_tokens),
                                   train_config.seed)
            seconds["alpha"] = time.perf_counter() - lap
        seconds["total"] = time.perf_counter() - start
        return {"target": {"name": target.path.name, "path": str(target.path), "weights_sha256": fingerprint,
                           "layers": int(config.num_hidden_layers), "hidden_size": int(config.hidden_size),
                           "vocab_size": int(target.vocab_size)},
                "draft": {"layers": shape.layers, "source_layers": list(shape.sources(config.num_hidden_layers)),
                          "hidden_size": int(config.hidden_size),
                          "parameters": int(sum(p.numel() for p in draft.parameters())),
                          "trained_parameters": int(sum(p.numel() for p in trained(draft).values())),
                          "embedding": "the target's, tied to the output layer, frozen"},
                "data": {**asdict(data_config), **sources, "train_tokens": int(train.tokens.numel()),
                         "held_out_tokens": int(held.tokens.numel())},
                "training": {**train_config.to_dict(), **log},
                "held_out": {"untrained": untrained, "trained": held_out},
                "alpha": alpha,
                "machine": {"torch": torch.__version__, "threads": torch.get_num_threads(),
                            "platform": platform.platform()},
                "seconds": {k: round(v, 1) for k, v in seconds.items()}}

    written = save_draft(draft, target.path, out, card, force=force)
    checkpoint.unlink(missing_ok=True)  # published: the next run with this key starts afresh
    return written
