"""Shared pytest set-up.

Tiny-model tests run torch on one thread: their matrices are so small that intra-op
threading only adds overhead (measured 16 ms vs 0.6 ms per tiny forward pass on a busy
2-core machine). Tests marked slow (real SmolLM2 model) keep torch's default threads.
"""
import pytest


@pytest.fixture(autouse=True)
def _torch_threads(request):
    try:
        import torch
    except ImportError:  # the simulator tests do not need torch
        yield
        return
    before = torch.get_num_threads()
    if request.node.get_closest_marker("slow") is None:
        torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
