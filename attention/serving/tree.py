"""Tree attention: a draft's tree of guesses, verified by the target in one step.

Speculative decoding lets a cheap *draft* guess the next few tokens and the *target*
check them all in one forward pass, instead of one pass per token. A chain of guesses
is lost at its first wrong token; a *tree* of guesses (SpecInfer, Medusa, EAGLE)
keeps several continuations alive, so that one of them is more likely to survive.

The target reads the whole tree in one call. Each node sits one position after its
parent, and may attend only to the cache, its ancestors and itself, never to a sibling
branch: :func:`tree_attention_mask` is that mask, :func:`tree_positions` those
positions, and :func:`tree_cache_mask` the mask over the cache and the tree together.
Every node then gets exactly the output its own branch would get, run alone after the
cache (the tests check it to 1e-10 in float64). :func:`attention_at_positions` runs a
:class:`~attention.GroupedQueryAttention` layer that way, with RoPE at each node's own
position.

Greedy verification (:func:`greedy_accept`) walks down the tree from the last accepted
token while a child holds the target's own next token; the target's token after the
last matching node comes free (the *bonus*). The cache keeps that path's keys and
values and forgets the other branches (:func:`keep_accepted`, or, in a paged pool,
:func:`keep_accepted_paged`). So the tokens are exactly the target's greedy tokens,
only fewer target calls make them: :func:`speculative_decode` reports how many tokens
each call accepted.

The draft here is a smaller model built from a config (fewer layers, a narrower
width), not an MTP head: an MTP-style head (DeepSeek-V3, EAGLE) predicts well only
once trained together with its target, and this package builds its models with random
weights, which a small config serves as well as a large one. With random weights the
draft rarely guesses right; a draft that shares the target's weights (its first
layers, say) guesses better, and the target itself as its own draft accepts every
guess. The tokens are the target's in every case: only the acceptance changes.

:class:`Decoder` is the smallest decoder-only language model around the package's
attention layers (Llama's layout: pre-norm blocks of attention and an MLP), built from
any embedding, norms, MLPs and head, such as those of a ``transformers`` Llama.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attention import _checks
from attention.cache import KeyValueCache
from attention.gqa import GroupedQueryAttention
from attention.step import attend

__all__ = [
    "attention_at_positions",
    "tree_attention_mask",
    "tree_cache_mask",
    "tree_positions",
]

_PARENTS = "parents must be a list of ints, each node's parent's index or -1"


def _tree(owner: str, parents: object) -> tuple[list[int], list[int]]:
    """Check ``parents``; return it as a list of ints, and each node's depth (roots: 0)."""
    if isinstance(parents, torch.Tensor):
        if parents.dim() != 1 or parents.is_floating_point() or parents.dtype == torch.bool:
            raise TypeError(
                f"{owner}: {_PARENTS}, got a tensor of shape {tuple(parents.shape)} and "
                f"dtype {parents.dtype}"
            )
        parents = parents.tolist()
    if not isinstance(parents, Sequence) or isinstance(parents, str | bytes):
        raise TypeError(f"{owner}: {_PARENTS}, got {type(parents).__name__}")
    checked = [
        _checks.whole_number(owner, p, f"parents[{i}] must be an int (a node's index, or -1)")
        for i, p in enumerate(parents)
    ]
    n = len(checked)
    for i, p in enumerate(checked):
        if not -1 <= p < n:
            raise ValueError(
                f"{owner}: parents[{i}] = {p} is not a node: expected -1 (a node that "
                f"follows the last accepted token) or an index from 0 to {n - 1}"
            )
    depths = [-1] * n  # -1: not known yet
    for start in range(n):
        chain: list[int] = []  # nodes met on the way up whose depth is not known yet
        node = start
        while node != -1 and depths[node] < 0:
            if node in chain:  # walked up into a node already on the way: a cycle
                cycle = [*chain[chain.index(node) :], node]
                raise ValueError(
                    f"{owner}: parents is not a tree: the nodes "
                    + " -> ".join(map(str, cycle))
                    + " form a cycle (each arrow goes from a node to its parent); every "
                    "node must lead up to a -1"
                )
            chain.append(node)
            node = checked[node]
        depth = -1 if node == -1 else depths[node]
        for member in reversed(chain):  # from the known end down to where we started
            depth += 1
            depths[member] = depth
    return checked, depths


