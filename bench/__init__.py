"""Benchmarks (`python -m bench ...`): ratios against a reference measured in the same process."""
