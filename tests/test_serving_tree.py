"""Tree attention for speculative decoding: attention.serving.tree.

* The mask of a tree lets each node see itself and its ancestors, in any node order,
  and a chain's mask is the causal one; lists that are not trees are refused.
* One call over the cache and the whole tree, with that mask and each node at its
  depth's position, gives every node the output of its own branch run alone after the
  cache through the layer's own causal forward pass (float64, 1e-10), with RoPE, the
  layer's parts (QK-norms, gate, sinks, softcap, keys as values) and grouped heads.
"""

from __future__ import annotations

import pytest
import torch
from helpers import assert_tight, expect, make_gqa
from hypothesis import given
from hypothesis import strategies as st

from attention import KVCache, causal_mask
from attention.serving import (
    attention_at_positions,
    tree_attention_mask,
    tree_cache_mask,
    tree_positions,
)

pytestmark = pytest.mark.usefixtures("single_thread")
F64 = torch.float64


@st.composite
def trees(draw: st.DrawFn, *, max_nodes: int = 7, min_nodes: int = 1) -> list[int]:
    """A random tree of parents, its nodes shuffled so that a child may come first."""
    n = draw(st.integers(min_nodes, max_nodes))
    ordered = [draw(st.integers(-1, i - 1)) for i in range(n)]  # parent before child
    place = draw(st.permutations(range(n)))  # node i is stored at index place[i]
    parents = [0] * n
    for node, parent in enumerate(ordered):
        parents[place[node]] = -1 if parent == -1 else place[parent]
    return parents


def branch(parents: list[int], node: int) -> list[int]:
    """The nodes from the root down to ``node``, walking up by the parents."""
    path = [node]
    while parents[path[-1]] != -1:
        path.append(parents[path[-1]])
    return path[::-1]


@given(trees())
def test_each_node_sees_exactly_itself_and_its_ancestors(parents):
    mask = tree_attention_mask(parents)
    assert mask.dtype == torch.bool and mask.shape == (len(parents), len(parents))
    for node in range(len(parents)):
        seen = set(branch(parents, node))
        assert mask[node].nonzero().flatten().tolist() == sorted(seen)
    positions = tree_positions(parents, cache_length=3)
    assert positions.tolist() == [3 + len(branch(parents, i)) - 1 for i in range(len(parents))]
    full = tree_cache_mask(parents, 3)
    assert full[:, :3].all() and torch.equal(full[:, 3:], mask)


def test_a_chain_is_the_causal_mask_and_separate_roots_see_only_themselves():
    chain = [-1, 0, 1, 2, 3]
    assert torch.equal(tree_attention_mask(chain), causal_mask(5, 5))
    assert tree_positions(chain, 7).tolist() == [7, 8, 9, 10, 11]
    assert torch.equal(tree_attention_mask([-1, -1, -1]), torch.eye(3, dtype=torch.bool))
    assert tree_attention_mask([]).shape == (0, 0)
    assert tree_attention_mask(torch.tensor([-1, 0])).tolist() == [[True, False], [True, True]]


@pytest.mark.parametrize(
    ("parents", "message", "error"),
    [
        (
            [0],
            "tree_attention_mask: parents is not a tree: the nodes 0 -> 0 form a cycle",
            ValueError,
        ),
        (
            [-1, 2, 3, 1],
            "tree_attention_mask: parents is not a tree: the nodes 1 -> 2 -> 3 -> 1",
            ValueError,
        ),
        ([-1, 2], "tree_attention_mask: parents[1] = 2 is not a node: expected -1", ValueError),
        ([-2], "tree_attention_mask: parents[0] = -2 is not a node", ValueError),
        (
            [-1, 0.0],
            "tree_attention_mask: parents[1] must be an int (a node's index, or -1), got 0.0",
            TypeError,
        ),
        ([-1, True], "tree_attention_mask: parents[1] must be an int", TypeError),
        ("-1", "tree_attention_mask: parents must be a list of ints", TypeError),
        (
            3,
            "tree_attention_mask: parents must be a list of ints, each node's parent's index "
            "or -1, got int",
            TypeError,
        ),
        (
            torch.tensor([-1.0, 0.0]),
            "tree_attention_mask: parents must be a list of ints",
            TypeError,
        ),
    ],
)
def test_a_list_that_is_not_a_tree_is_refused(parents, message, error):
    with expect(message, error):
        tree_attention_mask(parents)


def test_a_negative_cache_length_is_refused():
    with expect(
        "tree_positions: cache_length must be an int >= 0 (the tokens already cached), got -1"
    ):
        tree_positions([-1], -1)
    with expect("tree_cache_mask: cache_length must be an int >= 0", TypeError):
        tree_cache_mask([-1], 1.5)


PARTS = st.sampled_from(
    [(), ("qk_norm",), ("W_gate",), ("no_W_value", "v_norm"), ("qk_norm_projection",)]
)


