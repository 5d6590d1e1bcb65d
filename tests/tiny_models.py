"""Tiny, randomly initialised but *real* Hugging Face causal LMs for fast exactness tests.

The output layer is scaled up so the distributions are peaked and depend on the context,
which makes distribution tests sensitive (an untrained tiny model is nearly uniform).
"""
from __future__ import annotations

import numpy as np
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM


def tiny_llama(vocab_size: int = 8, seed: int = 0, sharpness: float = 40.0, hidden: int = 32, heads: int = 4,
               kv_heads: int = 2) -> LlamaForCausalLM:
    """hidden / heads: the head size (8 by default; 64 with hidden=128, heads=2 is what the fast
    backend's attention kernel runs)."""
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=2,
                         num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=512,
                         tie_word_embeddings=False)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(sharpness)
    return model


def tiny_gpt2(vocab_size: int = 8, seed: int = 0, sharpness: float = 40.0) -> GPT2LMHeadModel:
    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=vocab_size, n_embd=32, n_layer=2, n_head=4, n_positions=512)
    model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        model.transformer.wte.weight.mul_(sharpness ** 0.5)
    return model


@torch.inference_mode()
def exact_joint(model, prefix: list[int], n: int, probs_fn) -> torch.Tensor:
    """Exact joint distribution of the next n tokens after `prefix`, [vocab] * n.

    probs_fn maps logits [..., vocab] to the adjusted distribution (e.g. top-k), so the
    result is the distribution plain sampling from the target produces.
    """
    vocab = model.config.vocab_size
    joint = torch.ones(1)  # [vocab ** j] over continuations of length j
    conts = torch.empty(1, 0, dtype=torch.long)
    for _ in range(n):
        ids = torch.cat([torch.tensor(prefix).expand(conts.shape[0], -1), conts], dim=1)
        p = probs_fn(model(input_ids=ids).logits[:, -1].double())  # [vocab ** j, vocab]
        joint = (joint[:, None] * p).reshape(-1)
        conts = torch.cat([conts.repeat_interleave(vocab, 0), torch.arange(vocab).repeat(conts.shape[0])[:, None]], 1)
    return joint.reshape([vocab] * n)


def sampled_joint(scorer, drafter, prompt: list[int], n: int, gamma: int, sampling, generator, runs: int,
                  vocab: int) -> tuple[np.ndarray, list]:
    """(counts [vocab] * n of the first n tokens over `runs` speculative decodes, the decodes'
    results): the empirical joint that the chi-square tests hold against `exact_joint`."""
    from specdec.reference.core.loop import speculative_decode

    counts = np.zeros([vocab] * n)
    results = []
    for _ in range(runs):
        r = speculative_decode(scorer, drafter, prompt, n, gamma, sampling, generator)
        counts[tuple(r.tokens)] += 1
        results.append(r)
    return counts, results


def tiny_tokenizer(vocab_size: int):
    """A word-level tokenizer over the words w0 .. w{vocab_size-3}, plus <unk> and </s>."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "</s>": 1, **{f"w{i}": i + 2 for i in range(vocab_size - 2)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="</s>")


def save_tiny_model(folder, vocab_size: int = 64, seed: int = 0, arch=tiny_llama):
    """Write a tiny model and its tokenizer as a local Hugging Face folder; returns the path."""
    model = arch(vocab_size=vocab_size, seed=seed)
    model.generation_config.eos_token_id = 1
    model.save_pretrained(folder)
    tiny_tokenizer(vocab_size).save_pretrained(folder)
    return folder
