"""Work split over processes started by torchrun: ranks, their share of the prompts, and the
gather of their results on rank 0 (docs/distributed.md).
"""
