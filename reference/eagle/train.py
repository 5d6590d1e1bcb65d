"""Training the feature draft by self-distillation (docs/eagle.md): at every entry and every
depth of the training-time test (`unroll`), a cross-entropy against the target's own top-k
distribution at that position, optionally plus EAGLE-1's feature regression at depth 1.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F

from specdec.errors import SpecdecError
from specdec.reference.core.progress import progress as progress_bar
from specdec.reference.eagle.model import EagleDraft
from specdec.reference.eagle.unroll import unroll, valid
from specdec.reference.heads.data import Distillation
from specdec.reference.heads.train import column_lookup


@dataclass(frozen=True)
class EagleTrainConfig:
    """ttt: depths of the training-time test (1 = EAGLE-1's teacher forcing on the target's
    features only); vocab: restricted output ids; feature_weight: weight of the depth-1 feature
    regression (smooth L1 against the target's next feature; 0 = off); epochs over the windows;
    batch: windows per step; seed for shuffling and initialisation; fuse: the target's decoder
    layers whose hidden states the committed entries fuse (EAGLE-3; () = the final features only);
    draft_layers: the draft's decoder layers (EAGLE's is one)."""

    ttt: int = 3
    vocab: int = 8192
    feature_weight: float = 0.0
    epochs: int = 4
    batch: int = 4
    lr: float = 1e-3
    weight_decay: float = 0.01
    seed: int = 0
    fuse: tuple[int, ...] = ()
    draft_layers: int = 1

    def __post_init__(self) -> None:
        if min(self.ttt, self.vocab, self.epochs, self.batch, self.draft_layers) < 1 or not self.lr > 0 or not self.feature_weight >= 0:
            raise SpecdecError(f"training sizes must be >= 1, lr > 0 and feature_weight >= 0: {self}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def labels(data: Distillation, columns: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(cols int64 [W, n, k] restricted column of each top-k id of p at u + 1, -1 outside the
    vocabulary; probs float32 [W, n, k]) for entries u = 0..L-2."""
    return columns[data.top_ids[:, 1:].long()], data.top_probs[:, 1:].float()


def depth_losses(logits: list[torch.Tensor], cols: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
    """[depth] cross-entropy -sum_j p_j log q(id_j) over the top-k ids inside the vocabulary,
    averaged over the rows that continue a block."""
    n = cols.shape[1]
    ok = valid(n, len(logits), cols.device)
    out = []
    for j, lg in enumerate(logits):
        logq = lg.float().log_softmax(-1)
        picked = logq.gather(-1, cols.clamp_min(0)) * (cols >= 0)
        per_row = -(probs * picked).sum(-1)  # [B, n]
        out.append(per_row[:, ok[j]].mean())
    return torch.stack(out)


def window_layers(draft: EagleDraft, data: Distillation, idx: torch.Tensor) -> torch.Tensor | None:
    """The windows' hidden states after the layers the draft fuses (None for a draft that fuses none)."""
    if not draft.layers:
        return None
    if data.layers is None or data.layer_ids != draft.layers:
        raise ValueError(f"the draft fuses layers {draft.layers}, the data holds {data.layer_ids}")
    return data.layers[idx].to(draft.vocab.device)


def train_eagle(draft: EagleDraft, train: Distillation, config: EagleTrainConfig, progress: bool = False
                ) -> dict[str, Any]:
    """Fit fc and the layer (the output layer and embeddings stay frozen); returns a log."""
    cols, probs = labels(train, column_lookup(draft.vocab.cpu(), train))
    generator = torch.Generator().manual_seed(config.seed)
    params = list(draft.trained().values())
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    steps = config.epochs * -(-train.n_windows // config.batch)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=config.lr, total_steps=steps, pct_start=0.1)
    bar = progress_bar(steps, "training the feature draft", "step", progress)
    device = draft.vocab.device
    start, losses = time.perf_counter(), []
    draft.train()
    for _ in range(config.epochs):
        for idx in torch.randperm(train.n_windows, generator=generator).split(config.batch):
            features, tokens = train.hidden[idx].to(device), train.tokens[idx].to(device)
            logits, first = unroll(draft, features, tokens, config.ttt, own=False,
                                   layers=window_layers(draft, train, idx))
            loss = depth_losses(logits, cols[idx].to(device), probs[idx].to(device))
            total = loss.sum()
            if config.feature_weight > 0:  # EAGLE-1: f^_(u+1) against the target's f_(u+1)
                total = total + config.feature_weight * F.smooth_l1_loss(first, features[:, 1:])
            optimizer.zero_grad(set_to_none=True)
            total.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            schedule.step()
            losses.append(loss.detach().tolist())
            bar.update(1)
    bar.close()
    draft.eval()
    return {"steps": steps, "windows": train.n_windows, "seconds": round(time.perf_counter() - start, 1),
            "final_loss": losses[-1]}


@torch.no_grad()
def evaluate(draft: EagleDraft, data: Distillation, depth: int, top: int = 5, batch: int = 16
             ) -> list[dict[str, float]]:
    """Per depth j on held-out windows, the true tokens fed (the training-time test: drafts
    1..j-1 taken as the true tokens, the features the draft's own): loss, top-1 agreement with
    the target's argmax (the greedy acceptance of draft j given drafts 1..j-1 were accepted, on
    this text), top-`top` accuracy and beta_topk = sum over the target's top-k of min(p, q) (a
    lower bound of the temperature-1 acceptance). Acceptance on the target's own continuations,
    drafting from its own tokens: `specdec estimate --drafter eagle:DIR`."""
    cols, probs = labels(data, column_lookup(draft.vocab.cpu(), data))
    device = draft.vocab.device
    sums = torch.zeros(4, depth, dtype=torch.float64)
    rows_seen = torch.zeros(depth, dtype=torch.float64)
    for idx in torch.arange(data.n_windows).split(batch):
        features, tokens = data.hidden[idx].to(device), data.tokens[idx].to(device)
        c, p = cols[idx].to(device), probs[idx].to(device)
        ok = valid(c.shape[1], depth, device)
        logits, _ = unroll(draft, features, tokens, depth, own=False, layers=window_layers(draft, data, idx))
        losses = depth_losses(logits, c, p)
        best = c[..., 0]  # the target's argmax column (top-k is sorted), -1 outside the vocabulary
        for j in range(depth):
            rows, n_rows = ok[j], float(ok[j].sum()) * len(idx)
            q_top = torch.where(c >= 0, logits[j].float().softmax(-1).gather(-1, c.clamp_min(0)), torch.zeros_like(p))
            sums[0, j] += float(losses[j]) * n_rows
            sums[1, j] += float((logits[j].argmax(-1) == best)[:, rows].sum())
            sums[2, j] += float((logits[j].topk(top, -1).indices == best[..., None]).any(-1)[:, rows].sum())
            sums[3, j] += float(torch.minimum(p, q_top).sum(-1)[:, rows].sum())
            rows_seen[j] += n_rows
    sums /= rows_seen.clamp_min(1.0)
    return [{"depth": j + 1, "loss": sums[0, j].item(), "top1": sums[1, j].item(), f"top{top}": sums[2, j].item(),
             "beta_topk": sums[3, j].item()} for j in range(depth)]
