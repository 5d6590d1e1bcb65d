"""Estimating alpha and c: target samples, teacher-forced scoring, alpha, timings, costs,
greedy replay, interference checks (docs/estimator.md).
"""
