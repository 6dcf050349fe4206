"""attention.positions: sinusoids, ALiBi and T5's relative bias, against transformers.

Tolerances: EXACT (rtol 1e-10, atol 1e-12, float64) where transformers computes in
float64 or is made to; buckets are integers and compared for equality. Two of the
functions compute a step in float32 whatever the input: ``create_sinusoidal_embeddings``
(and Marian's table) store their float64 NumPy table through ``torch.FloatTensor``, and
BLOOM's ``_get_alibi_slopes`` takes its base in float32. :func:`float64_tables` and
:func:`float64_alibi` keep those steps in float64 for the exact comparisons; the
functions untouched are compared at float32's rounding (FLOAT32_ROUNDING).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from unittest import mock

import pytest
import torch
from helpers import expect
from hf_models import EXACT
from hypothesis import example, given
from hypothesis import strategies as st
from transformers import BloomConfig, T5Config
from transformers.models.bloom import modeling_bloom
from transformers.models.bloom.modeling_bloom import BloomAttention, build_alibi_tensor
from transformers.models.distilbert.modeling_distilbert import (
    create_sinusoidal_embeddings as distilbert_sinusoids,
)
from transformers.models.flaubert.modeling_flaubert import (
    create_sinusoidal_embeddings as flaubert_sinusoids,
)
from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding
from transformers.models.t5.modeling_t5 import T5Attention
from transformers.models.xlm.modeling_xlm import create_sinusoidal_embeddings as xlm_sinusoids

from attention import (
    RelativePositionBias,
    alibi_bias,
    alibi_slopes,
    attend,
    causal_mask,
    relative_position_bucket,
    sinusoidal_positions,
)

pytestmark = pytest.mark.usefixtures("single_thread")

F64 = torch.float64
#: transformers' float32 step against our float64: a float32 rounding or two.
FLOAT32_ROUNDING = {"rtol": 3e-7, "atol": 1e-7}
SINUSOIDS = pytest.mark.parametrize(
    "create",
    [xlm_sinusoids, flaubert_sinusoids, distilbert_sinusoids],
    ids=["xlm", "flaubert", "distilbert"],
)


@contextlib.contextmanager
def float64_tables() -> Iterator[None]:
    """Within the block, ``torch.FloatTensor(array)`` keeps NumPy's float64 table float64."""
    with mock.patch.object(torch, "FloatTensor", torch.DoubleTensor):
        yield


@contextlib.contextmanager
def float64_alibi() -> Iterator[None]:
    """Within the block, BLOOM's slopes come from a float64 base instead of a float32 one.

    ``_get_alibi_slopes`` builds its bases with ``torch.full(..., dtype=torch.float32)``;
    every other step of ``build_alibi_tensor`` keeps the dtype it is given.
    """
    original = torch.full

    def full(size, fill_value, *args, dtype=None, **kwargs):
        if dtype == torch.float32:
            dtype = F64
        return original(size, fill_value, *args, dtype=dtype, **kwargs)

    with mock.patch.object(modeling_bloom.torch, "full", full):
        yield


