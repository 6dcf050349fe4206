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
any embedding, norms, MLPs and head; :meth:`Decoder.from_transformers` builds one from a
``transformers`` Llama or Qwen3, its attention the package's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from attention import _checks
from attention.cache import KeyValueCache
from attention.gqa import GroupedQueryAttention
from attention.kv_cache import KVCache
from attention.models.weights import from_transformers
from attention.norms import RMSNorm
from attention.paged import PagedKVCache
from attention.serving.runner import SUPPORTED_MODEL_TYPES
from attention.step import attend

__all__ = [
    "Acceptance",
    "Decoder",
    "DecoderBlock",
    "SpeculativeOutput",
    "attention_at_positions",
    "greedy_accept",
    "greedy_decode",
    "keep_accepted",
    "keep_accepted_paged",
    "speculative_decode",
    "tree_attention_mask",
    "tree_cache_mask",
    "tree_positions",
]

_PARENTS = "parents must be a list of ints, each node's parent's index or -1"


def _int_list(owner: str, values: object, expected: str, name: str, each: str) -> list[int]:
    """``values``, a list (or 1-D integer tensor) of ints, as a list; ``expected`` and
    ``each`` (what one item is) say what was wanted in the errors."""
    if isinstance(values, torch.Tensor):
        if values.dim() != 1 or values.is_floating_point() or values.dtype == torch.bool:
            raise TypeError(
                f"{owner}: {expected}, got a tensor of shape {tuple(values.shape)} and "
                f"dtype {values.dtype}"
            )
        values = values.tolist()
    if not isinstance(values, Sequence) or isinstance(values, str | bytes):
        raise TypeError(f"{owner}: {expected}, got {type(values).__name__}")
    return [
        _checks.whole_number(owner, v, f"{name}[{i}] must be an int ({each})")
        for i, v in enumerate(values)
    ]


def _tree(owner: str, parents: object) -> tuple[list[int], list[int]]:
    """Check ``parents``; return it as a list of ints, and each node's depth (roots: 0)."""
    checked = _int_list(owner, parents, _PARENTS, "parents", "a node's index, or -1")
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

    A ``"dynamic"`` RoPE scaling scales each token for its own position plus one, as a
    one-token step at that position would, not for the call's last position.

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


# -- verification and roll-back ------------------------------------------------------


@dataclass(frozen=True)
class Acceptance:
    """What greedy verification keeps of a draft tree.

    Attributes
    ----------
    path : list of int
        The accepted draft nodes, from a root down, each the child of the one before:
        the longest such path whose tokens are the target's own greedy tokens.
    tokens : list of int
        The path's tokens, then the bonus token: the target's greedy token after the
        path's last node (after the last accepted token if the path is empty).
        ``len(tokens)`` tokens are accepted, at least one.
    """

    path: list[int]
    tokens: list[int]

    @property
    def bonus(self) -> int:
        """The target's own token after the path, which no draft token matched."""
        return self.tokens[-1]


def _tokens(owner: str, name: str, tokens: object, *, vocab: int | None = None) -> list[int]:
    """Check a list (or 1-D integer tensor) of token ids; return it as a list of ints."""
    expected = f"{name} must be a list of ints (token ids)"
    checked = _int_list(owner, tokens, expected, name, "a token id")
    if vocab is not None:
        for i, t in enumerate(checked):
            if not 0 <= t < vocab:
                raise ValueError(
                    f"{owner}: {name}[{i}] = {t} is not a token id: expected 0 to {vocab - 1}"
                )
    return checked


