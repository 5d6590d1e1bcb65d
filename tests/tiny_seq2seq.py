"""Tiny, randomly initialised but *real* encoder-decoder models (T5, BART, Whisper architectures)
for the exactness tests of encoder-decoder pairs.

The output layer is redrawn with a chosen scale, so the distributions are peaked enough for
drafts to be accepted and still depend on the source and the decoder's context.
"""
from __future__ import annotations

import torch
from transformers import (BartConfig, BartForConditionalGeneration, T5Config, T5ForConditionalGeneration,
                          WhisperConfig, WhisperForConditionalGeneration)

from specdec.reference.core.prompt import TokenPrompt

MEL_BINS, FRAMES = 8, 32  # the tiny Whisper's features: [MEL_BINS, FRAMES]


def _sharpen(model, vocab_size: int, sharpness: float, width: int):
    with torch.no_grad():
        model.get_output_embeddings().weight.copy_(torch.randn(vocab_size, width) * sharpness)
    return model.eval()


def tiny_t5(vocab_size: int = 16, seed: int = 0, sharpness: float = 0.5) -> T5ForConditionalGeneration:
    torch.manual_seed(seed)
    config = T5Config(vocab_size=vocab_size, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                      num_heads=4, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1,
                      tie_word_embeddings=False)
    return _sharpen(T5ForConditionalGeneration(config), vocab_size, sharpness, 32)


def tiny_bart(vocab_size: int = 16, seed: int = 0, sharpness: float = 0.5) -> BartForConditionalGeneration:
    torch.manual_seed(seed)
    config = BartConfig(vocab_size=vocab_size, d_model=32, encoder_layers=2, decoder_layers=2,
                        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                        max_position_embeddings=128, decoder_start_token_id=1, bos_token_id=0, pad_token_id=0,
                        eos_token_id=1, forced_eos_token_id=None, tie_word_embeddings=False)
    return _sharpen(BartForConditionalGeneration(config), vocab_size, sharpness, 32)


def tiny_whisper(vocab_size: int = 16, seed: int = 0, sharpness: float = 0.5) -> WhisperForConditionalGeneration:
    torch.manual_seed(seed)
    config = WhisperConfig(vocab_size=vocab_size, d_model=32, encoder_layers=2, decoder_layers=2,
                           encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                           decoder_ffn_dim=64, num_mel_bins=MEL_BINS, max_source_positions=FRAMES // 2,
                           max_target_positions=128, decoder_start_token_id=1, bos_token_id=0, pad_token_id=0,
                           eos_token_id=1, suppress_tokens=None, begin_suppress_tokens=None,
                           tie_word_embeddings=False)
    return _sharpen(WhisperForConditionalGeneration(config), vocab_size, sharpness, 32)


ARCHS = {"t5": tiny_t5, "bart": tiny_bart, "whisper": tiny_whisper}


def source_for(model, seed: int = 0, length: int = 9) -> dict[str, torch.Tensor]:
    """A random encoder input for `model`: token ids [length], or Whisper features [MEL_BINS, FRAMES]."""
    gen = torch.Generator().manual_seed(seed)
    if model.main_input_name == "input_features":
        return {"input_features": torch.randn(MEL_BINS, FRAMES, generator=gen)}
    return {"input_ids": torch.randint(2, model.config.vocab_size, (length,), generator=gen)}


def prompt_for(model, seed: int = 0) -> TokenPrompt:
    return TokenPrompt([model.config.decoder_start_token_id], source_for(model, seed))


def hf_generate(model, prompt: TokenPrompt, n: int) -> list[int]:
    """Hugging Face's own greedy `generate` (exactly n tokens, no stop; Whisper's returns the
    generated tokens alone, the others the decoder prompt too)."""
    name, value = next(iter(prompt.source.items()))
    out = model.generate(**{name: value[None]}, decoder_input_ids=torch.tensor([list(prompt)]), max_new_tokens=n,
                         min_new_tokens=n, do_sample=False, eos_token_id=None, forced_eos_token_id=None)
    return out[0, -n:].tolist()


@torch.inference_mode()
def exact_joint_seq2seq(model, prompt: TokenPrompt, n: int, probs_fn) -> torch.Tensor:
    """Exact joint distribution of the next n decoder tokens after `prompt`, [vocab] * n."""
    from specdec.reference.model.seq2seq import encode, run_model

    vocab = model.config.vocab_size
    state = encode(model, [prompt])
    joint = torch.ones(1)
    conts = torch.empty(1, 0, dtype=torch.long)
    for _ in range(n):
        ids = torch.cat([torch.tensor(list(prompt)).expand(conts.shape[0], -1), conts], dim=1)
        p = probs_fn(run_model(model, ids, state).logits[:, -1].double())
        joint = (joint[:, None] * p).reshape(-1)
        conts = torch.cat([conts.repeat_interleave(vocab, 0), torch.arange(vocab).repeat(conts.shape[0])[:, None]], 1)
    return joint.reshape([vocab] * n)


def save_tiny_seq2seq(folder, arch: str = "t5", vocab_size: int = 64, seed: int = 0, sharpness: float = 0.5):
    """Write a tiny encoder-decoder and a word-level tokenizer as a local Hugging Face folder."""
    from tests.tiny_models import tiny_tokenizer

    model = ARCHS[arch](vocab_size=vocab_size, seed=seed, sharpness=sharpness)
    model.generation_config.eos_token_id = 1
    model.generation_config.decoder_start_token_id = model.config.decoder_start_token_id
    model.save_pretrained(folder)
    tiny_tokenizer(vocab_size).save_pretrained(folder)
    return folder
