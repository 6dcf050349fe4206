"""RMSNorm (``attention.norms``): against ``torch.nn.RMSNorm``, its defaults and its errors.

Tolerance (float64): ``hf_models.EXACT`` (rtol 1e-10, atol 1e-12). ``ProjectionRMSNorm``
(OLMo 2's norm over the whole projection) is checked in ``test_models_recipes.py``,
against ``Olmo2Attention``, and in ``test_gqa.py``.
"""

from __future__ import annotations

import pytest
import torch
from helpers import F64, expect
from hf_models import EXACT
from hypothesis import given
from hypothesis import strategies as st

from attention import RMSNorm

pytestmark = pytest.mark.usefixtures("single_thread")


@given(seed=st.integers(0, 2**16), dim=st.integers(1, 9), affine=st.booleans())
def test_rms_norm_matches_torch_rms_norm(seed, dim, affine):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 3, dim, generator=generator, dtype=F64)
    ours = RMSNorm(dim, elementwise_affine=affine).to(F64)
    theirs = torch.nn.RMSNorm(dim, eps=1e-6, elementwise_affine=affine, dtype=F64)
    if affine:
        with torch.no_grad():
            weight = torch.randn(dim, generator=generator, dtype=F64)
            ours.weight.copy_(weight)
            theirs.weight.copy_(weight)
    torch.testing.assert_close(ours(x), theirs(x), **EXACT)


def test_rms_norm_starts_at_ones_and_computes_in_the_inputs_dtype():
    norm = RMSNorm(3)
    assert torch.equal(norm.weight, torch.ones(3)) and norm.eps == 1e-6
    assert norm(torch.ones(2, 3, dtype=torch.bfloat16).to(torch.float32)).dtype == torch.float32
    half = RMSNorm(3, elementwise_affine=False)
    assert half.weight is None and list(half.state_dict()) == []
    assert half(torch.ones(3, dtype=torch.bfloat16)).dtype == torch.bfloat16
    assert torch.equal(half(torch.zeros(4, 3)), torch.zeros(4, 3))


@pytest.mark.parametrize(
    ("kwargs", "message", "error"),
    [
        ({"dim": 0}, "RMSNorm: dim must be at least 1, got 0", ValueError),
        ({"dim": 2.0}, "RMSNorm: dim must be a positive integer, got 2.0", TypeError),
        ({"dim": 3, "eps": 0}, "RMSNorm: eps must be a positive number, got 0", ValueError),
        ({"dim": 3, "eps": True}, "RMSNorm: eps must be a positive number, got True", TypeError),
        (
            {"dim": 3, "elementwise_affine": 1},
            "RMSNorm: elementwise_affine must be True or False",
            TypeError,
        ),
    ],
    ids=["dim0", "dim_float", "eps0", "eps_bool", "affine_int"],
)
def test_rms_norm_rejects_bad_arguments(kwargs, message, error):
    with expect(message, error):
        RMSNorm(**kwargs)


def test_rms_norm_rejects_an_input_of_the_wrong_size_or_type():
    with expect("RMSNorm: expected a tensor whose last dimension is dim=3, got (2, 4)"):
        RMSNorm(3)(torch.ones(2, 4))
    with expect("RMSNorm: expected a tensor whose last dimension is dim=3, got list", TypeError):
        RMSNorm(3)([1.0, 2.0, 3.0])
