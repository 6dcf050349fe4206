"""topk_sparse_attention, LightningIndexer, SparseLatentAttention: properties, a dense
reference, transformers' DeepSeek-V3.2.

Tolerances:

* EXACT (rtol 1e-10, atol 1e-12) between float64 computations: against a dense
  reference that masks the keys not chosen, against ``attend``, and against
  ``transformers``' ``DeepseekV32Indexer`` given float64 cos/sin with its float32 casts
  (``Tensor.float()``) kept float64 for the call (``float64_casts``).
* FLOAT32_STEP (1e-5) against ``DeepseekV32Indexer`` as shipped, with its own
  ``DeepseekV32RotaryEmbedding``: the angles, the scores and the head weights are
  float32 there.
* SparseLatentAttention against ``DeepseekV32Attention`` (sdpa and eager): EXACT with
  float64 cos/sin, float64 RMS norms (``float64_norms``), casts and softmax, for a
  full pass and for a prefill then one-token steps with its ``DynamicCache``;
  FLOAT32_STEP as shipped, on fixed seeds (a float32 near-tie could pick another key),
  with plain RoPE and with YaRN (DeepSeek's, and an attention factor alone).

The indexer returns only the chosen keys' indices; its scores are read from the tensor
it calls ``topk`` on (``captured_topk``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from unittest import mock

import pytest
import torch
from hf_models import (
    EXACT,
    FLOAT32_STEP,
    causal_4d,
    deepseek_attention,
    float64_norms,
    float64_softmax,
    rope_cos_sin,
)
from hypothesis import assume, given
from hypothesis import strategies as st
from torch.nn import functional as F
from transformers import DynamicCache
from transformers.models.deepseek_v32.configuration_deepseek_v32 import DeepseekV32Config
from transformers.models.deepseek_v32.modeling_deepseek_v32 import (
    DeepseekV32Attention,
    DeepseekV32Indexer,
    DeepseekV32RotaryEmbedding,
)

from attention import (
    GroupedQueryAttention,
    KVCache,
    LatentCache,
    LightningIndexer,
    Rotary,
    SparseLatentAttention,
    SparseLatentCache,
    attend,
    causal_mask,
    indexer_kl_loss,
    topk_sparse_attention,
)
from attention.sparse import _attend_chosen, _attend_gathered, _chosen, _pick

pytestmark = pytest.mark.usefixtures("single_thread")

F64 = torch.float64


# --- topk_sparse_attention ---------------------------------------------------------------


@st.composite
def layouts(draw: st.DrawFn) -> dict:
    num_kv_heads = draw(st.integers(1, 3))
    num_keys = draw(st.integers(1, 9))
    return {
        "batch": draw(st.integers(1, 2)),
        "num_kv_heads": num_kv_heads,
        "num_heads": num_kv_heads * draw(st.integers(1, 3)),
        "num_keys": num_keys,
        "num_queries": draw(st.integers(1, num_keys)),
        "dim": draw(st.integers(1, 5)),
        "dim_v": draw(st.integers(1, 5)),
        "seed": draw(st.integers(0, 2**16)),
    }


def tensors(layout: dict) -> tuple[torch.Tensor, ...]:
    """q, k, v and continuous index scores (no ties), float64, from the layout's seed."""
    g = torch.Generator().manual_seed(layout["seed"])
    b, n, m = layout["batch"], layout["num_queries"], layout["num_keys"]
    q = torch.randn(b, layout["num_heads"], n, layout["dim"], generator=g, dtype=F64)
    k = torch.randn(b, layout["num_kv_heads"], m, layout["dim"], generator=g, dtype=F64)
    v = torch.randn(b, layout["num_kv_heads"], m, layout["dim_v"], generator=g, dtype=F64)
    scores = torch.randn(b, n, m, generator=g, dtype=F64)
    return q, k, v, scores


