"""Estimating alpha and c: target samples, teacher-forced scoring, alpha, timings, costs,
the replay of decoding along the target's samples, interference checks (docs/estimator.md).
"""
