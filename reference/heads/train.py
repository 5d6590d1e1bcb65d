"""Training the heads by self-distillation (docs/heads.md): head i at position t is fitted to
the target's own distribution at position t + i, a cross-entropy against its top-k.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import torch

from specdec.errors import SpecdecError
from specdec.reference.core.progress import progress as progress_bar
from specdec.reference.heads.data import Distillation
from specdec.reference.heads.model import BlockHeads


@dataclass(frozen=True)
class TrainConfig:
    """n_heads: H = h - 1 draft heads; vocab: size of the restricted output vocabulary;
    epochs over the training windows; batch: positions per step; seed for shuffling."""

    n_heads: int = 3
    vocab: int = 8192
    epochs: int = 4
    batch: int = 512
    lr: float = 2e-3
    weight_decay: float = 0.01
    seed: int = 0

    def __post_init__(self) -> None:
        if min(self.n_heads, self.vocab, self.epochs, self.batch) < 1 or not self.lr > 0:
            raise SpecdecError(f"training sizes must be >= 1 and lr > 0: {self}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def column_lookup(vocab: torch.Tensor, data: Distillation) -> torch.Tensor:
    """int64 [max id + 1]: the restricted column of each target id, -1 outside the vocabulary."""
    table = torch.full((max(int(vocab.max()), int(data.top_ids.max())) + 1,), -1, dtype=torch.long)
    table[vocab.cpu()] = torch.arange(vocab.numel())
    return table


def head_targets(data: Distillation, n_heads: int, columns: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Inputs and labels at every position t < L - H of every window.

    Returns hidden [N, d], token int64 [N] (y = x_t+1, what the target predicts from h_t and
    the decoder has committed when the heads draft), cols int64 [N, H, k] (restricted column of each top-k id, -1
    outside the vocabulary; head i, 1-based, gets p at t + i) and probs float32 [N, H, k].
    """
    length = data.hidden.shape[1]
    if length <= n_heads:
        raise SpecdecError(f"windows of {length} tokens are too short for {n_heads} heads")
    n = length - n_heads
    hidden = data.hidden[:, :n].reshape(-1, data.hidden.shape[-1])
    token = data.tokens[:, 1:n + 1].reshape(-1)
    cols = torch.stack([columns[data.top_ids[:, i:i + n].long()] for i in range(1, n_heads + 1)], dim=2)
    probs = torch.stack([data.top_probs[:, i:i + n].float() for i in range(1, n_heads + 1)], dim=2)
    return hidden, token, cols.reshape(-1, n_heads, cols.shape[-1]), probs.reshape(-1, n_heads, probs.shape[-1])


def distillation_loss(logits: torch.Tensor, cols: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
    """Per-head loss [H]: -sum_j p_j log q(id_j) over the top-k ids inside the vocabulary,
    averaged over positions. logits [N, H, V']; cols, probs [N, H, k]."""
    logq = logits.log_softmax(-1)
    inside = cols >= 0
    picked = logq.gather(-1, cols.clamp_min(0)) * inside
    return -(probs * picked).sum(-1).mean(0)


@torch.no_grad()
def evaluate(heads: BlockHeads, data: Distillation, top: int = 5,
             batch: int = 1024) -> list[dict[str, float]]:
    """Per head on held-out windows: loss, top-1 agreement with the target's argmax (the
    teacher-forced greedy acceptance of that head), top-`top` accuracy (the target's argmax
    among the head's `top` best), beta_topk = sum over the target's top-k of min(p, q) (a
    lower bound of the temperature-1 acceptance)."""
    device = heads.weight.device
    hidden, token, cols, probs = (t.to(device) for t in head_targets(data, heads.n_heads,
                                                                     column_lookup(heads.vocab.cpu(), data)))
    sums = torch.zeros(4, heads.n_heads, dtype=torch.float64, device=device)
    for b in range(0, hidden.shape[0], batch):
        logits = heads(hidden[b:b + batch], token[b:b + batch])  # [n, H, V']
        c, p = cols[b:b + batch], probs[b:b + batch]
        target_col = c[:, :, 0]  # the target's argmax (top-k is sorted), -1 if outside the vocabulary
        q = logits.softmax(-1)
        q_top = torch.where(c >= 0, q.gather(-1, c.clamp_min(0)), torch.zeros_like(p))
        sums[0] += distillation_loss(logits, c, p).double() * logits.shape[0]
        sums[1] += (logits.argmax(-1) == target_col).sum(0).double()
        sums[2] += (logits.topk(top, -1).indices == target_col[..., None]).any(-1).sum(0).double()
        sums[3] += torch.minimum(p, q_top).sum(-1).sum(0).double()
    sums /= hidden.shape[0]
    return [{"head": i + 1, "loss": float(sums[0, i]), "top1": float(sums[1, i]), f"top{top}": float(sums[2, i]),
             "beta_topk": float(sums[3, i])} for i in range(heads.n_heads)]


def train_heads(heads: BlockHeads, train: Distillation, config: TrainConfig, progress: bool = False
                ) -> dict[str, Any]:
    """Fit the heads' residual blocks (the output layer stays frozen); returns a log."""
    device = heads.weight.device
    hidden, token, cols, probs = (t.to(device) for t in head_targets(train, heads.n_heads,
                                                                     column_lookup(heads.vocab.cpu(), train)))
    generator = torch.Generator().manual_seed(config.seed)
    params = [heads.weight, heads.bias]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    steps = config.epochs * -(-hidden.shape[0] // config.batch)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=config.lr, total_steps=steps, pct_start=0.1)
    bar = progress_bar(steps, "training heads", "step", progress)
    start, losses = time.perf_counter(), []
    heads.train()
    for _ in range(config.epochs):
        order = torch.randperm(hidden.shape[0], generator=generator).to(device)
        for b in range(0, hidden.shape[0], config.batch):
            idx = order[b:b + config.batch]
            loss = distillation_loss(heads(hidden[idx], token[idx]), cols[idx], probs[idx])
            optimizer.zero_grad(set_to_none=True)
            loss.sum().backward()
            optimizer.step()
            schedule.step()
            losses.append(loss.detach().tolist())
            bar.update(1)
    bar.close()
    heads.eval()
    return {"steps": steps, "positions": int(hidden.shape[0]), "seconds": round(time.perf_counter() - start, 1),
            "final_loss": losses[-1]}
