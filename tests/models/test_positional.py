"""The sinusoidal encoding against the paper's formula, section 3.5."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attention_explorer.models.positional import SinusoidalPositionalEncoding, sinusoidal_table

EPS64 = 2.0**-52


@pytest.mark.parametrize("d_model", [16, 512, 7])
def test_table_matches_paper_formula(d_model):
    table = sinusoidal_table(60, d_model)
    for pos in (0, 1, 5, 59):
        for dim in range(d_model):
            i = dim // 2
            angle = pos / 10000 ** (2 * i / d_model)
            expected = math.sin(angle) if dim % 2 == 0 else math.cos(angle)
            # the table's float64 sinusoid rounded once to float32, against math's: the two float64 angles (exp of a
            # logarithm against a power) within some 32 float64 ulps of the angle, so the table holds the float32
            # nearest a value within that of math's: between the nearest to its two ends (rounding keeps order),
            # exactly, on every machine (a float32 rounding is IEEE's); usually both ends' nearest are one number
            near = 32 * EPS64 * (angle + 1)
            low, high = float(np.float32(expected - near)), float(np.float32(expected + near))
            assert low <= table[pos, dim].item() <= high, (pos, dim, table[pos, dim].item(), expected)


def test_position_zero_is_zeros_and_ones():
    row = sinusoidal_table(4, 8)[0]
    assert row[0::2].eq(0).all() and row[1::2].eq(1).all()


def test_module_is_not_a_parameter_and_slices_by_length():
    pe = SinusoidalPositionalEncoding(32, 8)
    assert list(pe.parameters()) == [] and "table" not in pe.state_dict()
    assert torch.equal(pe(5), sinusoidal_table(32, 8)[:5])  # the same table, sliced