def greedy_accept(
    parents: Sequence[int], draft_tokens: Sequence[int], logits: torch.Tensor
) -> Acceptance:
    """The longest path of a draft tree that the target's greedy choices follow, and a bonus.

    From the last accepted token, the target's next token is the argmax of its logits
    there; if a root of the tree holds that token, it is accepted, and the walk goes on
    from it, to its children; at the first node none of whose children holds the
    target's token, that token is the bonus. Every accepted token is thus the one the
    target would have chosen itself: speculative decoding changes how many calls the
    tokens take, never the tokens.

    Parameters
    ----------
    parents : sequence of int, length n
        The draft tree, as for :func:`tree_attention_mask`.
    draft_tokens : sequence of int, length n
        The token the draft put at each node.
    logits : torch.Tensor, shape (n + 1, vocab_size)
        The target's logits: row 0 at the last accepted token, row ``i + 1`` at node
        ``i`` (one call over the last accepted token and the tree, with
        :func:`tree_cache_mask`). Ties go to the lowest token id, as ``argmax``'s.

    Returns
    -------
    Acceptance
        The accepted nodes, and the tokens accepted (theirs, then the bonus). Of two
        children with the same token, the first in the tree's order is taken.

    Examples
    --------
    Two guesses for the next token, 5 and 7, and a guess after each:

    >>> import torch
    >>> parents, draft_tokens = [-1, -1, 0, 1], [5, 7, 2, 3]
    >>> logits = torch.zeros(5, 10)
    >>> logits[0, 7] = logits[2, 3] = logits[4, 9] = 1.0  # the target: 7, then 3, then 9
    >>> accepted = greedy_accept(parents, draft_tokens, logits)
    >>> accepted.path, accepted.tokens, accepted.bonus
    ([1, 3], [7, 3, 9], 9)
    """
    owner = "greedy_accept"
    parents, _ = _tree(owner, parents)
    n = len(parents)
    if not isinstance(logits, torch.Tensor):
        raise TypeError(f"{owner}: logits must be a torch.Tensor, got {type(logits).__name__}")
    if logits.dim() != 2 or logits.shape[0] != n + 1 or logits.shape[1] == 0:
        raise ValueError(
            f"{owner}: expected logits of shape (n + 1, vocab_size) = ({n + 1}, vocab_size), "
            f"one row for the last accepted token and one per node, got {tuple(logits.shape)}"
        )
    draft_tokens = _tokens(owner, "draft_tokens", draft_tokens, vocab=logits.shape[1])
    if len(draft_tokens) != n:
        raise ValueError(
            f"{owner}: expected one draft token per node, {n}, got {len(draft_tokens)}"
        )
    children: dict[int, list[int]] = {}
    for node, parent in enumerate(parents):
        children.setdefault(parent, []).append(node)
    choices = logits.argmax(dim=-1).tolist()  # the target's greedy token after each row
    path: list[int] = []
    node = -1  # the last accepted token: row 0
    while True:
        wanted = choices[node + 1]
        match = next((c for c in children.get(node, []) if draft_tokens[c] == wanted), None)
        if match is None:
            return Acceptance(path, [draft_tokens[i] for i in path] + [wanted])
        path.append(match)
        node = match


def keep_accepted(cache: KVCache, cache_length: int, kept: Sequence[int]) -> None:
    """Roll a cache back to ``cache_length`` tokens, then keep the verified rows ``kept``.

    After verification the cache holds the ``cache_length`` committed tokens and then
    every verified token (the last accepted one and the tree's nodes, in their order).
    The accepted ones, ``kept`` (indices among the verified rows, in the order they
    follow each other), stay, moved up behind the committed tokens; the rejected
    branches are forgotten. The positions stay right: an accepted node's key was
    rotated at its depth's position, which is the position it now has.

    Parameters
    ----------
    cache : KVCache
        A cache that keeps every token (no window or chunk).
    cache_length : int
        The committed tokens before the verified ones.
    kept : sequence of int
        Rows of the verified tokens to keep, each from 0 to
        ``len(cache) - cache_length - 1``, none twice.

    Examples
    --------
    >>> import torch
    >>> cache = KVCache()
    >>> rows = torch.arange(7.0).view(1, 1, 7, 1)  # 3 committed tokens, 4 verified ones
    >>> _ = cache.update(rows, rows)
    >>> keep_accepted(cache, 3, [0, 2])  # verified rows 0 and 2: the cache's 3 and 5
    >>> cache.keys.flatten().tolist(), cache.seen_tokens
    ([0.0, 1.0, 2.0, 3.0, 5.0], 5)
    """
    owner = "keep_accepted"
    if not isinstance(cache, KVCache):
        raise TypeError(f"{owner}: cache must be a KVCache, got {type(cache).__name__}")
    if cache.window is not None or cache.chunk is not None:
        raise ValueError(
            f"{owner}: expected a cache that keeps every token, got one with "
            f"window={cache.window} and chunk={cache.chunk}"
        )
    length = _cache_length(owner, cache_length)
    rows = _kept(owner, kept, len(cache) - length if length <= len(cache) else -1, length)
    if not rows:
        cache.crop(length)
        return
    assert cache.keys is not None and cache.values is not None  # it holds verified rows
    index = torch.tensor([length + r for r in rows], device=cache.keys.device)
    # Indexing copies: the kept rows survive the crop, then go in after the committed ones.
    keys, values = cache.keys.index_select(-2, index), cache.values.index_select(-2, index)
    cache.crop(length)
    cache.update(keys, values)


