"""The sinusoidal encoding against the paper's formula, section 3.5."""

from __future__ import annotations

import math

import pytest
import torch

from attention_explorer.models.positional import SinusoidalPositionalEncoding, sinusoidal_table
from tests import tolerance

EPS64 = 2.0**-52


@pytest.mark.parametrize("d_model", [16, 512, 7])
def test_table_matches_paper_formula(d_model):
    table = sinusoidal_table(60, d_model)
    for pos in (0, 1, 5, 59):
        for dim in range(d_model):
            i = dim // 2
            angle = pos / 10000 ** (2 * i / d_model)
            expected = math.sin(angle) if dim % 2 == 0 else math.cos(angle)
            # the table's float64 sinusoid rounded once to float32 (eps / 2 of it), against math's: the two float64
            # angles (exp of a logarithm against a power) within some 32 float64 ulps of the angle. A margin near 1 is
            # that one IEEE rounding to float32, the same on every machine
            bound = tolerance.EPS32 / 2 * abs(expected) + 32 * EPS64 * (angle + 1)
            tolerance.assert_within(table[pos, dim].item(), expected, bound, f"position {pos}, dimension {dim}")


def test_position_zero_is_zeros_and_ones():
    row = sinusoidal_table(4, 8)[0]
    assert row[0::2].eq(0).all() and row[1::2].eq(1).all()


def test_module_is_not_a_parameter_and_slices_by_length():
    pe = SinusoidalPositionalEncoding(32, 8)
    assert list(pe.parameters()) == [] and "table" not in pe.state_dict()
    assert torch.equal(pe(5), sinusoidal_table(32, 8)[:5])  # the same table, sliced