def dense_reference(q, k, v, index_scores, top_k) -> torch.Tensor:
    """Query by query and head by head: sort the visible keys' scores, keep the best
    ``top_k`` finite ones, softmax over those alone."""
    batch, num_heads, num_queries, dim = q.shape
    num_kv_heads, num_keys = k.shape[1], k.shape[2]
    group = num_heads // num_kv_heads
    out = torch.zeros(batch, num_heads, num_queries, v.shape[-1], dtype=q.dtype)
    for b in range(batch):
        for i in range(num_queries):
            position = num_keys - num_queries + i
            visible = [j for j in range(position + 1) if index_scores[b, i, j] > -math.inf]
            visible.sort(key=lambda j: -index_scores[b, i, j].item())
            chosen = visible[:top_k]
            if not chosen:
                continue
            for h in range(num_heads):
                keys, values = k[b, h // group, chosen], v[b, h // group, chosen]
                logits = keys @ q[b, h, i] / math.sqrt(dim)
                weights = torch.exp(logits - logits.max())
                out[b, h, i] = (weights / weights.sum()) @ values
    return out


@given(layout=layouts(), extra=st.integers(0, 3))
def test_top_k_at_least_the_number_of_keys_is_causal_attention(layout, extra):
    q, k, v, scores = tensors(layout)
    num_queries, num_keys = layout["num_queries"], layout["num_keys"]
    expected = attend(q, k, v, allowed=causal_mask(num_queries, num_keys))
    out = topk_sparse_attention(q, k, v, scores, top_k=num_keys + extra)
    torch.testing.assert_close(out, expected, **EXACT)


@given(layout=layouts(), top_k=st.integers(1, 9))
def test_equals_a_dense_reference_that_masks_the_keys_not_chosen(layout, top_k):
    q, k, v, scores = tensors(layout)
    out = topk_sparse_attention(q, k, v, scores, top_k)
    torch.testing.assert_close(out, dense_reference(q, k, v, scores, top_k), **EXACT)


@given(layout=layouts(), top_k=st.integers(1, 9), data=st.data())
def test_minus_infinity_is_never_picked(layout, top_k, data):
    """Keys scored -inf are skipped even when that leaves fewer than top_k; none: zeros."""
    q, k, v, scores = tensors(layout)
    g = torch.Generator().manual_seed(data.draw(st.integers(0, 2**16)))
    never = torch.rand(scores.shape, generator=g) < data.draw(st.sampled_from([0.3, 0.7, 1.0]))
    scores = scores.masked_fill(never, -math.inf)
    out = topk_sparse_attention(q, k, v, scores, top_k)
    torch.testing.assert_close(out, dense_reference(q, k, v, scores, top_k), **EXACT)
    # Keys scored -inf by every query are never read: changing them changes nothing.
    unread = never.all(dim=1)[:, None, :, None]  # (batch, 1, num_keys, 1)
    k2, v2 = k.masked_fill(unread, 100.0), v.masked_fill(unread, 100.0)
    torch.testing.assert_close(topk_sparse_attention(q, k2, v2, scores, top_k), out, **EXACT)
    # A query whose visible keys are all -inf reads nothing: zeros.
    visible = causal_mask(layout["num_queries"], layout["num_keys"])
    nothing = (never | ~visible).all(dim=-1)  # (batch, num_queries)
    assert out.transpose(1, 2)[nothing].eq(0).all()


@pytest.mark.parametrize("num_keys", [4, 8], ids=["masked", "gathered"])
def test_a_query_with_every_key_at_minus_infinity_gets_zeros_and_no_nan_gradient(num_keys):
    """3 queries picking 2 keys each: among 4 keys a mask, among 8 the gathered keys."""
    q, k, v, scores = tensors(
        {"batch": 1, "num_heads": 2, "num_kv_heads": 1, "num_queries": 3, "num_keys": num_keys}
        | {"dim": 3, "dim_v": 2, "seed": 0}
    )
    scores[0, 1] = -math.inf  # the second query may pick nothing
    q.requires_grad_(True)
    out = topk_sparse_attention(q, k, v, scores, top_k=2)
    assert out[0, :, 1].eq(0).all() and not out[0, :, [0, 2]].eq(0).all()
    out.sum().backward()
    assert torch.isfinite(q.grad).all() and q.grad[0, :, 1].eq(0).all()


def test_a_decoding_step_reads_only_its_top_k_keys():
    """One query over 64 keys: the 60 keys it does not pick may hold NaN; O(top_k) work."""
    q, k, v, scores = tensors(
        {"batch": 2, "num_heads": 4, "num_kv_heads": 2, "num_queries": 1, "num_keys": 64}
        | {"dim": 8, "dim_v": 8, "seed": 3}
    )
    chosen = _chosen(scores, 4)[:, 0]  # (batch, num_keys)
    assert chosen.sum(dim=-1).tolist() == [4, 4]
    unread = ~chosen[:, None, :, None]
    poisoned = (k.masked_fill(unread, math.nan), v.masked_fill(unread, math.nan))
    out = topk_sparse_attention(q, *poisoned, scores, top_k=4)
    torch.testing.assert_close(out, topk_sparse_attention(q, k, v, scores, top_k=4), **EXACT)


@given(layout=layouts(), top_k=st.integers(1, 8), data=st.data())
def test_gathering_the_chosen_keys_equals_masking_the_others(layout, top_k, data):
    """The two ways topk_sparse_attention computes (gathered for few queries), for any sizes."""
    q, k, v, scores = tensors(layout)
    g = torch.Generator().manual_seed(data.draw(st.integers(0, 2**16)))
    scores = scores.masked_fill(torch.rand(scores.shape, generator=g) < 0.3, -math.inf)
    assume(layout["num_keys"] > 1)  # one key: nothing to choose
    top_k = min(top_k, layout["num_keys"] - 1)
    indices, valid = _pick(scores, top_k)
    gathered = _attend_gathered(q, k, v, indices, valid)
    torch.testing.assert_close(gathered, _attend_chosen(q, k, v, _chosen(scores, top_k)), **EXACT)
    torch.testing.assert_close(gathered, dense_reference(q, k, v, scores, top_k), **EXACT)


@given(layout=layouts(), top_k=st.integers(1, 9))
def test_query_heads_share_key_value_heads_as_repeat_interleave_does(layout, top_k):
    q, k, v, scores = tensors(layout)
    group = layout["num_heads"] // layout["num_kv_heads"]
    repeated = (k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1))
    out = topk_sparse_attention(q, k, v, scores, top_k)
    torch.testing.assert_close(out, topk_sparse_attention(q, *repeated, scores, top_k), **EXACT)


@given(layout=layouts(), top_k=st.integers(1, 9))
def test_decoding_the_last_queries_equals_the_full_pass_rows(layout, top_k):
    """Queries aligned to the end of the keys: the last n queries of a full pass, alone."""
    full = dict(layout, num_queries=layout["num_keys"])
    q, k, v, scores = tensors(full)
    n = layout["num_queries"]
    out = topk_sparse_attention(q, k, v, scores, top_k)
    last = topk_sparse_attention(q[:, :, -n:], k, v, scores[:, -n:], top_k)
    torch.testing.assert_close(last, out[:, :, -n:], **EXACT)