def tree_attention_mask(
    parents: Sequence[int], *, device: torch.device | str | None = None
) -> torch.Tensor:
    """The mask of a draft tree: each node sees itself and its ancestors.

    Parameters
    ----------
    parents : sequence of int, or a 1-D integer tensor, length n
        ``parents[i]`` is the index of node ``i``'s parent, or ``-1`` for a node that
        follows the last accepted token (a root). The nodes may come in any order.
    device : torch.device or str, optional
        Where to build the mask.

    Returns
    -------
    torch.Tensor of bool, shape (n, n)
        ``True`` where query node ``i`` may attend to key node ``j``: ``j`` is ``i`` or
        one of its ancestors. With ``parents = [-1, 0, 1, ...]`` (a chain) it is the
        causal mask.

    Raises
    ------
    TypeError
        For ``parents`` that is not a sequence of ints (a float, a bool).
    ValueError
        For a list that is not a tree: an index out of range, or a cycle (a node that
        is its own ancestor, or its own parent).

    Examples
    --------
    Two guesses for the next token (nodes 0 and 1), then a guess after each:

    >>> tree_attention_mask([-1, -1, 0, 1]).int()
    tensor([[1, 0, 0, 0],
            [0, 1, 0, 0],
            [1, 0, 1, 0],
            [0, 1, 0, 1]], dtype=torch.int32)
    >>> tree_attention_mask([1, 0])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: tree_attention_mask: parents is not a tree: the nodes 0 -> 1 -> 0 form a cycle ...
    """
    parents, depths = _tree("tree_attention_mask", parents)
    n = len(parents)
    mask = torch.zeros(n, n, dtype=torch.bool, device=device)
    for node in sorted(range(n), key=depths.__getitem__):  # parents before their children
        if parents[node] >= 0:
            mask[node] = mask[parents[node]]  # the parent's ancestors and the parent
        mask[node, node] = True
    return mask


def _cache_length(owner: str, cache_length: object) -> int:
    what = "cache_length must be an int >= 0 (the tokens already cached)"
    length = _checks.whole_number(owner, cache_length, what)
    if length < 0:
        raise ValueError(f"{owner}: {what}, got {length}")
    return length


def tree_positions(
    parents: Sequence[int], cache_length: int = 0, *, device: torch.device | str | None = None
) -> torch.Tensor:
    """Each node's position: the cache's length plus its depth in the tree.

    A root (``parents[i] == -1``) comes right after the ``cache_length`` cached tokens,
    and each child one position after its parent: the position the node would have in
    its own branch, run alone after the cache. Siblings share a position.

    Parameters
    ----------
    parents : sequence of int, length n
        As for :func:`tree_attention_mask`.
    cache_length : int
        The tokens already in the cache, at positions ``0`` to ``cache_length - 1``.

    Returns
    -------
    torch.Tensor of int64, shape (n,)

    Examples
    --------
    >>> tree_positions([-1, -1, 0, 1, 2], cache_length=10)
    tensor([10, 10, 11, 11, 12])
    """
    owner = "tree_positions"
    _, depths = _tree(owner, parents)
    start = _cache_length(owner, cache_length)
    return torch.tensor(depths, dtype=torch.long, device=device) + start


def tree_cache_mask(
    parents: Sequence[int], cache_length: int, *, device: torch.device | str | None = None
) -> torch.Tensor:
    """The mask of a tree's nodes over the cache and the tree: the cache all visible.

    Parameters
    ----------
    parents : sequence of int, length n
        As for :func:`tree_attention_mask`.
    cache_length : int
        The tokens already cached; every node sees them all.

    Returns
    -------
    torch.Tensor of bool, shape (n, cache_length + n)
        Columns ``0`` to ``cache_length - 1`` are the cached keys (all ``True``), the
        rest :func:`tree_attention_mask`: the ``allowed=`` of a call that appends the
        nodes to the cache in their order.

    Examples
    --------
    >>> tree_cache_mask([-1, -1, 0], cache_length=2).int()
    tensor([[1, 1, 1, 0, 0],
            [1, 1, 0, 1, 0],
            [1, 1, 1, 0, 1]], dtype=torch.int32)
    """
    owner = "tree_cache_mask"
    tree = tree_attention_mask(parents, device=device)
    length = _cache_length(owner, cache_length)
    seen = torch.ones(tree.shape[0], length, dtype=torch.bool, device=device)
    return torch.cat((seen, tree), dim=1)


