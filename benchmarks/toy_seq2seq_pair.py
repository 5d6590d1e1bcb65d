"""A toy encoder-decoder pair trained here in minutes: byte-level T5 target and draft that copy
their source (64-byte windows of the project's training split), for running estimate, validate
and bild on an encoder-decoder pair where no real one can be downloaded. A TOY: the task is a
copy, so acceptance is far higher than on translation or summarization (docs/encoder-decoder.md).

    .venv/bin/python benchmarks/toy_seq2seq_pair.py --out .cache/toy-seq2seq
    specdec validate --target .cache/toy-seq2seq/target --drafter small=model:.cache/toy-seq2seq/draft \
        --drafter lookup --new-tokens 48 ...

The tokenizer is ByT5's (bytes; no vocabulary file in the folder). Sizes: target d_model 128,
2 + 2 layers; draft d_model 64, 1 + 1 layer. Trained with Adam on teacher-forced cross-entropy
for --seconds each (a fixed wall-clock budget, reported with the steps it reached).
"""
from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]

WINDOW = 64  # bytes of source per example (the default --prompt-tokens of validate)


def windows(texts: list[str], rng: random.Random, n: int) -> list[bytes]:
    out = []
    while len(out) < n:
        text = rng.choice(texts).encode("utf-8")
        if len(text) <= WINDOW:
            continue
        start = rng.randrange(len(text) - WINDOW)
        out.append(text[start:start + WINDOW])
    return out


def build(d_model: int, layers: int, seed: int):
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(seed)
    config = T5Config(vocab_size=384, d_model=d_model, d_kv=d_model // 4, d_ff=4 * d_model, num_layers=layers,
                      num_decoder_layers=layers, num_heads=4, decoder_start_token_id=0, pad_token_id=0,
                      eos_token_id=1, tie_word_embeddings=False, dropout_rate=0.0)
    return T5ForConditionalGeneration(config)


def train(model, tokenizer, texts: list[str], seconds: float, seed: int, batch: int = 32) -> dict:
    rng = random.Random(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.0)
    model.train()
    start, steps, losses = time.perf_counter(), 0, []
    while time.perf_counter() - start < seconds:
        data = windows(texts, rng, batch)
        enc = tokenizer([d.decode("utf-8", "ignore") for d in data], return_tensors="pt", padding=True)
        labels = enc.input_ids.masked_fill(enc.input_ids == tokenizer.pad_token_id, -100)
        loss = model(input_ids=enc.input_ids, attention_mask=enc.attention_mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
        losses.append(loss.item())
    model.eval()
    return {"steps": steps, "seconds": time.perf_counter() - start, "final_loss": sum(losses[-20:]) / 20}


def main() -> None:
    from transformers import ByT5Tokenizer

    from specdec.reference.data.corpus import load_chunks

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / ".cache" / "toy-seq2seq")
    parser.add_argument("--seconds", type=float, default=200.0, help="training budget per model")
    parser.add_argument("--only", choices=("target", "draft"), default=None, help="train this one alone")
    args = parser.parse_args()
    torch.set_num_threads(2)
    tokenizer = ByT5Tokenizer()
    texts = [c.text for c in load_chunks() if not c.heldout]
    report_path = args.out / "training.json"
    report = json.loads(report_path.read_text()) if report_path.is_file() else {}
    for name, d_model, layers, seed in (("target", 128, 2, 0), ("draft", 64, 1, 1)):
        if args.only not in (None, name):
            continue
        model = build(d_model, layers, seed)
        report[name] = {"parameters": sum(p.numel() for p in model.parameters()),
                        **train(model, tokenizer, texts, args.seconds, seed)}
        folder = args.out / name
        model.generation_config.decoder_start_token_id = 0
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        print(name, json.dumps(report[name]), flush=True)
    report_path.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