def test_a_query_sees_only_the_keys_up_to_its_position():
    """The index scores of future keys are ignored, however high."""
    q, k, v, scores = tensors(
        {"batch": 1, "num_heads": 1, "num_kv_heads": 1, "num_queries": 2, "num_keys": 5}
        | {"dim": 4, "dim_v": 3, "seed": 1}
    )
    future = scores.clone()
    future[0, 0, 4] = 1e9  # the first query is key 3: key 4 is its future
    out = topk_sparse_attention(q, k, v, future, top_k=2)
    torch.testing.assert_close(out[:, :, 0], topk_sparse_attention(q, k, v, scores, 2)[:, :, 0])
    # The last query is the last key and sees every key, including the one scored 1e9.
    best = future[0, 1, :].topk(2).indices.tolist()
    expected = attend(q[:, :, 1:], k[:, :, best], v[:, :, best])
    torch.testing.assert_close(out[:, :, 1:], expected, **EXACT)


def _bad(**changes) -> dict:
    q, k, v, scores = tensors(
        {"batch": 2, "num_heads": 4, "num_kv_heads": 2, "num_queries": 3, "num_keys": 5}
        | {"dim": 4, "dim_v": 3, "seed": 2}
    )
    return {"q": q, "k": k, "v": v, "index_scores": scores, "top_k": 2} | changes


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (_bad(top_k=0), r"top_k must be at least 1, got 0"),
        (_bad(top_k=-3), r"top_k must be at least 1, got -3"),
        (
            _bad(index_scores=torch.zeros(2, 5, 5, dtype=F64)),
            r"index_scores must have shape \(batch, num_queries, num_keys\) = \(2, 3, 5\).*"
            r"got shape \(2, 5, 5\)",
        ),
        (
            _bad(index_scores=torch.zeros(3, 5)),
            r"index_scores must have shape .* = \(2, 3, 5\).*got shape \(3, 5\)",
        ),
        (
            _bad(index_scores=torch.zeros(2, 3, 5, dtype=torch.long)),
            r"index_scores must be a floating-point tensor.*got dtype torch\.int64",
        ),
        (
            _bad(k=torch.zeros(2, 3, 5, 4, dtype=F64), v=torch.zeros(2, 3, 5, 3, dtype=F64)),
            r"heads_kv dividing heads, got q of shape \(2, 4, 3, 4\).*k of shape \(2, 3, 5, 4\)",
        ),
        (
            _bad(q=torch.zeros(2, 4, 3, 6, dtype=F64)),
            r"expected q \(batch, heads, num_queries, dim\).*got q of shape \(2, 4, 3, 6\)",
        ),
        (
            _bad(v=torch.zeros(2, 2, 4, 3, dtype=F64)),
            r"got .* v of shape \(2, 2, 4, 3\)",
        ),
        (
            _bad(q=torch.zeros(2, 4, 6, 4, dtype=F64)),
            r"num_keys must be at least num_queries, got 6 queries .* and 5 keys",
        ),
        (_bad(q=torch.zeros(4, 3, 4)), r"got q of shape \(4, 3, 4\)"),
    ],
    ids=lambda value: None,
)
def test_bad_arguments_name_the_argument_with_expected_and_given(arguments, message):
    with pytest.raises(ValueError, match=rf"^topk_sparse_attention: .*{message}"):
        topk_sparse_attention(**arguments)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (_bad(top_k=2.5), r"top_k must be a positive integer, got 2\.5"),
        (_bad(top_k=True), r"top_k must be a positive integer, got the boolean True"),
        (_bad(index_scores=[[0.0]]), r"index_scores must be a torch\.Tensor, got list"),
        (_bad(v=None), r"v must be a torch\.Tensor, got NoneType"),
    ],
    ids=lambda value: None,
)
def test_arguments_of_a_wrong_type_raise_a_type_error(arguments, message):
    with pytest.raises(TypeError, match=rf"^topk_sparse_attention: .*{message}"):
        topk_sparse_attention(**arguments)


# --- LightningIndexer against DeepseekV32Indexer ------------------------------------------


