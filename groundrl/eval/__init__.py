"""Evaluation: run an agent for N episodes, or on a named suite of tests, and report success with
confidence intervals."""

from groundrl.eval.evaluate import EvalResult, evaluate, wilson_interval
from groundrl.eval.suites import SUITES, Suite, Test, get_suite, read_results, run_suite

__all__ = ["EvalResult", "SUITES", "Suite", "Test", "evaluate", "get_suite", "read_results", "run_suite",
           "wilson_interval"]
