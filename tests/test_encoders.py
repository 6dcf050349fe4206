"""Bidirectional encoder attention from the package's pieces, against transformers.

An encoder's self-attention is a decoder's without the causal mask: the package's
:func:`attend` with ``allowed=`` a padding mask of the keys reproduces
``BertSelfAttention`` given BERT's weights and ``attention_mask``, and a
:class:`CrossAttention` of a sequence with itself reproduces it followed by BERT's
output projection. ModernBERT's layers alternate global attention with local
attention in a window on both sides of each query
(``sliding_window_mask(..., causal=False)``), with RoPE of one base in each kind
(:class:`Rotary`); ``ModernBertAttention`` is checked with the masks ModernBertModel
builds, which are compared with the package's.

Tolerance: ``hf_models.EXACT`` (rtol 1e-10, atol 1e-12) in float64, with the sdpa
kernel (which keeps float64). ModernBERT's ``apply_rotary_pos_emb`` rotates in float32
whatever the input; :func:`float64_rotation` keeps float64 (the same formula), and one
test compares with it untouched at ``FLOAT32_STEP``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from unittest import mock

import pytest
import torch
from hf_models import EXACT, FLOAT32_STEP, rope_cos_sin
from hypothesis import given
from hypothesis import strategies as st
from transformers import BertConfig, ModernBertConfig
from transformers.masking_utils import (
    create_bidirectional_mask,
    create_bidirectional_sliding_window_mask,
)
from transformers.models.bert.modeling_bert import BertAttention
from transformers.models.modernbert import modeling_modernbert
from transformers.models.modernbert.modeling_modernbert import ModernBertAttention

from attention import CrossAttention, Rotary, attend, padding_mask, sliding_window_mask

pytestmark = pytest.mark.usefixtures("single_thread")

F64 = torch.float64

SIZES = st.fixed_dictionaries(
    {
        "num_heads": st.integers(1, 3),
        "head_dim": st.sampled_from([2, 4]),
        "batch": st.integers(1, 3),
        "num_tokens": st.integers(1, 8),
        "seed": st.integers(0, 2**16),
    }
)


def draw_batch(sizes) -> tuple[torch.Tensor, torch.Tensor]:
    """A float64 input and its real lengths (at least one per sequence, one full)."""
    generator = torch.Generator().manual_seed(sizes["seed"])
    d, n = sizes["num_heads"] * sizes["head_dim"], sizes["num_tokens"]
    x = torch.randn(sizes["batch"], n, d, generator=generator, dtype=F64)
    lengths = torch.randint(1, n + 1, (sizes["batch"],), generator=generator)
    lengths[0] = n
    return x, lengths


def heads(projected: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(batch, tokens, num_heads * head_dim) -> (batch, num_heads, tokens, head_dim)."""
    batch, tokens, _ = projected.shape
    return projected.view(batch, tokens, num_heads, -1).transpose(1, 2)


def merge(out: torch.Tensor) -> torch.Tensor:
    """(batch, num_heads, tokens, head_dim) -> (batch, tokens, num_heads * head_dim)."""
    return out.transpose(1, 2).flatten(2)


# -- BERT -------------------------------------------------------------------------------