@st.composite
def indexer_layouts(draw: st.DrawFn) -> dict:
    head_dim = draw(st.integers(2, 8))
    num_tokens = draw(st.integers(1, 9))
    return {
        "hidden_size": draw(st.integers(1, 12)),
        "q_lora_rank": draw(st.integers(1, 8)),
        "index_n_heads": draw(st.integers(1, 4)),
        "index_head_dim": head_dim,
        "qk_rope_head_dim": 2 * draw(st.integers(1, head_dim // 2)),
        "index_topk": draw(st.integers(1, num_tokens + 1)),
        "rope_theta": draw(st.sampled_from([10000.0, 50.0])),
        "num_tokens": num_tokens,
        "batch": draw(st.integers(1, 2)),
        "seed": draw(st.integers(0, 2**16)),
    }


def make_indexer(layout: dict) -> LightningIndexer:
    torch.manual_seed(layout["seed"])
    indexer = LightningIndexer(
        layout["hidden_size"],
        layout["q_lora_rank"],
        num_heads=layout["index_n_heads"],
        head_dim=layout["index_head_dim"],
        qk_rope_head_dim=layout["qk_rope_head_dim"],
        rotary=Rotary(layout["qk_rope_head_dim"], layout["rope_theta"]),
    ).to(F64)
    with torch.no_grad():  # a LayerNorm that is not the identity
        indexer.k_norm.weight.normal_()
        indexer.k_norm.bias.normal_()
    return indexer


def v32_config(layout: dict, **more) -> DeepseekV32Config:
    """A config for the indexer's sizes; ``more``: the attention's (one head by default)."""
    more = {"num_attention_heads": 1, "num_key_value_heads": 1} | more
    return DeepseekV32Config(
        hidden_size=layout["hidden_size"],
        q_lora_rank=layout["q_lora_rank"],
        qk_rope_head_dim=layout["qk_rope_head_dim"],
        index_n_heads=layout["index_n_heads"],
        index_head_dim=layout["index_head_dim"],
        index_topk=layout["index_topk"],
        max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": layout["rope_theta"]},
        num_hidden_layers=1,
        **more,
    )


def v32_indexer(indexer: LightningIndexer, config: DeepseekV32Config) -> DeepseekV32Indexer:
    """transformers' indexer holding ``indexer``'s weights; the names map one to one."""
    theirs = DeepseekV32Indexer(config, layer_idx=0).to(F64).eval()
    with torch.no_grad():
        theirs.wq_b.weight.copy_(indexer.W_query.weight)
        theirs.wk.weight.copy_(indexer.W_key.weight)
        theirs.k_norm.weight.copy_(indexer.k_norm.weight)
        theirs.k_norm.bias.copy_(indexer.k_norm.bias)
        theirs.weights_proj.weight.copy_(indexer.W_weights.weight)
    assert theirs.k_norm.eps == indexer.k_norm.eps
    return theirs


@contextlib.contextmanager
def float64_casts() -> Iterator[None]:
    """Within the block, ``Tensor.float()`` leaves a float64 tensor float64.

    The indexer casts its queries, keys and head weights with ``.float()`` before
    scoring; the package's code never calls ``.float()``.
    """
    original = torch.Tensor.float

    def keep(self, *args, **kwargs):
        return self if self.dtype == F64 else original(self, *args, **kwargs)

    with mock.patch.object(torch.Tensor, "float", keep):
        yield


@contextlib.contextmanager
def captured_topk() -> Iterator[list]:
    """Record each tensor ``Tensor.topk`` is called on: the indexer's scores."""
    original, seen = torch.Tensor.topk, []

    def topk(self, *args, **kwargs):
        seen.append(self.detach().clone())
        return original(self, *args, **kwargs)

    with mock.patch.object(torch.Tensor, "topk", topk):
        yield seen


def indexer_inputs(layout: dict) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(layout["seed"] + 1)
    shape = (layout["batch"], layout["num_tokens"])
    x = torch.randn(*shape, layout["hidden_size"], generator=g, dtype=F64)
    q_latent = torch.randn(*shape, layout["q_lora_rank"], generator=g, dtype=F64)
    return x, q_latent


def their_scores(theirs, x, q_latent, cos_sin, mask) -> tuple[torch.Tensor, torch.Tensor]:
    """(scores, top-k indices) of ``DeepseekV32Indexer`` for a 3-D boolean ``mask``."""
    positions = torch.arange(x.shape[1])[None]
    with captured_topk() as seen:
        indices = theirs(x, q_latent, cos_sin, mask, positions)
    (scores,) = seen
    return scores, indices


def assert_same_selection(ours: torch.Tensor, indices: torch.Tensor, top_k: int) -> None:
    """Our chosen keys equal theirs for every query that sees at least ``top_k`` keys."""
    num_keys = ours.shape[-1]
    chosen = torch.zeros_like(ours, dtype=torch.bool).scatter(-1, indices.long(), True)
    ours_mask = _chosen(ours, top_k)  # what topk_sparse_attention attends to
    sees_enough = ours.isfinite().sum(dim=-1) >= top_k  # (batch, num_queries)
    assert sees_enough.any() or top_k > num_keys
    assert torch.equal(ours_mask[sees_enough], chosen[sees_enough])


@given(layout=indexer_layouts())
def test_indexer_scores_and_picks_equal_deepseek_v32_indexer_in_float64(layout):
    indexer = make_indexer(layout)
    theirs = v32_indexer(indexer, v32_config(layout))
    x, q_latent = indexer_inputs(layout)
    n = layout["num_tokens"]
    positions = torch.arange(n)[None]
    cos_sin = rope_cos_sin(positions, layout["qk_rope_head_dim"], layout["rope_theta"])
    mask = causal_mask(n)[None].expand(layout["batch"], n, n)
    with float64_casts():
        scores, indices = their_scores(theirs, x, q_latent, cos_sin, mask)
    ours = indexer(x, q_latent)
    assert scores.dtype == F64
    torch.testing.assert_close(ours, scores, **EXACT)  # -inf where they are -inf too
    assert_same_selection(ours, indices, layout["index_topk"])


@given(layout=indexer_layouts())
def test_indexer_equals_deepseek_v32_indexer_as_shipped(layout):
    """Their own rotary embedding and float32 scores, at float32's tolerance."""
    indexer = make_indexer(layout)
    config = v32_config(layout)
    theirs = v32_indexer(indexer, config)
    x, q_latent = indexer_inputs(layout)
    n = layout["num_tokens"]
    cos_sin = DeepseekV32RotaryEmbedding(config)(x, torch.arange(n)[None])
    mask = causal_mask(n)[None].expand(layout["batch"], n, n)
    scores, _ = their_scores(theirs, x, q_latent, cos_sin, mask)
    assert scores.dtype == torch.float32
    torch.testing.assert_close(indexer(x, q_latent), scores.to(F64), **FLOAT32_STEP)


@given(layout=indexer_layouts(), data=st.data())
def test_indexer_padding_and_cache_equal_deepseek_v32_indexer(layout, data):
    """A padding mask (their 3-D boolean one), and a prefill then steps with a cache."""
    indexer = make_indexer(layout)
    theirs = v32_indexer(indexer, v32_config(layout))
    x, q_latent = indexer_inputs(layout)
    batch, n = layout["batch"], layout["num_tokens"]
    lengths = [data.draw(st.integers(1, n)) for _ in range(batch)]
    padding = torch.arange(n)[None] < torch.tensor(lengths)[:, None]  # (batch, n)
    cos_sin = rope_cos_sin(torch.arange(n)[None], layout["qk_rope_head_dim"], layout["rope_theta"])
    with float64_casts():
        scores, _ = their_scores(theirs, x, q_latent, cos_sin, causal_mask(n) & padding[:, None])
    got = indexer(x, q_latent, allowed=padding[:, None, None, :])  # (batch, 1, 1, n)
    torch.testing.assert_close(got, scores, **EXACT)

    split = data.draw(st.integers(1, n))
    cache = KVCache()
    steps = [indexer(x[:, :split], q_latent[:, :split], cache=cache)]
    for t in range(split, n):
        steps.append(indexer(x[:, t : t + 1], q_latent[:, t : t + 1], cache=cache))
    full = indexer(x, q_latent)
    for start, step in zip([0, *range(split, n)], steps, strict=True):
        rows, num_keys = step.shape[1], step.shape[2]  # the keys seen so far
        torch.testing.assert_close(step, full[:, start : start + rows, :num_keys], **EXACT)
    assert cache.keys.shape == (batch, n, layout["index_head_dim"]) and cache.values.numel() == 0


def test_indexer_scores_are_relu_scores_weighted_per_head():
    """The formula by hand, head by head: sum_h w[s, h] * relu(q[s, h] . k[t] / sqrt(d))."""
    layout = {"hidden_size": 6, "q_lora_rank": 5, "index_n_heads": 3, "index_head_dim": 4}
    layout |= {"qk_rope_head_dim": 2, "rope_theta": 10000.0, "num_tokens": 4, "batch": 1}
    indexer = make_indexer(layout | {"seed": 3})
    x, q_latent = indexer_inputs(layout | {"seed": 3})
    with torch.no_grad():  # no rotation at position 0: score the first token alone
        q = indexer.W_query(q_latent[0, 0]).view(3, 4)
        k = indexer.k_norm(indexer.W_key(x[0, 0]))
        w = indexer.W_weights(x[0, 0]) / math.sqrt(3)
        expected = sum(w[h] * torch.relu(q[h] @ k / 2.0) for h in range(3))
    torch.testing.assert_close(indexer(x[:, :1], q_latent[:, :1])[0, 0, 0], expected, **EXACT)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        ({"num_heads": 0}, r"num_heads must be at least 1, got 0"),
        ({"qk_rope_head_dim": 3}, r"qk_rope_head_dim must be even .* got qk_rope_head_dim=3"),
        ({"qk_rope_head_dim": 10}, r"at most head_dim=8, got qk_rope_head_dim=10"),
        ({"rope_base": 1.0}, r"rope_base= is no longer taken; give rotary=Rotary\("),
        ({"rotary": Rotary(2)}, r"expected a rotary over qk_rope_head_dim=4 numbers"),
        ({"eps": 0}, r"eps must be a positive number, got 0"),
    ],
)
def test_indexer_bad_arguments(build, message):
    arguments = {"num_heads": 2, "head_dim": 8, "qk_rope_head_dim": 4} | build
    with pytest.raises(ValueError, match=rf"^(LightningIndexer: .*)?{message}"):
        LightningIndexer(6, 5, **arguments)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ({"q_latent": torch.zeros(1, 3, 4)}, r"q_latent must have shape .* = \(1, 3, 5\).*"),
        ({"q_latent": torch.zeros(1, 3, 5, dtype=F64)}, r"x's dtype torch\.float32.*float64"),
        ({"x": torch.zeros(1, 3, 7)}, r"last dimension of the input to be d_in=6, got 7"),
        (
            {"allowed": torch.ones(1, 1, 1, 4, dtype=torch.bool)},
            r"allowed broadcastable to .* = \(1, 1, 3, 3\), got shape \(1, 1, 1, 4\)",
        ),
    ],
)
def test_indexer_bad_inputs(call, message):
    indexer = LightningIndexer(6, 5, num_heads=2, head_dim=8, qk_rope_head_dim=4)
    arguments = {"x": torch.zeros(1, 3, 6), "q_latent": torch.zeros(1, 3, 5)} | call
    with pytest.raises(ValueError, match=rf"^(LightningIndexer: .*)?{message}"):
        indexer(**arguments)


