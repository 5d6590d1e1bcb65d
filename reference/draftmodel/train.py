"""Distilling the draft model from the target: KL(p_T || q_T) at every position of the
training windows, p the target's next-token distribution (its stored top-k, renormalised) and
q the draft's, both at the training temperature T.

Names as in Leviathan et al.: p is the target's distribution, q the draft's. The training is
resumable: a checkpoint (the trained weights, the optimiser, the step) is written atomically
every `checkpoint_seconds`, and a run with the same key starts from it; the window order of
each epoch comes from (seed, epoch), so a resumed run takes the same steps as one that never
stopped.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from specdec.errors import SpecdecError
from specdec.paths import writing
from specdec.reference.core.progress import progress as progress_bar
from specdec.reference.draftmodel.model import trained
from specdec.reference.heads.data import Distillation


@dataclass(frozen=True)
class DraftTrainConfig:
    """layers: the draft's decoder layers; source_layers: the target layers they start as (()
    = `model.default_sources`); temperature: T of the KL; epochs over the windows; batch:
    windows per step; lr: AdamW's peak (one-cycle schedule); seed: the window order."""

    layers: int = 1
    source_layers: tuple[int, ...] = ()
    temperature: float = 1.0
    epochs: int = 2
    batch: int = 4
    lr: float = 5e-4
    weight_decay: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if min(self.layers, self.epochs, self.batch) < 1 or not self.lr > 0 or not self.temperature > 0:
            raise SpecdecError(f"training sizes must be >= 1, lr > 0 and temperature > 0: {self}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def target_probs(data: Distillation, idx: torch.Tensor, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids int64 [B, L, k], p_T float32 [B, L, k]): the stored top-k of p at positions of windows
    `idx`, tempered (p^(1/T)) and renormalised over those k."""
    ids, p = data.top_ids[idx].long(), data.top_probs[idx].float().clamp_min(1e-30)
    logp = p.log() / temperature
    return ids, (logp - logp.logsumexp(-1, keepdim=True)).exp()


def kl_loss(logits: torch.Tensor, ids: torch.Tensor, p: torch.Tensor, temperature: float) -> torch.Tensor:
    """Mean over positions of KL(p_T || q_T) = sum_j p_j (log p_j - log q_T(id_j)); logits
    [B, L, V], ids / p [B, L, k]."""
    logq = (logits.float() / temperature).log_softmax(-1).gather(-1, ids)  # [B, L, k]
    return (p * (p.clamp_min(1e-30).log() - logq)).sum(-1).mean()


def train_draft(draft: torch.nn.Module, train: Distillation, config: DraftTrainConfig,
                checkpoint: Path | None = None, checkpoint_key: str = "", checkpoint_seconds: float = 60.0,
                progress: bool = False) -> dict[str, Any]:
    """Fit the draft's decoder layers and final norm (`model.trained`) on the windows; resume from
    `checkpoint` when it holds `checkpoint_key`. Returns a log (steps, resumed_at, final loss)."""
    params = list(trained(draft).values())
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    per_epoch = -(-train.n_windows // config.batch)
    steps = config.epochs * per_epoch
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=config.lr, total_steps=steps, pct_start=0.1)
    done = resumed = resume(checkpoint, checkpoint_key, draft, optimizer, schedule)
    device = next(iter(params)).device
    bar = progress_bar(steps, "training the draft model", "step", progress)
    bar.update(done)
    start, last_save, loss = time.perf_counter(), time.perf_counter(), None
    draft.train()
    try:
        for epoch in range(done // per_epoch, config.epochs):
            order = torch.randperm(train.n_windows, generator=torch.Generator().manual_seed(config.seed + epoch))
            for i, idx in enumerate(order.split(config.batch)):
                if epoch * per_epoch + i < done:
                    continue
                ids, p = target_probs(train, idx, config.temperature)
                logits = draft(input_ids=train.tokens[idx].to(device)).logits  # [B, L, V]
                loss = kl_loss(logits, ids.to(device), p.to(device), config.temperature)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                optimizer.step()
                schedule.step()
                done += 1
                bar.update(1)
                if checkpoint is not None and time.perf_counter() - last_save > checkpoint_seconds and done < steps:
                    save_checkpoint(checkpoint, checkpoint_key, draft, optimizer, schedule, done)
                    last_save = time.perf_counter()
    finally:
        bar.close()
        draft.eval()
    return {"steps": steps, "windows": train.n_windows, "resumed_at_step": resumed,
            "seconds": round(time.perf_counter() - start, 1), "final_loss": None if loss is None else float(loss.detach())}


def save_checkpoint(path: Path, key: str, draft: torch.nn.Module, optimizer, schedule, step: int) -> None:
    """The training state, written atomically (a reader sees the old file or the new one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with writing(path) as tmp:
        torch.save({"key": key, "step": step, "weights": {k: p.detach() for k, p in trained(draft).items()},
                    "optimizer": optimizer.state_dict(), "schedule": schedule.state_dict()}, tmp)


def resume(path: Path | None, key: str, draft: torch.nn.Module, optimizer, schedule) -> int:
    """Load a checkpoint made with `key` into the draft, optimiser and schedule; the step it
    reached (0: none, or one of another run, which is left alone)."""
    if path is None or not path.is_file():
        return 0
    state = torch.load(path, weights_only=True)
    if state.get("key") != key:
        return 0
    with torch.no_grad():
        for name, p in trained(draft).items():
            p.copy_(state["weights"][name])
    optimizer.load_state_dict(state["optimizer"])
    schedule.load_state_dict(state["schedule"])
    return int(state["step"])


@torch.no_grad()
def evaluate(draft: torch.nn.Module, data: Distillation, temperature: float = 1.0, batch: int = 8
             ) -> dict[str, float]:
    """On held-out windows (teacher-forced: the true tokens fed): the KL loss at `temperature`,
    top-1 agreement with the target's argmax (greedy acceptance of a draft token given the
    ones before it were accepted, on this text) and beta_topk = sum over the target's top-k of
    min(p, q) at T = 1 (a lower bound of the temperature-1 acceptance of that token)."""
    device = next(draft.parameters()).device
    sums, n = torch.zeros(3, dtype=torch.float64), 0
    for idx in torch.arange(data.n_windows).split(batch):
        logits = draft(input_ids=data.tokens[idx].to(device)).logits.float()  # [B, L, V]
        ids, p_t = target_probs(data, idx, temperature)
        positions = int(ids.shape[0] * ids.shape[1])
        sums[0] += float(kl_loss(logits, ids.to(device), p_t.to(device), temperature)) * positions
        sums[1] += float((logits.argmax(-1).cpu() == ids[..., 0]).sum())
        q = logits.softmax(-1).gather(-1, ids.to(device)).cpu()  # [B, L, k]
        sums[2] += float(torch.minimum(data.top_probs[idx].float(), q).sum())
        n += positions
    sums /= max(n, 1)
    return {"positions": n, "loss": sums[0].item(), "top1": sums[1].item(), "beta_topk": sums[2].item()}