def randn(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


# -- sinusoids ------------------------------------------------------------------------------


@SINUSOIDS
@given(num_positions=st.integers(1, 64), dim=st.integers(1, 16))
@example(num_positions=512, dim=768)  # BERT-sized, as DistilBERT builds it
def test_sinusoids_are_transformers_create_sinusoidal_embeddings(create, num_positions, dim):
    with float64_tables():
        theirs = create(num_positions, dim, torch.empty(num_positions, dim, dtype=F64))
    ours = sinusoidal_positions(num_positions, dim, dtype=F64)
    torch.testing.assert_close(ours, theirs, **EXACT)


@SINUSOIDS
def test_sinusoids_round_as_transformers_float32_table(create):
    theirs = create(100, 10, torch.empty(100, 10))  # torch.FloatTensor: float32
    torch.testing.assert_close(sinusoidal_positions(100, 10), theirs, **FLOAT32_ROUNDING)


@given(num_positions=st.integers(1, 64), dim=st.integers(1, 16))
def test_marians_table_is_the_same_numbers_every_sine_first(num_positions, dim):
    marian = MarianSinusoidalPositionalEmbedding(num_positions, dim).to(F64)
    with float64_tables():
        theirs = marian.create_weight()
    ours = sinusoidal_positions(num_positions, dim, dtype=F64)
    half_split = torch.cat((ours[:, 0::2], ours[:, 1::2]), dim=-1)
    torch.testing.assert_close(half_split, theirs, **EXACT)


@given(
    half=st.integers(1, 8),
    first=st.integers(0, 200),
    second=st.integers(0, 200),
    shift=st.integers(0, 200),
)
def test_the_dot_product_of_two_positions_depends_only_on_their_distance(
    half, first, second, shift
):
    """Row p . row q = sum over pairs of cos((p - q) * speed): a relative quantity."""
    table = sinusoidal_positions(401 + 1, 2 * half, dtype=F64)
    moved = table[first + shift] @ table[second + shift]
    torch.testing.assert_close(table[first] @ table[second], moved, **EXACT)


# -- ALiBi ----------------------------------------------------------------------------------

HEAD_COUNTS = list(range(1, 130))  # powers of two and the rest, up to past BLOOM's 112


def test_slopes_are_blooms_for_every_head_count():
    for num_heads in HEAD_COUNTS:
        with float64_alibi():
            theirs = modeling_bloom._get_alibi_slopes(num_heads, torch.device("cpu"))
        torch.testing.assert_close(alibi_slopes(num_heads, dtype=F64), theirs, **EXACT)


def test_slopes_round_as_blooms_float32_ones():
    """Exactly for up to 8 heads, whose slopes are powers of two with whole exponents;
    at float32's rounding beyond, where BLOOM's float32 base is rounded."""
    for num_heads in HEAD_COUNTS:
        theirs = modeling_bloom._get_alibi_slopes(num_heads, torch.device("cpu"))
        ours = alibi_slopes(num_heads, dtype=torch.float32)
        if num_heads <= 8:
            assert torch.equal(ours, theirs), num_heads
        torch.testing.assert_close(ours, theirs, **FLOAT32_ROUNDING)


@given(
    num_heads=st.integers(1, 20),
    num_queries=st.integers(1, 6),
    extra_keys=st.integers(0, 6),
)
def test_blooms_key_only_bias_differs_by_a_constant_per_query(num_heads, num_queries, extra_keys):
    """BLOOM adds slope * j (build_alibi_tensor); we add -slope * (i - j): for each query
    the two differ by slope * i, whatever the key."""
    num_keys = num_queries + extra_keys
    with float64_alibi():
        theirs = build_alibi_tensor(torch.ones(2, num_keys), num_heads, F64)
    theirs = theirs.view(2, num_heads, 1, num_keys)  # (batch, heads, 1, keys)
    ours = alibi_bias(num_heads, num_queries, num_keys, dtype=F64)
    positions = torch.arange(num_keys - num_queries, num_keys, dtype=F64)
    per_query = alibi_slopes(num_heads, dtype=F64)[:, None, None] * positions[:, None]
    torch.testing.assert_close(
        (ours + per_query).expand(2, -1, -1, -1), theirs.expand(-1, -1, num_queries, -1), **EXACT
    )


@given(
    num_heads=st.integers(1, 12),
    num_queries=st.integers(1, 6),
    extra_keys=st.integers(0, 6),
    causal=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_blooms_bias_gives_the_same_weights_under_the_same_mask(
    num_heads, num_queries, extra_keys, causal, seed
):
    num_keys = num_queries + extra_keys
    q, k = randn(seed, 2, num_heads, num_queries, 4), randn(seed + 1, 2, num_heads, num_keys, 4)
    with float64_alibi():
        blooms = build_alibi_tensor(torch.ones(2, num_keys), num_heads, F64)
    blooms = blooms.view(2, num_heads, 1, num_keys)
    allowed = causal_mask(num_queries, num_keys) if causal else None
    eye = torch.eye(num_keys, dtype=F64).expand(2, num_heads, -1, -1)  # values: the weights
    ours = attend(
        q, k, eye, allowed=allowed, bias=alibi_bias(num_heads, num_queries, num_keys, dtype=F64)
    )
    torch.testing.assert_close(ours, attend(q, k, eye, allowed=allowed, bias=blooms), **EXACT)


@given(
    num_heads=st.integers(1, 6),
    num_queries=st.integers(1, 5),
    extra_keys=st.integers(0, 5),
    shift=st.floats(-50, 50),
    seed=st.integers(0, 2**16),
)
def test_alibis_weights_are_unchanged_by_a_constant_added_to_every_keys_bias(
    num_heads, num_queries, extra_keys, shift, seed
):
    num_keys = num_queries + extra_keys
    q, k = randn(seed, 1, num_heads, num_queries, 3), randn(seed + 1, 1, num_heads, num_keys, 3)
    v = randn(seed + 2, 1, num_heads, num_keys, 2)
    bias = alibi_bias(num_heads, num_queries, num_keys, dtype=F64)
    allowed = causal_mask(num_queries, num_keys)
    moved = attend(q, k, v, allowed=allowed, bias=bias + shift)
    torch.testing.assert_close(moved, attend(q, k, v, allowed=allowed, bias=bias), **EXACT)


@pytest.mark.parametrize("num_heads", [3, 4])  # a head count no power of two, and one
def test_blooms_attention_layer_is_attend_with_the_alibi_bias(num_heads):
    """BloomAttention (eager, float64 softmax) on a causal sequence is attend(...,
    bias=alibi_bias) over its own queries, keys and values, then its output projection."""
    config = BloomConfig(hidden_size=4 * num_heads, n_head=num_heads, n_layer=1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(num_heads)
        theirs = BloomAttention(config, layer_idx=0).to(F64).eval()
    x = randn(5, 2, 6, config.hidden_size)
    future = ~causal_mask(6)
    mask = torch.zeros(2, 1, 6, 6, dtype=F64).masked_fill(future, float("-inf"))
    with float64_alibi(), mock.patch.object(modeling_bloom.F, "softmax", _keep_float64_softmax):
        alibi = build_alibi_tensor(torch.ones(2, 6), num_heads, F64)
        expected, _ = theirs(x, torch.zeros_like(x), alibi, mask)
    q, k, v = theirs._reshape(theirs.query_key_value(x))  # (batch, heads, tokens, head_dim)
    context = attend(q, k, v, causal=True, bias=alibi_bias(num_heads, 6, 6, dtype=F64))
    ours = theirs.dense(context.transpose(1, 2).reshape(2, 6, config.hidden_size))
    torch.testing.assert_close(ours, expected, **EXACT)


_softmax = torch.nn.functional.softmax


def _keep_float64_softmax(x, dim=None, *args, dtype=None, **kwargs):
    """BLOOM's softmax with ``dtype=torch.float32``, kept in float64 for a float64 input."""
    if dtype == torch.float32 and x.dtype == F64:
        dtype = F64
    return _softmax(x, dim, *args, dtype=dtype, **kwargs)


def test_the_bias_is_the_distance_penalty_on_the_keys_a_causal_mask_keeps():
    """-slope * |i - j| at and before the query; after it, a bonus of slope * (j - i)."""
    bias = alibi_bias(4, 3, 7, dtype=F64)  # queries at positions 4, 5 and 6
    distance = (torch.arange(4, 7)[:, None] - torch.arange(7)).to(F64)  # i - j
    penalty = -alibi_slopes(4, dtype=F64)[:, None, None] * distance.abs()
    kept = causal_mask(3, 7)
    assert torch.equal(bias[:, kept], penalty[:, kept])
    assert (bias[:, ~kept] > 0).all()


# -- T5's relative position bias -------------------------------------------------------------


@st.composite
def bucket_settings(draw: st.DrawFn) -> dict:
    bidirectional = draw(st.booleans())
    num_buckets = draw(st.integers(4 if bidirectional else 2, 64))
    exact = (num_buckets // 2 if bidirectional else num_buckets) // 2
    max_distance = draw(st.integers(exact + 1, 300))
    return {
        "bidirectional": bidirectional,
        "num_buckets": num_buckets,
        "max_distance": max_distance,
    }


T5_DEFAULTS = {"num_buckets": 32, "max_distance": 128}
#: Settings where float64 puts some distance one bucket off T5's float32 (found by search).
FLOAT32_EDGE = {"bidirectional": True, "num_buckets": 18, "max_distance": 128}


@given(settings=bucket_settings())
@example(settings={"bidirectional": True, **T5_DEFAULTS})
@example(settings={"bidirectional": False, **T5_DEFAULTS})
@example(settings=FLOAT32_EDGE)
def test_buckets_are_t5s(settings):
    relative = torch.arange(-3 * settings["max_distance"], 3 * settings["max_distance"] + 1)
    theirs = T5Attention._relative_position_bucket(relative, **settings)
    ours = relative_position_bucket(relative, **settings)
    assert ours.dtype == torch.int64
    assert torch.equal(ours, theirs)


def test_buckets_take_their_logarithm_in_float32_as_t5_does():
    """At a bucket's edge, float64 would say 5 where T5 says 6: 4 + log(16 / 4) /
    log(128 / 4) * 5 is 6 on paper and 5.999... in float64."""
    sixteen_back = torch.tensor([-16])
    assert relative_position_bucket(sixteen_back, **FLOAT32_EDGE).item() == 6


@given(settings=bucket_settings())
def test_buckets_grow_with_distance(settings):
    """Looking back, and (bidirectional) looking ahead, a farther key never gets a
    smaller bucket; keys from max_distance on share the last one."""
    distance = torch.arange(0, 3 * settings["max_distance"])
    back = relative_position_bucket(-distance, **settings)
    assert (back.diff() >= 0).all()
    assert (back[settings["max_distance"] :] == back[-1]).all()
    assert back.min() >= 0 and back.max() < settings["num_buckets"]
    ahead = relative_position_bucket(distance[1:], **settings)
    assert (ahead.diff() >= 0).all()


@given(settings=bucket_settings().filter(lambda s: s["bidirectional"]))
def test_bidirectional_buckets_ahead_are_those_behind_moved_up_by_half(settings):
    """T5's symmetry: a key d >= 1 tokens ahead takes the bucket of the key d tokens
    back plus num_buckets // 2; distance 0 takes bucket 0, so bucket num_buckets // 2,
    which only distance 0 would reach from ahead, is never used."""
    half = settings["num_buckets"] // 2
    distance = torch.arange(1, 3 * settings["max_distance"])
    ahead = relative_position_bucket(distance, **settings)
    back = relative_position_bucket(-distance, **settings)
    assert torch.equal(ahead, back + half)
    everywhere = relative_position_bucket(torch.arange(-500, 501), **settings)
    assert relative_position_bucket(torch.tensor([0]), **settings).item() == 0
    assert half not in everywhere.tolist()


@given(settings=bucket_settings().filter(lambda s: not s["bidirectional"]))
def test_the_decoders_buckets_put_every_key_ahead_with_distance_zero(settings):
    ahead = relative_position_bucket(torch.arange(0, 50), **settings)
    assert (ahead == 0).all()


def t5_attention(settings: dict, *, num_heads: int = 3, seed: int = 0) -> T5Attention:
    config = T5Config(
        d_model=8,
        d_kv=2,
        num_heads=num_heads,
        relative_attention_num_buckets=settings["num_buckets"],
        relative_attention_max_distance=settings["max_distance"],
        is_decoder=not settings["bidirectional"],
        dropout_rate=0.0,
    )
    config._attn_implementation = "eager"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return T5Attention(config, has_relative_attention_bias=True, layer_idx=0).to(F64).eval()


def bias_like(theirs: T5Attention, settings: dict) -> RelativePositionBias:
    """Our bias, loaded from T5's state dict by the table's name."""
    ours = RelativePositionBias(theirs.n_heads, **settings).to(F64)
    state = {
        name: value
        for name, value in theirs.state_dict().items()
        if name.startswith("relative_attention_bias.")
    }
    ours.load_state_dict(state)  # strict: the names match
    return ours


@given(
    settings=bucket_settings(),
    num_queries=st.integers(1, 8),
    extra_keys=st.integers(0, 200),
    seed=st.integers(0, 2**16),
)
def test_the_bias_is_t5s_compute_bias(settings, num_queries, extra_keys, seed):
    """Queries at the end of the keys: T5's compute_bias with past_seen_tokens, the
    cached tokens before them (0 for the encoder's whole sequence)."""
    theirs = t5_attention(settings, seed=seed)
    ours = bias_like(theirs, settings)
    num_keys = num_queries + extra_keys
    expected = theirs.compute_bias(num_queries, num_keys, past_seen_tokens=extra_keys)
    torch.testing.assert_close(ours(num_queries, num_keys), expected[0], **EXACT)


@pytest.mark.parametrize("bidirectional", [True, False], ids=["encoder", "decoder"])
def test_t5s_attention_is_attend_with_the_bias_and_no_scale(bidirectional):
    """T5Attention (eager) on six tokens is attend(..., bias=RelativePositionBias(...),
    scale=1.0), causal in the decoder, then its output projection."""
    settings = {"bidirectional": bidirectional, **T5_DEFAULTS}
    theirs = t5_attention(settings, num_heads=4, seed=1)
    x = randn(2, 2, 6, 8)
    mask = None
    if not bidirectional:
        mask = torch.zeros(2, 1, 6, 6, dtype=F64).masked_fill(~causal_mask(6), float("-inf"))
    expected = theirs(x, mask=mask)[0]
    q, k, v = (
        layer(x).view(2, 6, 4, 2).transpose(1, 2) for layer in (theirs.q, theirs.k, theirs.v)
    )
    bias = bias_like(theirs, settings)(6, 6)
    context = attend(q, k, v, causal=not bidirectional, scale=1.0, bias=bias)
    ours = theirs.o(context.transpose(1, 2).reshape(2, 6, 8))
    torch.testing.assert_close(ours, expected, **EXACT)


def test_the_bias_is_in_the_tables_dtype_and_its_repr_says_its_settings():
    bias = RelativePositionBias(2, bidirectional=True, num_buckets=8, max_distance=20)
    assert bias(3, 4).dtype == torch.get_default_dtype()
    assert bias.to(F64)(3, 4).dtype == F64
    assert "num_heads=2, bidirectional=True, num_buckets=8, max_distance=20" in repr(bias)


# -- what each function refuses ---------------------------------------------------------------

BAD = [
    (
        lambda: sinusoidal_positions(0, 4),
        ValueError,
        "sinusoidal_positions: num_positions must be at least 1, got 0",
    ),
    (
        lambda: sinusoidal_positions(4, 2.0),
        TypeError,
        "sinusoidal_positions: dim must be a positive integer, got 2.0",
    ),
    (
        lambda: sinusoidal_positions(4, 4, base=1),
        ValueError,
        "sinusoidal_positions: base must be a finite number greater than 1, got 1.0",
    ),
    (
        lambda: sinusoidal_positions(4, 4, base="1e4"),
        TypeError,
        "sinusoidal_positions: base must be a number greater than 1, got '1e4'",
    ),
    (
        lambda: sinusoidal_positions(4, 4, dtype=torch.int64),
        ValueError,
        "sinusoidal_positions: dtype must be a floating-point dtype, got torch.int64",
    ),
    (
        lambda: sinusoidal_positions(4, 4, dtype="float64"),
        TypeError,
        "sinusoidal_positions: dtype must be a torch.dtype",
    ),
    (lambda: alibi_slopes(0), ValueError, "alibi_slopes: num_heads must be at least 1, got 0"),
    (
        lambda: alibi_slopes(True),
        TypeError,
        "alibi_slopes: num_heads must be a positive integer, got the boolean True",
    ),
    (
        lambda: alibi_bias(2, 4, 3),
        ValueError,
        "alibi_bias: the queries are the last num_queries of num_keys tokens, so num_queries "
        "must be at most num_keys, got num_queries=4 and num_keys=3",
    ),
    (lambda: alibi_bias(0, 1, 1), ValueError, "alibi_bias: num_heads must be at least 1, got 0"),
    (
        lambda: alibi_bias(2, 1.5, 3),
        TypeError,
        "alibi_bias: num_queries must be a positive integer, got 1.5",
    ),
    (
        lambda: relative_position_bucket([-1, 0], bidirectional=True),
        TypeError,
        "relative_position_bucket: relative_position must be a torch.Tensor of integers",
    ),
    (
        lambda: relative_position_bucket(torch.tensor([-1.0]), bidirectional=True),
        ValueError,
        "relative_position_bucket: relative_position must hold integers (key position minus "
        "query position), got dtype torch.float32",
    ),
    (
        lambda: relative_position_bucket(torch.tensor([-1]), bidirectional=1),
        TypeError,
        "relative_position_bucket: bidirectional must be True or False",
    ),
    (
        lambda: relative_position_bucket(torch.tensor([-1])),
        TypeError,
        "relative_position_bucket() missing 1 required keyword-only argument: 'bidirectional'",
    ),
    (
        lambda: relative_position_bucket(torch.tensor([-1]), bidirectional=True, num_buckets=3),
        ValueError,
        "relative_position_bucket: num_buckets must be at least 4 with bidirectional=True",
    ),
    (
        lambda: relative_position_bucket(
            torch.tensor([-1]), bidirectional=False, num_buckets=32, max_distance=16
        ),
        ValueError,
        "relative_position_bucket: max_distance must be greater than the 16 distances that "
        "get a bucket each",
    ),
    (
        lambda: RelativePositionBias(0, bidirectional=True),
        ValueError,
        "RelativePositionBias: num_heads must be at least 1, got 0",
    ),
    (
        lambda: RelativePositionBias(4, bidirectional=False, num_buckets=1),
        ValueError,
        "RelativePositionBias: num_buckets must be at least 2 with bidirectional=False",
    ),
    (
        lambda: RelativePositionBias(4, bidirectional="yes"),
        TypeError,
        "RelativePositionBias: bidirectional must be True or False",
    ),
    (
        lambda: RelativePositionBias(4, bidirectional=True)(5, 2),
        ValueError,
        "RelativePositionBias: the queries are the last num_queries of num_keys tokens",
    ),
    (
        lambda: RelativePositionBias(4, bidirectional=True)(0, 2),
        ValueError,
        "RelativePositionBias: num_queries must be at least 1, got 0",
    ),
]


@pytest.mark.parametrize(
    ("call", "error", "message"), BAD, ids=[m.split(",")[0] for _, _, m in BAD]
)
def test_bad_arguments_say_what_was_expected_and_got(call, error, message):
    with expect(message, error):
        call()