def test_indexer_arguments_of_a_wrong_type_raise_a_type_error():
    sizes = {"num_heads": 2, "head_dim": 8, "qk_rope_head_dim": 4}
    with pytest.raises(TypeError, match=r"^LightningIndexer: eps must be a positive number"):
        LightningIndexer(6, 5, **sizes, eps="1e-6")
    indexer = LightningIndexer(6, 5, **sizes)
    with pytest.raises(TypeError, match=r"^LightningIndexer: cache must be a KVCache .* got dict"):
        indexer(torch.zeros(1, 3, 6), torch.zeros(1, 3, 5), cache={})


# --- SparseLatentAttention against DeepseekV32Attention -----------------------------------


@st.composite
def dsa_layouts(draw: st.DrawFn) -> dict:
    rope = 2 * draw(st.integers(1, 3))
    num_tokens = draw(st.integers(1, 8))
    return {
        "d_model": draw(st.integers(1, 10)),
        "num_heads": draw(st.integers(1, 3)),
        "q_lora_rank": draw(st.integers(1, 6)),
        "kv_lora_rank": draw(st.integers(1, 6)),
        "qk_nope_head_dim": draw(st.integers(1, 4)),
        "qk_rope_head_dim": rope,
        "v_head_dim": draw(st.integers(1, 4)),
        "attention_bias": draw(st.booleans()),
        "index_top_k": draw(st.integers(1, num_tokens + 1)),
        "index_num_heads": draw(st.integers(1, 3)),
        "index_head_dim": rope + draw(st.integers(0, 3)),
        "rope_theta": draw(st.sampled_from([10000.0, 50.0])),
        "num_tokens": num_tokens,
        "batch": draw(st.integers(1, 2)),
        "seed": draw(st.integers(0, 2**16)),
    }