def attention_at_positions(
    layer: GroupedQueryAttention,
    x: torch.Tensor,
    positions: torch.Tensor,
    allowed: torch.Tensor,
    cache: KeyValueCache | None = None,
) -> torch.Tensor:
    """A :class:`~attention.GroupedQueryAttention` layer's forward pass, positions and mask given.

    The layer's own forward pass puts its new tokens at consecutive positions and masks
    them causally; a tree's nodes need their depth as position and the tree's mask.
    This computes what the layer computes (its projections, QK-norms, value norm, RoPE,
    cache, scale, softcap, sinks and output gate), with each token rotated at its own
    position, attending where ``allowed`` says, and nowhere else: no causal mask is
    added. The tokens are appended to ``cache`` in their order.

    Parameters
    ----------
    layer : GroupedQueryAttention
        Without a sliding window or chunks (a tree's mask has none).
    x : torch.Tensor, shape (batch, n, d_in)
        The new tokens, in the layer's dtype.
    positions : torch.Tensor of int, shape (n,)
        Each new token's position (:func:`tree_positions`), below the layer's
        ``context_length``; RoPE turns its query and key by it.
    allowed : torch.Tensor of bool
        Broadcastable to ``(batch, num_heads, n, num_keys)``, where ``num_keys`` counts
        the cached tokens and the new ones: ``True`` where a new token may attend
        (:func:`tree_cache_mask`).
    cache : KeyValueCache, optional
        A cache that keeps every token (no window, chunk or re-indexing), such as a
        :class:`~attention.KVCache`; the new keys and values are appended to it.

    Returns
    -------
    torch.Tensor, shape (batch, n, d_out)

    Raises
    ------
    TypeError
        For a layer, input, positions, mask or cache of the wrong type.
    ValueError
        For a layer with a window or chunk, a rolling or re-indexing cache, shapes that
        do not fit, or a position outside ``[0, context_length)``.

    Examples
    --------
    A chain (each node the child of the one before) is the layer's own causal pass:

    >>> import torch
    >>> from attention import GroupedQueryAttention, Rotary
    >>> _ = torch.manual_seed(0)
    >>> layer = GroupedQueryAttention(8, 8, 16, num_heads=2, num_kv_heads=1, rotary=Rotary(4))
    >>> x = torch.randn(1, 5, 8)
    >>> chain = [-1, 0, 1, 2, 3]
    >>> out = attention_at_positions(layer, x, tree_positions(chain), tree_attention_mask(chain))
    >>> torch.allclose(out, layer(x), atol=1e-6)
    True
    """
    owner = "attention_at_positions"
    if not isinstance(layer, GroupedQueryAttention):
        raise TypeError(
            f"{owner}: layer must be a GroupedQueryAttention, got {type(layer).__name__}"
        )
    if layer.window is not None or layer.chunk is not None:
        raise ValueError(
            f"{owner}: expected a layer that attends to every earlier token (the mask "
            f"says which), got one with window={layer.window} and chunk={layer.chunk}"
        )
    x = _checks.module_input(layer, x, d_in=layer.d_in)
    batch, n, _ = x.shape
    if not isinstance(positions, torch.Tensor):
        raise TypeError(
            f"{owner}: positions must be an integer tensor of shape (n,), got "
            f"{type(positions).__name__}"
        )
    if (
        positions.shape != (n,)
        or positions.is_floating_point()
        or positions.is_complex()
        or positions.dtype == torch.bool
    ):
        raise ValueError(
            f"{owner}: expected integer positions of shape (n,) = ({n},), got shape "
            f"{tuple(positions.shape)} and dtype {positions.dtype}"
        )
    places = positions.tolist()
    if places and not 0 <= min(places) <= max(places) < layer.context_length:
        raise ValueError(
            f"{owner}: positions must lie in [0, context_length) = [0, "
            f"{layer.context_length}), got {min(places)} to {max(places)}"
        )
    num_cached = 0
    if cache is not None:
        if not isinstance(cache, KeyValueCache):
            raise TypeError(
                f"{owner}: cache must be a KeyValueCache or None, got {type(cache).__name__}"
            )
        if cache.reindexes_positions or cache.window is not None or cache.chunk is not None:
            raise ValueError(
                f"{owner}: expected a cache that keeps every token at its own position, "
                f"got a {type(cache).__name__} with window={cache.window}, chunk="
                f"{cache.chunk} and reindexes_positions={cache.reindexes_positions}"
            )
        num_cached = cache.seen_tokens
    scores = (batch, layer.num_heads, n, num_cached + n)
    allowed = _checks.allowed_mask(owner, allowed, scores)

    def heads(projected: torch.Tensor, num_heads: int) -> torch.Tensor:
        return projected.view(batch, n, num_heads, layer.head_dim).transpose(1, 2)

    # What the layer's forward pass computes, step by step, but for the positions.
    queries = heads(layer.W_query(x), layer.num_heads)  # (batch, num_heads, n, head_dim)
    keys = heads(layer.W_key(x), layer.num_kv_heads)
    values = keys if layer.W_value is None else heads(layer.W_value(x), layer.num_kv_heads)
    if layer.q_norm is not None:
        queries = layer.q_norm(queries)
    if layer.k_norm is not None:
        keys = layer.k_norm(keys)
    if layer.v_norm is not None:
        values = layer.v_norm(values)
    if layer.rotary is not None:
        # Token by token, each at its own position: the rows of the layer's own table.
        rotary = layer.rotary
        queries, keys = (
            torch.cat([rotary(t[..., i : i + 1, :], start=p) for i, p in enumerate(places)], dim=-2)
            if places
            else t
            for t in (queries, keys)
        )
    if cache is not None:
        keys, values = cache.update(keys, values)
    dropout = layer.dropout.p if layer.training else 0.0
    context = attend(
        queries,
        keys,
        values,
        allowed=allowed,
        scale=layer.scale,
        dropout=dropout,
        softcap=layer.softcap,
        sinks=layer.sinks,
    )
    context = context.transpose(1, 2).reshape(batch, n, -1)  # heads side by side
    if layer.W_gate is not None:
        context = context * torch.sigmoid(layer.W_gate(x))
    return layer.out_proj(context)