def _kept(owner: str, kept: object, verified: int, cache_length: int) -> list[int]:
    """Check ``kept``: distinct rows among ``verified`` ones (-1: fewer than committed)."""
    if verified < 0:
        raise ValueError(
            f"{owner}: cache_length = {cache_length} is more than the cache holds, "
            f"{cache_length + verified}"
        )
    rows = _tokens(owner, "kept", kept)
    for i, row in enumerate(rows):
        if not 0 <= row < verified:
            raise ValueError(
                f"{owner}: kept[{i}] = {row} is not a verified row: expected 0 to "
                f"{verified - 1} ({verified} tokens follow the {cache_length} committed ones)"
            )
    if len(set(rows)) != len(rows):
        raise ValueError(f"{owner}: expected each kept row once, got {rows}")
    return rows


def keep_accepted_paged(
    cache: PagedKVCache, seq_id: int, scratch_id: int, kept: Sequence[int]
) -> None:
    """Append the accepted rows of a verification to a paged sequence, and drop the rest.

    In a paged pool the tree is verified in a *scratch* sequence, ``fork(seq_id,
    scratch_id)`` then the tree's keys and values appended to it: the fork shares
    ``seq_id``'s blocks, and copy-on-write gives the scratch its own copy of a partly
    filled last block, so ``seq_id`` itself is never written. Here the accepted rows,
    ``kept`` (indices among the rows the scratch added), are appended to ``seq_id``,
    and the scratch is freed: its blocks return to the pool, the rejected branches
    with them. Nothing is copied but the accepted rows.

    Parameters
    ----------
    cache : PagedKVCache
    seq_id : int
        The sequence of committed tokens.
    scratch_id : int
        A fork of ``seq_id`` with the verified tokens appended; freed here. A scratch
        whose first blocks are not ``seq_id``'s full blocks is refused (a sequence
        shorter than one block cannot be told from its fork this way).
    kept : sequence of int
        Rows among the verified ones, as for :func:`keep_accepted`.

    Examples
    --------
    >>> import torch
    >>> pool = PagedKVCache(num_blocks=4, block_size=4, num_kv_heads=1, head_dim=1)
    >>> rows = torch.arange(7.0).view(7, 1, 1)
    >>> pool.add(0)
    >>> pool.update(0, rows[:3], rows[:3])  # 3 committed tokens
    >>> pool.fork(0, 1)  # the scratch, which verifies 4 more
    >>> pool.update(1, rows[3:], rows[3:])
    >>> keep_accepted_paged(pool, 0, 1, [0, 2])
    >>> pool.gather(0)[0].flatten().tolist(), pool.num_free_blocks
    ([0.0, 1.0, 2.0, 3.0, 5.0], 2)
    """
    owner = "keep_accepted_paged"
    if not isinstance(cache, PagedKVCache):
        raise TypeError(f"{owner}: cache must be a PagedKVCache, got {type(cache).__name__}")
    length, held = cache.num_tokens(seq_id), cache.num_tokens(scratch_id)
    if (
        seq_id == scratch_id
        or cache.block_table(scratch_id)[: length // cache.block_size]
        != (cache.block_table(seq_id)[: length // cache.block_size])
    ):
        raise ValueError(
            f"{owner}: expected scratch_id {scratch_id} to be a fork of seq_id {seq_id} "
            f"(sharing its full blocks), with the verified tokens appended"
        )
    rows = _kept(owner, kept, held - length if length <= held else -1, length)
    keys, values = cache.gather(scratch_id)  # (held, num_kv_heads, head_dim), copies
    index = torch.tensor([length + r for r in rows], dtype=torch.long)
    cache.free(scratch_id)  # first, so that its blocks can take the accepted rows
    cache.update(seq_id, keys.index_select(0, index), values.index_select(0, index))


# -- a small decoder, and decoding with it ------------------------------------------


class DecoderBlock(nn.Module):
    """One pre-norm block of a decoder: ``x + attention(norm(x))``, then ``x + mlp(norm(x))``.

    Llama's layout (and Mistral's, Qwen's...). The attention is the package's layer,
    run at the positions and with the mask given (:func:`attention_at_positions`).

    Parameters
    ----------
    attention : GroupedQueryAttention
        Without a window or chunks; ``d_in == d_out``, the model's width.
    mlp, attention_norm, mlp_norm : nn.Module
        Each maps ``(..., width)`` to ``(..., width)``: the feed-forward network and the
        norms before the attention and before the MLP.
    """

    def __init__(
        self,
        attention: GroupedQueryAttention,
        mlp: nn.Module,
        attention_norm: nn.Module,
        mlp_norm: nn.Module,
    ) -> None:
        super().__init__()
        owner = type(self).__name__
        if not isinstance(attention, GroupedQueryAttention):
            raise TypeError(
                f"{owner}: attention must be a GroupedQueryAttention, got "
                f"{type(attention).__name__}"
            )
        if attention.d_in != attention.d_out:
            raise ValueError(
                f"{owner}: expected an attention layer of d_in == d_out (the model's width), "
                f"got d_in={attention.d_in} and d_out={attention.d_out}"
            )
        for name, part in (
            ("mlp", mlp),
            ("attention_norm", attention_norm),
            ("mlp_norm", mlp_norm),
        ):
            if not isinstance(part, nn.Module):
                raise TypeError(f"{owner}: {name} must be an nn.Module, got {type(part).__name__}")
        self.attention, self.mlp = attention, mlp
        self.attention_norm, self.mlp_norm = attention_norm, mlp_norm

    def forward(
        self,
        x: torch.Tensor,
        positions: torch.Tensor,
        allowed: torch.Tensor,
        cache: KeyValueCache | None = None,
    ) -> torch.Tensor:
        """``(batch, n, width) -> (batch, n, width)``, at ``positions``, where ``allowed`` says.

        The arguments are :func:`attention_at_positions`'s.
        """
        normed = self.attention_norm(x)
        x = x + attention_at_positions(self.attention, normed, positions, allowed, cache)
        return x + self.mlp(self.mlp_norm(x))


class Decoder(nn.Module):
    """The smallest decoder-only language model around the package's attention layers.

    Token ids are embedded, go through the blocks, a final norm and the head, which
    gives the logits of the next token after each one. Each call takes the new tokens'
    positions and mask, so one call can verify a whole draft tree; :meth:`run_tree`
    builds both from the tree's parents and the caches' length.

    Parameters
    ----------
    embedding : nn.Module
        Token ids ``(batch, n)`` to vectors ``(batch, n, width)``, an ``nn.Embedding``.
    blocks : sequence of DecoderBlock
    norm : nn.Module
        The final norm.
    head : nn.Module
        ``(..., width)`` to ``(..., vocab_size)`` logits.

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> from attention import GroupedQueryAttention, RMSNorm, Rotary
    >>> _ = torch.manual_seed(0)
    >>> attention = GroupedQueryAttention(8, 8, 32, num_heads=2, num_kv_heads=1, rotary=Rotary(4))
    >>> block = DecoderBlock(attention, nn.Linear(8, 8), RMSNorm(8), RMSNorm(8))
    >>> model = Decoder(nn.Embedding(10, 8), [block], RMSNorm(8), nn.Linear(8, 10))
    >>> caches = model.new_caches()
    >>> model.run_tree([1, 2, 3], [-1, 0, 1], caches).shape  # a prefill: a chain
    torch.Size([3, 10])
    >>> model.run_tree([4, 5], [-1, -1], caches).shape  # two guesses for the 4th token
    torch.Size([2, 10])
    >>> len(caches), caches[0].seen_tokens
    (1, 5)
    """

    def __init__(
        self,
        embedding: nn.Module,
        blocks: Sequence[DecoderBlock],
        norm: nn.Module,
        head: nn.Module,
    ) -> None:
        super().__init__()
        owner = type(self).__name__
        for name, part in (("embedding", embedding), ("norm", norm), ("head", head)):
            if not isinstance(part, nn.Module):
                raise TypeError(f"{owner}: {name} must be an nn.Module, got {type(part).__name__}")
        if isinstance(blocks, nn.Module) or not isinstance(blocks, Sequence) or not blocks:
            raise TypeError(
                f"{owner}: blocks must be a non-empty list of DecoderBlock, got {blocks!r}"
            )
        for i, block in enumerate(blocks):
            if not isinstance(block, DecoderBlock):
                raise TypeError(
                    f"{owner}: blocks[{i}] must be a DecoderBlock, got {type(block).__name__}"
                )
        self.embedding, self.norm, self.head = embedding, norm, head
        self.blocks = nn.ModuleList(blocks)

    @classmethod
    def from_transformers(cls, model: nn.Module) -> Decoder:
        """A ``transformers`` Llama-family causal language model as a :class:`Decoder`.

        Each decoder layer becomes a :class:`DecoderBlock`: its attention is the
        package's (:func:`~attention.models.from_transformers`, the same weights), its MLP
        the model's own module, and its two RMS norms the package's
        :class:`~attention.RMSNorm` with the same scale and ``eps``. ``transformers``' RMS
        norms compute in float32 whatever the input; the package's compute in the model's
        dtype, so a float64 model stays float64 throughout. The embedding and the head
        are the model's own modules, shared, not copied: changing the model's weights
        changes the decoder's.

        Parameters
        ----------
        model : transformers.PreTrainedModel
            A causal language model of one of
            :data:`~attention.serving.SUPPORTED_MODEL_TYPES` (``LlamaForCausalLM``,
            ``Qwen3ForCausalLM``), built from a config or loaded, with full causal
            attention (no sliding window).

        Returns
        -------
        Decoder
            In the model's dtype and training mode. Its logits after ``n`` tokens,
            ``(n, vocab_size)``, are the model's; in float64 they agree to float32's
            tolerance, since ``transformers`` computes RoPE's angles in float32.

        Raises
        ------
        TypeError
            For a ``model`` that is not a ``transformers`` model (no ``config``).
        ValueError
            For a model type other than those supported.

        Examples
        --------
        >>> import torch
        >>> from transformers import LlamaConfig, LlamaForCausalLM
        >>> _ = torch.manual_seed(0)
        >>> config = LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32,
        ...                      num_hidden_layers=2, num_attention_heads=4,
        ...                      num_key_value_heads=2)
        >>> model = LlamaForCausalLM(config).double().eval()
        >>> decoder = Decoder.from_transformers(model)
        >>> prompt = [5, 6, 7, 8]
        >>> with torch.no_grad():
        ...     ours = decoder.run_tree(prompt, [-1, 0, 1, 2], decoder.new_caches())
        ...     theirs = model(torch.tensor([prompt])).logits[0]
        >>> ours.shape, torch.allclose(ours, theirs, atol=1e-5, rtol=0)
        (torch.Size([4, 32]), True)
        >>> Decoder.from_transformers(torch.nn.Linear(2, 2))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
            ...
        TypeError: Decoder.from_transformers: model must be a transformers causal ... got Linear
        """
        owner = f"{cls.__name__}.from_transformers"
        model_type = getattr(getattr(model, "config", None), "model_type", None)
        if not isinstance(model, nn.Module) or model_type is None:
            raise TypeError(
                f"{owner}: model must be a transformers causal language model, got "
                f"{type(model).__name__}"
            )
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise ValueError(
                f"{owner}: model_type must be one of {SUPPORTED_MODEL_TYPES}, got {model_type!r}"
            )
        # transformers' modules, read by their public attribute names
        causal_lm: Any = model
        decoder: Any = causal_lm.model

        def norm(theirs: Any) -> RMSNorm:
            ours = RMSNorm(theirs.weight.shape[0], eps=theirs.variance_epsilon)
            ours = ours.to(device=theirs.weight.device, dtype=theirs.weight.dtype)
            ours.weight.data.copy_(theirs.weight.detach())
            return ours

        # from_transformers may return other kinds of layer; DecoderBlock checks it is
        # a GroupedQueryAttention, as every supported model type's is.
        attention: list[Any] = [from_transformers(layer.self_attn) for layer in decoder.layers]
        blocks = [
            DecoderBlock(
                layer_attention,
                layer.mlp,
                norm(layer.input_layernorm),
                norm(layer.post_attention_layernorm),
            )
            for layer, layer_attention in zip(decoder.layers, attention, strict=True)
        ]
        built = cls(decoder.embed_tokens, blocks, norm(decoder.norm), causal_lm.lm_head)
        return built.train(model.training)

    def new_caches(self) -> list[KVCache]:
        """One empty :class:`~attention.KVCache` per block."""
        return [KVCache() for _ in self.blocks]

    def forward(
        self,
        tokens: Sequence[int] | torch.Tensor,
        positions: torch.Tensor,
        allowed: torch.Tensor,
        caches: Sequence[KeyValueCache],
    ) -> torch.Tensor:
        """The logits after each new token, ``(n, vocab_size)``, its keys and values cached.

        ``tokens`` are ``n`` token ids; ``positions`` ``(n,)`` and ``allowed`` ``(n,
        num_cached + n)`` as for :func:`attention_at_positions`; ``caches`` one per block.
        """
        owner = type(self).__name__
        ids = _tokens(owner, "tokens", tokens)
        if isinstance(caches, KeyValueCache) or len(caches) != len(self.blocks):
            raise ValueError(
                f"{owner}: expected a list of one cache per block, {len(self.blocks)}, got "
                f"{caches!r}"
            )
        device = next(self.parameters()).device
        x = self.embedding(torch.tensor([ids], dtype=torch.long, device=device))
        for block, cache in zip(self.blocks, caches, strict=True):
            x = block(x, positions, allowed, cache)
        return self.head(self.norm(x))[0]

    def run_tree(
        self,
        tokens: Sequence[int] | torch.Tensor,
        parents: Sequence[int],
        caches: Sequence[KeyValueCache],
    ) -> torch.Tensor:
        """The logits after each node of a tree, ``(n, vocab_size)``, run after the caches.

        Node ``i`` holds ``tokens[i]``; ``parents`` as for :func:`tree_attention_mask`.
        A chain, ``[-1, 0, 1, ...]``, is a plain causal pass (a prefill).
        """
        length = caches[0].seen_tokens if len(caches) else 0
        device = next(self.parameters()).device
        positions = tree_positions(parents, length, device=device)
        return self(tokens, positions, tree_cache_mask(parents, length, device=device), caches)


def _chain(n: int) -> list[int]:
    """The parents of ``n`` tokens one after the other."""
    return list(range(-1, n - 1))


def _prompt_and_count(owner: str, model: Decoder, prompt: object, max_new_tokens: object):
    if not isinstance(model, Decoder):
        raise TypeError(f"{owner}: expected a Decoder, got {type(model).__name__}")
    prompt = _tokens(owner, "prompt", prompt)
    if not prompt:
        raise ValueError(f"{owner}: expected a prompt of at least one token, got none")
    what = "max_new_tokens must be an int >= 0"
    count = _checks.whole_number(owner, max_new_tokens, what)
    if count < 0:
        raise ValueError(f"{owner}: {what}, got {count}")
    return prompt, count


@torch.no_grad()
def greedy_decode(model: Decoder, prompt: Sequence[int], max_new_tokens: int) -> list[int]:
    """The model's own greedy tokens after ``prompt``: one call per token, the reference.

    Returns
    -------
    list of int
        ``max_new_tokens`` token ids, each the argmax of the logits after the last.
    """
    prompt, count = _prompt_and_count("greedy_decode", model, prompt, max_new_tokens)
    caches, new = model.new_caches(), list[int]()
    logits = model.run_tree(prompt, _chain(len(prompt)), caches)
    while len(new) < count:
        new.append(int(logits[-1].argmax()))
        if len(new) < count:
            logits = model.run_tree(new[-1:], [-1], caches)
    return new


@dataclass(frozen=True)
class SpeculativeOutput:
    """What :func:`speculative_decode` made.

    Attributes
    ----------
    tokens : list of int
        The new tokens, as many as asked for: the target's own greedy tokens.
    accepted_per_step : list of int
        The tokens each target call accepted (the path through the draft tree and the
        bonus token): between 1 and the tree's depth plus 1.
    """

    tokens: list[int]
    accepted_per_step: list[int]

    @property
    def mean_accepted(self) -> float:
        """Tokens per target call, on average; 1.0 is plain greedy decoding's."""
        return sum(self.accepted_per_step) / max(len(self.accepted_per_step), 1)


def _propose(
    draft: Decoder, caches: list[KVCache], pending: list[int], branching: tuple[int, ...]
) -> tuple[list[int], list[int], int]:
    """The draft's tree after ``pending``: its parents, its tokens, and the nodes cached.

    ``pending`` are the committed tokens the draft has not seen, the last accepted one
    last. Each node at depth ``d`` gets the draft's ``branching[d]`` likeliest tokens as
    children, one draft call per depth; the last depth's nodes are not run. The draft's
    caches then hold the last accepted token and every node but the last depth's, in
    the tree's order. Returns the tree without the last accepted token (its children
    are the roots), and how many of the verified rows (it and the nodes) are cached.
    """
    logits = draft.run_tree(pending, _chain(len(pending)), caches)[-1:]
    committed = caches[0].seen_tokens - 1  # before the last accepted token, the tree's root
    parents, tokens = [-1], [pending[-1]]  # the tree with its root, in verification's order
    frontier = [0]
    for depth, width in enumerate(branching):
        new = []
        for row, node in enumerate(frontier):
            for token in logits[row].topk(width).indices.tolist():
                parents.append(node)
                tokens.append(token)
                new.append(len(parents) - 1)
        if depth == len(branching) - 1:
            break
        # The new nodes see the committed tokens, then their ancestors among the cached.
        tree = tree_attention_mask(parents)[new]
        seen = torch.ones(len(new), committed, dtype=torch.bool)
        positions = torch.full((len(new),), committed + depth + 1, dtype=torch.long)
        logits = draft([tokens[i] for i in new], positions, torch.cat((seen, tree), 1), caches)
        frontier = new
    cached = len(parents) - len(new)
    return [p - 1 for p in parents[1:]], tokens[1:], cached


@torch.no_grad()
def speculative_decode(
    target: Decoder,
    draft: Decoder,
    prompt: Sequence[int],
    max_new_tokens: int,
    *,
    branching: Sequence[int] = (2, 2),
) -> SpeculativeOutput:
    """Greedy speculative decoding with a draft tree: the target's tokens, in fewer calls.

    Each step the draft proposes a tree after the last accepted token, ``branching[d]``
    children for each node at depth ``d`` (its likeliest tokens); the target verifies
    the last accepted token and the whole tree in one call (:meth:`Decoder.run_tree`);
    :func:`greedy_accept` keeps the longest path the target's greedy choices follow and
    the bonus token; :func:`keep_accepted` rolls both models' caches back to that path.

    Parameters
    ----------
    target, draft : Decoder
        Of one vocabulary; each keeps its own caches, made here.
    prompt : sequence of int
        At least one token id.
    max_new_tokens : int
    branching : sequence of int
        The children of each node at each depth: ``(1, 1, 1)`` is a chain of three
        guesses, ``(2, 2)`` a tree of 2 + 4 nodes. Each between 1 and the vocabulary.

    Returns
    -------
    SpeculativeOutput
        The tokens, equal to ``greedy_decode(target, prompt, max_new_tokens)``, and the
        tokens accepted per target call.

    Examples
    --------
    A target as its own draft: every guess is accepted, three tokens per call.

    >>> import torch
    >>> from torch import nn
    >>> from attention import GroupedQueryAttention, RMSNorm, Rotary
    >>> _ = torch.manual_seed(0)
    >>> attention = GroupedQueryAttention(8, 8, 32, num_heads=2, num_kv_heads=1, rotary=Rotary(4))
    >>> block = DecoderBlock(attention, nn.Linear(8, 8), RMSNorm(8), RMSNorm(8))
    >>> model = Decoder(nn.Embedding(10, 8), [block], RMSNorm(8), nn.Linear(8, 10))
    >>> out = speculative_decode(model, model, [1, 2, 3], 9, branching=(2, 1))
    >>> out.tokens == greedy_decode(model, [1, 2, 3], 9), out.accepted_per_step
    (True, [3, 3, 3])
    """
    owner = "speculative_decode"
    prompt, count = _prompt_and_count(owner, target, prompt, max_new_tokens)
    if not isinstance(draft, Decoder):
        raise TypeError(f"{owner}: expected a Decoder as the draft, got {type(draft).__name__}")
    if isinstance(branching, str | bytes) or not isinstance(branching, Sequence) or not branching:
        raise TypeError(f"{owner}: branching must be a non-empty list of ints, got {branching!r}")
    widths = tuple(
        _checks.positive_int(owner, f"branching[{i}]", b) for i, b in enumerate(branching)
    )
    target_caches, draft_caches = target.new_caches(), draft.new_caches()
    if len(prompt) > 1:  # the target's caches hold every committed token but the last
        target.run_tree(prompt[:-1], _chain(len(prompt) - 1), target_caches)
    pending = list(prompt)  # committed tokens the draft has not seen, the last accepted last
    tokens: list[int] = []
    accepted: list[int] = []
    while len(tokens) < count:
        committed = target_caches[0].seen_tokens  # every committed token but the last
        parents, guesses, cached = _propose(draft, draft_caches, pending, widths)
        with_root = [-1] + [0 if p == -1 else p + 1 for p in parents]  # the last token first
        logits = target.run_tree([pending[-1], *guesses], with_root, target_caches)
        verdict = greedy_accept(parents, guesses, logits)
        rows = [0] + [node + 1 for node in verdict.path]  # the last token, then the path
        for cache in target_caches:
            keep_accepted(cache, committed, rows)
        for cache in draft_caches:  # the draft ran all but the last depth's nodes
            keep_accepted(cache, committed, [row for row in rows if row < cached])
        # The draft has yet to see the path's nodes it never ran, and the bonus token.
        pending = [guesses[node] for node in verdict.path if node + 1 >= cached]
        pending.append(verdict.bonus)
        tokens += verdict.tokens
        accepted.append(len(verdict.tokens))
    return SpeculativeOutput(tokens[:count], accepted)