def make_dsa(layout: dict) -> SparseLatentAttention:
    names = ("num_heads", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim")
    kwargs = {k: layout[k] for k in (*names, "v_head_dim", "index_top_k", "index_num_heads")}
    rotary = Rotary(layout["qk_rope_head_dim"], layout["rope_theta"], interleaved=True)
    kwargs |= {"index_head_dim": layout["index_head_dim"], "rotary": rotary}
    kwargs |= {"qkv_bias": layout["attention_bias"], "out_bias": layout["attention_bias"]}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(layout["seed"])
        dsa = SparseLatentAttention(layout["d_model"], layout["d_model"], 16, **kwargs)
        with torch.no_grad():  # norms that are not the identity
            for norm in (dsa.kv_norm, dsa.q_norm, dsa.indexer.k_norm):
                torch.nn.init.uniform_(norm.weight, 0.5, 1.5)
            dsa.indexer.k_norm.bias.normal_()
    return dsa.to(F64).eval()


def v32_attention(dsa: SparseLatentAttention, implementation: str) -> DeepseekV32Attention:
    """``DeepseekV32Attention`` holding ``dsa``'s weights.

    Its MLA weights are named as ``DeepseekV3Attention``'s: they come from
    ``hf_models.deepseek_attention``; its indexer's from :func:`v32_indexer`.
    """
    indexer = dsa.indexer
    layout = {"hidden_size": dsa.d_in, "q_lora_rank": dsa.q_lora_rank}
    layout |= {"qk_rope_head_dim": dsa.qk_rope_head_dim, "rope_theta": dsa.rotary.base}
    layout |= {"index_n_heads": indexer.num_heads, "index_head_dim": indexer.head_dim}
    config = v32_config(
        layout | {"index_topk": dsa.index_top_k},
        num_attention_heads=dsa.num_heads,
        num_key_value_heads=dsa.num_heads,
        kv_lora_rank=dsa.kv_lora_rank,
        qk_nope_head_dim=dsa.qk_nope_head_dim,
        v_head_dim=dsa.v_head_dim,
        attention_bias=dsa.out_proj.bias is not None,
        attn_implementation=implementation,
    )
    theirs = DeepseekV32Attention(config, layer_idx=0).to(F64).eval()
    state = deepseek_attention(dsa).state_dict()
    state |= {f"indexer.{k}": w for k, w in v32_indexer(indexer, config).state_dict().items()}
    theirs.load_state_dict(state, strict=True)
    # DeepseekV32RMSNorm takes no eps from the config: its default 1e-6, as dsa's
    assert theirs.q_a_layernorm.variance_epsilon == dsa.q_norm.eps
    return theirs


def their_mask(num_queries: int, num_keys: int, implementation: str) -> torch.Tensor:
    """The causal mask as ``create_causal_mask`` makes it: boolean for sdpa, additive
    (0 or -inf) for eager, whose kernel adds the mask to the scores."""
    allowed = causal_4d(num_queries, num_keys)
    if implementation == "sdpa":
        return allowed
    return torch.zeros(allowed.shape, dtype=F64).masked_fill(~allowed, -math.inf)


@pytest.mark.parametrize("implementation", ["sdpa", "eager"])
@given(layout=dsa_layouts(), data=st.data())
def test_dsa_equals_deepseek_v32_attention_in_float64(implementation, layout, data):
    """A full pass, then a prefill and one-token steps with both caches."""
    dsa = make_dsa(layout)
    theirs = float64_norms(v32_attention(dsa, implementation))
    x = indexer_inputs(layout | {"hidden_size": layout["d_model"], "q_lora_rank": 1})[0]
    n, rope = x.shape[1], dsa.qk_rope_head_dim

    def run(start: int, stop: int, cache=None) -> torch.Tensor:
        cos_sin = rope_cos_sin(torch.arange(start, stop)[None], rope, dsa.rotary.base)
        mask = their_mask(stop - start, stop, implementation)
        with float64_casts(), float64_softmax():  # the cache goes 4th (see test_latent.py)
            return theirs(x[:, start:stop], cos_sin, mask, cache)[0]

    torch.testing.assert_close(dsa(x), run(0, n), **EXACT)
    read = (dsa.attention_weights(x) > 0).sum(dim=-1)  # keys read per query
    expected = torch.clamp(torch.arange(1, n + 1), max=layout["index_top_k"])
    assert torch.equal(read, expected.expand_as(read))
    prefill = data.draw(st.integers(1, n), label="prefill")
    ours, their_cache = SparseLatentCache(), DynamicCache(config=theirs.config)
    for start, stop in zip([0, *range(prefill, n)], range(prefill, n + 1), strict=False):
        step = dsa(x[:, start:stop], cache=ours)
        torch.testing.assert_close(step, run(start, stop, their_cache), **EXACT)
    assert ours.index_keys.shape == (x.shape[0], n, dsa.indexer.head_dim)
    assert ours.nbytes == n * x.shape[0] * dsa.cache_bytes_per_token


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dsa_equals_deepseek_v32_attention_as_shipped(seed):
    """Their rotary embedding, float32 norms, casts and softmax, at float32's tolerance."""
    layout = {"d_model": 16, "num_heads": 2, "q_lora_rank": 6, "kv_lora_rank": 5}
    layout |= {"qk_nope_head_dim": 3, "qk_rope_head_dim": 4, "v_head_dim": 3}
    layout |= {"attention_bias": True, "index_top_k": 3, "index_num_heads": 3}
    layout |= {"index_head_dim": 6, "rope_theta": 10000.0, "seed": seed}
    dsa = make_dsa(layout)
    theirs = v32_attention(dsa, "eager")
    x = torch.randn(2, 9, 16, generator=torch.Generator().manual_seed(seed), dtype=F64)
    cos_sin = DeepseekV32RotaryEmbedding(theirs.config)(x, torch.arange(9)[None])
    expected, weights = theirs(x, cos_sin, their_mask(9, 9, "eager"))
    torch.testing.assert_close(dsa(x), expected, **FLOAT32_STEP)
    torch.testing.assert_close(dsa.attention_weights(x), weights, **FLOAT32_STEP)


def test_dsa_bad_arguments():
    sizes = {"num_heads": 2, "kv_lora_rank": 4, "qk_nope_head_dim": 2, "qk_rope_head_dim": 2}
    sizes |= {"v_head_dim": 2, "index_num_heads": 2, "index_head_dim": 4}
    with pytest.raises(ValueError, match=r"^SparseLatentAttention: q_lora_rank must be given"):
        SparseLatentAttention(8, 8, 4, **sizes, index_top_k=2)
    with pytest.raises(ValueError, match=r"^SparseLatentAttention: index_top_k must be at least 1"):
        SparseLatentAttention(8, 8, 4, **sizes, q_lora_rank=3, index_top_k=0)
    dsa = SparseLatentAttention(8, 8, 4, **sizes, q_lora_rank=3, index_top_k=2)
    with pytest.raises(TypeError, match=r"cache must be a SparseLatentCache .* got LatentCache"):
        dsa(torch.zeros(1, 2, 8), cache=LatentCache())


#: DeepSeek-V3.2's released rope_parameters (as DeepSeek-V3's), with a short original context.
DEEPSEEK_YARN = {
    "rope_type": "yarn",
    "factor": 40.0,
    "original_max_position_embeddings": 8,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
}


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize(
    "scaling",
    [DEEPSEEK_YARN, {**DEEPSEEK_YARN, "mscale": 0.707, "mscale_all_dim": 0.0}],
    ids=["deepseek-v3.2", "attention-factor-only"],
)
def test_dsa_with_yarn_equals_deepseek_v32_attention_as_shipped(scaling, seed):
    """YaRN: mscale_all_dim raises the attention's softmax scale (not the indexer's);
    an attention factor (mscale without mscale_all_dim) scales the cos and sin of the
    indexer's rotation too."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        dsa = SparseLatentAttention(
            32, 32, 40, num_heads=3, q_lora_rank=12, kv_lora_rank=8, qk_nope_head_dim=6,
            qk_rope_head_dim=8, v_head_dim=5, index_top_k=5,
            rotary=Rotary(8, scaling=scaling, interleaved=True),
            index_num_heads=4, index_head_dim=12,
        ).to(F64).eval()  # fmt: skip
    theirs = v32_attention(dsa, "eager")
    theirs.config.rope_parameters = {**scaling, "rope_theta": dsa.rotary.base}
    theirs.config.max_position_embeddings = 320
    rebuilt = DeepseekV32Attention(theirs.config, layer_idx=0).to(F64).eval()
    rebuilt.load_state_dict(theirs.state_dict())  # built again: it reads mscale_all_dim when built
    assert rebuilt.scaling == pytest.approx(dsa._scale or 14**-0.5)
    x = torch.randn(2, 24, 32, generator=torch.Generator().manual_seed(seed), dtype=F64)
    rotary = DeepseekV32RotaryEmbedding(theirs.config)
    assert (rotary.attention_scaling != 1.0) == (scaling["mscale_all_dim"] == 0.0)
    expected, weights = rebuilt(x, rotary(x, torch.arange(24)[None]), their_mask(24, 24, "eager"))
    torch.testing.assert_close(dsa(x), expected, **FLOAT32_STEP)
    torch.testing.assert_close(dsa.attention_weights(x), weights, **FLOAT32_STEP)
    cache = SparseLatentCache()
    steps = [dsa(x[:, :10], cache=cache)] + [
        dsa(x[:, p : p + 1], cache=cache) for p in range(10, 24)
    ]
    torch.testing.assert_close(torch.cat(steps, dim=1), dsa(x), **EXACT)


def test_sparse_latent_cache_crops_both_caches():
    layout = {"d_model": 8, "num_heads": 2, "q_lora_rank": 4, "kv_lora_rank": 3}
    layout |= {"qk_nope_head_dim": 2, "qk_rope_head_dim": 2, "v_head_dim": 2}
    layout |= {"attention_bias": False, "index_top_k": 2, "index_num_heads": 2}
    layout |= {"index_head_dim": 4, "rope_theta": 10000.0, "seed": 5}
    dsa = make_dsa(layout)
    x = torch.randn(1, 7, 8, generator=torch.Generator().manual_seed(5), dtype=F64)
    cache = SparseLatentCache()
    dsa(x[:, :5], cache=cache)
    cache.crop(3)  # forget tokens 3 and 4, then decode them again
    assert len(cache) == len(cache.indexer) == 3
    again = dsa(x[:, 3:], cache=cache)
    torch.testing.assert_close(again, dsa(x)[:, 3:], **EXACT)


def test_q_k_and_v_of_different_dtypes_are_refused():
    arguments = _bad(v=torch.zeros(2, 2, 5, 3))  # float32 among float64
    with pytest.raises(ValueError, match=r"^topk_sparse_attention: q, k and v must share a dtype"):
        topk_sparse_attention(**arguments)


# --- indexer_kl_loss: DeepSeek-V3.2's indexer training ---------------------------------


def test_the_indexer_loss_is_zero_when_its_softmax_is_the_heads_summed_weights() -> None:
    torch.manual_seed(0)
    weights = torch.softmax(torch.randn(2, 3, 5, 5).masked_fill(~causal_mask(5), -torch.inf), -1)
    target = weights.sum(1) / 3  # the heads' mean is the normalised sum
    scores = target.log()  # -inf where no head looks: the future keys
    assert indexer_kl_loss(scores, weights).abs() < 1e-6
    assert (
        indexer_kl_loss(torch.zeros(2, 5, 5).masked_fill(~causal_mask(5), -torch.inf), weights)
        > 0.01
    )


def test_the_indexer_loss_matches_kl_div_and_trains_only_the_indexer() -> None:
    torch.manual_seed(1)
    logits = torch.randn(1, 2, 4, 6, requires_grad=True)  # the frozen model's
    weights = torch.softmax(logits, -1)
    scores = torch.randn(1, 4, 6, requires_grad=True)
    loss = indexer_kl_loss(scores, weights)
    target = weights.detach().sum(1) / 2
    expected = F.kl_div(scores.log_softmax(-1), target, reduction="none").sum(-1).mean()
    torch.testing.assert_close(loss, expected)
    loss.backward()
    assert scores.grad is not None and scores.grad.abs().sum() > 0
    assert logits.grad is None  # the target is detached: the model gets no gradient


def test_the_sparse_stage_compares_the_two_over_the_chosen_keys_only() -> None:
    weights = torch.tensor([[[[0.5, 0.3, 0.2]]]])
    chosen = torch.tensor([[[True, True, False]]])
    scores = torch.tensor([[[float(torch.tensor(5.0).log()), float(torch.tensor(3.0).log()), 9.0]]])
    # over keys 0 and 1 the target is (5/8, 3/8), the indexer's softmax the same
    assert indexer_kl_loss(scores, weights, chosen).abs() < 1e-6
    assert indexer_kl_loss(scores, weights) > 1.0  # the dense loss sees key 2's score


def test_a_few_steps_of_training_bring_the_indexer_closer_to_the_attention() -> None:
    torch.manual_seed(0)
    main = GroupedQueryAttention(16, 16, 16, num_heads=4, num_kv_heads=2)
    main.requires_grad_(False)
    indexer = LightningIndexer(16, 16, num_heads=4, head_dim=8, qk_rope_head_dim=2)
    optimizer = torch.optim.Adam(indexer.parameters(), lr=3e-2)
    x = torch.randn(4, 16, 16)
    weights = main.attention_weights(x)
    losses = []
    for _ in range(30):
        loss = indexer_kl_loss(indexer(x, x), weights)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((torch.zeros(1, 2, 3), torch.zeros(1, 1, 2, 4)), ValueError, "index_scores of shape"),
        ((torch.zeros(1, 2, 3), torch.zeros(1, 2, 3)), ValueError, "attention_weights must"),
        (([0.0], torch.zeros(1, 1, 2, 3)), TypeError, "index_scores must be a torch"),
        (
            (torch.zeros(1, 2, 3), torch.ones(1, 1, 2, 3), torch.ones(1, 2, 3)),
            ValueError,
            "a bool mask",
        ),
        (
            (torch.zeros(1, 1, 2), torch.tensor([[[[1.0, 0.0]]]]), torch.tensor([[[False, True]]])),
            ValueError,
            "target sums to 0",
        ),
    ],
)
def test_the_indexer_loss_refuses_bad_input(args, error, match) -> None:
    with pytest.raises(error, match=match):
        indexer_kl_loss(*args)