def bert_attention(sizes) -> BertAttention:
    """BERT's attention block (self-attention, then the output's dense) at random weights."""
    config = BertConfig(
        hidden_size=sizes["num_heads"] * sizes["head_dim"],
        num_attention_heads=sizes["num_heads"],
        attention_probs_dropout_prob=0.0,
        hidden_dropout_prob=0.0,
        attn_implementation="sdpa",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(sizes["seed"])
        block = BertAttention(config).to(F64).eval()
        for p in block.parameters():  # biases too, which BertAttention starts at 0
            torch.nn.init.normal_(p)
    return block


def bert_mask(block: BertAttention, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The mask BertModel hands its layers for ``attention_mask`` (1 real, 0 padding)."""
    attention_mask = padding_mask(lengths, x.shape[1]).long()
    return create_bidirectional_mask(
        block.self.config, x, attention_mask, allow_is_bidirectional_skip=False
    )


@given(sizes=SIZES)
def test_bert_self_attention_is_attend_with_a_padding_mask(sizes):
    block = bert_attention(sizes)
    x, lengths = draw_batch(sizes)
    theirs = block.self
    mask = bert_mask(block, x, lengths)
    allowed = padding_mask(lengths, x.shape[1])[:, None, None, :]  # (batch, 1, 1, keys)
    assert torch.equal(mask, allowed.expand_as(mask))
    expected, _ = theirs(x, attention_mask=mask)
    q, k, v = (
        heads(layer(x), sizes["num_heads"]) for layer in (theirs.query, theirs.key, theirs.value)
    )
    torch.testing.assert_close(merge(attend(q, k, v, allowed=allowed)), expected, **EXACT)


@given(sizes=SIZES)
def test_bert_self_attention_then_dense_is_cross_attention_of_x_with_itself(sizes):
    """No causal mask: attention of the tokens over themselves, context = x."""
    block = bert_attention(sizes)
    x, lengths = draw_batch(sizes)
    d = x.shape[-1]
    ours = CrossAttention(d, d, d, num_heads=sizes["num_heads"], qkv_bias=True).to(F64)
    with torch.no_grad():
        pairs = (
            (ours.W_query, block.self.query),
            (ours.W_key, block.self.key),
            (ours.W_value, block.self.value),
            (ours.out_proj, block.output.dense),
        )
        for mine, theirs in pairs:
            mine.weight.copy_(theirs.weight)
            mine.bias.copy_(theirs.bias)
    attended, _ = block.self(x, attention_mask=bert_mask(block, x, lengths))
    allowed = padding_mask(lengths, x.shape[1])[:, None, None, :]
    torch.testing.assert_close(ours(x, x, allowed=allowed), block.output.dense(attended), **EXACT)


@given(sizes=SIZES)
def test_a_padded_sentence_gets_what_it_gets_alone(sizes):
    """Bidirectional: a real token's output depends on every real token, before or after
    it, and on no padding."""
    block = bert_attention(sizes)
    x, lengths = draw_batch(sizes)
    mask = bert_mask(block, x, lengths)
    batched, _ = block.self(x, attention_mask=mask)
    for b, n in enumerate(lengths.tolist()):
        alone, _ = block.self(x[b : b + 1, :n])
        torch.testing.assert_close(batched[b : b + 1, :n], alone, **EXACT)


# -- ModernBERT -------------------------------------------------------------------------

MODERNBERT = SIZES.flatmap(
    lambda sizes: st.fixed_dictionaries({"half": st.integers(1, 4)}).map(lambda h: sizes | h)
)
BASES = {"full_attention": 160_000.0, "sliding_attention": 10_000.0}  # theirs, as defaults


def modernbert_config(sizes) -> ModernBertConfig:
    """Two layers: layer 0 global (full), layer 1 local, as global_attn_every_n_layers=3."""
    return ModernBertConfig(
        hidden_size=sizes["num_heads"] * sizes["head_dim"],
        num_attention_heads=sizes["num_heads"],
        num_hidden_layers=2,
        local_attention=2 * sizes["half"],
        attention_bias=True,
        attn_implementation="sdpa",
    )


def modernbert_attention(sizes, layer_idx: int) -> ModernBertAttention:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(sizes["seed"])
        theirs = ModernBertAttention(modernbert_config(sizes), layer_idx).to(F64).eval()
        for p in theirs.parameters():
            torch.nn.init.normal_(p)
    return theirs


def rotate_in_float64(q, k, cos, sin, unsqueeze_dim=1):
    """ModernBERT's apply_rotary_pos_emb without its float32 round trip."""
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    rotate_half = modeling_modernbert.rotate_half
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


@contextlib.contextmanager
def float64_rotation() -> Iterator[None]:
    with mock.patch.object(modeling_modernbert, "apply_rotary_pos_emb", rotate_in_float64):
        yield


def ours_modernbert(theirs: ModernBertAttention, x, allowed, base) -> torch.Tensor:
    """The package's pieces: split Wqkv, Rotary of the layer's base, attend, Wo."""
    num_heads = theirs.config.num_attention_heads
    q, k, v = (heads(t, num_heads) for t in theirs.Wqkv(x).chunk(3, dim=-1))
    rotary = Rotary(theirs.head_dim, base)
    out = attend(rotary(q), rotary(k), v, allowed=allowed)
    return theirs.Wo(merge(out))


@pytest.mark.parametrize("layer_idx", [0, 1], ids=["global", "local"])
@given(sizes=MODERNBERT)
def test_modernbert_global_and_local_layers_are_attend_with_their_masks(sizes, layer_idx):
    theirs = modernbert_attention(sizes, layer_idx)
    kind = theirs.config.layer_types[layer_idx]
    assert kind == ("full_attention", "sliding_attention")[layer_idx]
    x, lengths = draw_batch(sizes)
    n = x.shape[1]
    attention_mask = padding_mask(lengths, n).long()
    make = create_bidirectional_mask if layer_idx == 0 else create_bidirectional_sliding_window_mask
    mask = make(theirs.config, x, attention_mask, allow_is_bidirectional_skip=False)
    allowed = padding_mask(lengths, n)[:, None, None, :]  # (batch, 1, 1, n)
    if kind == "sliding_attention":  # local_attention // 2 on each side, and the query
        allowed = allowed & sliding_window_mask(n, sizes["half"] + 1, causal=False)
    assert torch.equal(mask, allowed.expand_as(mask))
    base = theirs.config.rope_parameters[kind]["rope_theta"]
    assert base == BASES[kind]
    cos_sin = rope_cos_sin(torch.arange(n).expand(x.shape[0], -1), theirs.head_dim, base)
    with float64_rotation():
        expected, _ = theirs(x, position_embeddings=cos_sin, attention_mask=mask)
    torch.testing.assert_close(ours_modernbert(theirs, x, allowed, base), expected, **EXACT)


@given(sizes=MODERNBERT)
def test_modernbert_local_layer_untouched_at_float32_precision(sizes):
    theirs = modernbert_attention(sizes, 1)
    x, lengths = draw_batch(sizes)
    n = x.shape[1]
    attention_mask = padding_mask(lengths, n).long()
    mask = create_bidirectional_sliding_window_mask(
        theirs.config, x, attention_mask, allow_is_bidirectional_skip=False
    )
    base = BASES["sliding_attention"]
    cos_sin = rope_cos_sin(torch.arange(n).expand(x.shape[0], -1), theirs.head_dim, base)
    expected, _ = theirs(x, position_embeddings=cos_sin, attention_mask=mask)
    allowed = padding_mask(lengths, n)[:, None, None, :]
    allowed = allowed & sliding_window_mask(n, sizes["half"] + 1, causal=False)
    torch.testing.assert_close(ours_modernbert(theirs, x, allowed, base), expected, **FLOAT32_STEP)


def test_a_local_query_sees_its_window_on_both_sides_and_not_beyond():
    """Moving a key outside a local query's window changes nothing for that query."""
    sizes = {"num_heads": 2, "head_dim": 4, "batch": 1, "num_tokens": 8, "seed": 3, "half": 2}
    theirs = modernbert_attention(sizes, 1)
    x, _ = draw_batch(sizes)
    allowed = sliding_window_mask(8, 3, causal=False)  # |i - j| <= 2
    base = BASES["sliding_attention"]
    before = ours_modernbert(theirs, x, allowed, base)
    changed = x.clone()
    changed[:, 7] += 1.0  # token 7: outside the windows of queries 0 to 4
    after = ours_modernbert(theirs, changed, allowed, base)
    torch.testing.assert_close(after[:, :5], before[:, :5], **EXACT)
    assert not torch.allclose(after[:, 5:], before[:, 5:])  # queries 5, 6, 7 see it
