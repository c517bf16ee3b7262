"""Evaluation: run a policy for N episodes and report success with confidence intervals."""

from groundrl.eval.evaluate import EvalResult, evaluate, wilson_interval

__all__ = ["EvalResult", "evaluate", "wilson_interval"]