def tree_layer(data: st.DataObject, parts: tuple[str, ...], **kwargs):
    """A float64 layer with RoPE and grouped heads, drawn sizes, and a context of 16."""
    num_kv_heads = data.draw(st.integers(1, 2))
    layout = {
        "num_heads": num_kv_heads * data.draw(st.integers(1, 2)),
        "num_kv_heads": num_kv_heads,
        "head_dim": 2 * data.draw(st.integers(1, 3)),
        "context_length": 16,
        "qkv_bias": data.draw(st.booleans()),
        "seed": data.draw(st.integers(0, 2**16)),
    }
    return make_gqa(
        layout, parts=parts, rope_base=data.draw(st.sampled_from([10.0, 1e4])), **kwargs
    )


def prefix_cache(layer, prefix: torch.Tensor) -> KVCache:
    cache = KVCache()
    if prefix.shape[1]:
        layer(prefix, cache=cache)
    return cache


@given(parents=trees(), parts=PARTS, data=st.data())
def test_every_node_gets_what_its_branch_gets_run_alone_after_the_cache(parents, parts, data):
    extras = data.draw(st.sampled_from([{}, {"softcap": 2.0}, {"sinks": True}]))
    layer = tree_layer(data, parts, **extras)
    if layer.sinks is not None:  # the sinks start at zeros: make them count
        layer.sinks.data = torch.linspace(-1.0, 1.0, layer.num_heads, dtype=F64)
    batch, cached = data.draw(st.integers(1, 2)), data.draw(st.integers(0, 5))
    generator = torch.Generator().manual_seed(data.draw(st.integers(0, 2**16)))
    prefix = torch.randn(batch, cached, layer.d_in, generator=generator, dtype=F64)
    nodes = torch.randn(batch, len(parents), layer.d_in, generator=generator, dtype=F64)
    cache = prefix_cache(layer, prefix)
    positions, allowed = tree_positions(parents, cached), tree_cache_mask(parents, cached)
    out = attention_at_positions(layer, nodes, positions, allowed, cache)
    assert cache.seen_tokens == cached + len(parents)
    for node in range(len(parents)):
        path = branch(parents, node)
        alone = layer(nodes[:, path], cache=prefix_cache(layer, prefix))  # causal, after the cache
        assert_tight(out[:, node], alone[:, -1])


@given(parts=PARTS, data=st.data())
def test_a_chain_after_a_cache_is_the_layers_own_forward_pass(parts, data):
    layer = tree_layer(data, parts)
    cached, n = data.draw(st.integers(0, 4)), data.draw(st.integers(1, 5))
    x = torch.randn(
        1, cached + n, layer.d_in, dtype=F64, generator=torch.Generator().manual_seed(n)
    )
    chain = list(range(-1, n - 1))
    ours, theirs = prefix_cache(layer, x[:, :cached]), prefix_cache(layer, x[:, :cached])
    out = attention_at_positions(
        layer, x[:, cached:], tree_positions(chain, cached), tree_cache_mask(chain, cached), ours
    )
    assert_tight(out, layer(x[:, cached:], cache=theirs))
    assert_tight(ours.keys, theirs.keys)
    assert_tight(ours.values, theirs.values)


def test_attention_at_positions_refuses_what_a_tree_cannot_use():
    layout = {
        "num_heads": 2,
        "num_kv_heads": 1,
        "head_dim": 2,
        "context_length": 8,
        "qkv_bias": False,
        "seed": 0,
    }
    layer = make_gqa(layout, rope_base=10.0)
    x = torch.zeros(1, 2, 4, dtype=F64)
    positions, allowed = tree_positions([-1, 0]), tree_attention_mask([-1, 0])
    with expect(
        "attention_at_positions: layer must be a GroupedQueryAttention, got Linear", TypeError
    ):
        attention_at_positions(torch.nn.Linear(4, 4), x, positions, allowed)
    windowed = make_gqa(layout, rope_base=10.0, window=2)
    with expect("attention_at_positions: expected a layer that attends to every earlier token"):
        attention_at_positions(windowed, x, positions, allowed)
    with expect(
        "attention_at_positions: positions must be an integer tensor of shape (n,), got list",
        TypeError,
    ):
        attention_at_positions(layer, x, [0, 1], allowed)
    with expect(
        "attention_at_positions: expected integer positions of shape (n,) = (2,), got shape (3,)"
    ):
        attention_at_positions(layer, x, torch.arange(3), allowed)
    with expect(
        "attention_at_positions: positions must lie in [0, context_length) = [0, 8), got 7 to 8"
    ):
        attention_at_positions(layer, x, torch.tensor([7, 8]), allowed)
    with expect(
        "attention_at_positions: expected a cache that keeps every token at its own position"
    ):
        attention_at_positions(layer, x, positions, allowed, KVCache(window=2))
    with expect(
        "attention_at_positions: cache must be a KeyValueCache or None, got dict", TypeError
    ):
        attention_at_positions(layer, x, positions, allowed, {})
    with expect("attention_at_positions: expected allowed broadcastable to"):
        attention_at_positions(layer, x, positions, tree_cache_mask([-1, 0], 1))
