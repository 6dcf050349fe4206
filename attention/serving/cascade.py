"""Cascade attention: requests that share a prefix read its keys once, together.

When many requests start with the same system prompt, a paged cache stores its keys
and values once (chapter 28's shared blocks), but plain decoding still reads them once
per request: each request's query walks the shared blocks on its own. Cascade
attention (FlashInfer's name; vLLM and SGLang have it too) splits each request's keys
in two. The shared prefix is read in one batched call by every request's queries at
once; each request's own suffix is read apart. The two partial results are exact
pieces of one softmax, and chapter 34's log-sum-exp merge,
:func:`~attention.merge.merge_attention_states`, joins them: the result is attention
over prefix and suffix together, to rounding.

A request's own suffix splits once more: its new tokens see every earlier suffix token,
and each other causally. The causal block is one more part of the merge, so no mask
tensor is ever built.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attention import _checks
from attention.merge import merge_attention_states
from attention.tiled import tiled_attention

__all__ = ["cascade_attention"]


def _tensors(owner: str, name: str, tensors: object) -> list[torch.Tensor]:
    """Check a list (or tuple) of tensors; return it as a list."""
    if not isinstance(tensors, Sequence) or isinstance(tensors, str | bytes | torch.Tensor):
        raise TypeError(
            f"{owner}: {name} must be a list of tensors, one per request, got "
            f"{type(tensors).__name__}"
        )
    return [
        _checks.float_tensor(owner, f"{name}[{i}]", t, 3, "(heads, num_tokens, dim)")
        for i, t in enumerate(tensors)
    ]


def _check(
    owner: str,
    queries: list[torch.Tensor],
    prefix_keys: torch.Tensor,
    prefix_values: torch.Tensor,
    suffix_keys: list[torch.Tensor],
    suffix_values: list[torch.Tensor],
) -> None:
    """Raise unless the requests' tensors fit together, as the docstring says."""
    if not queries or not len(queries) == len(suffix_keys) == len(suffix_values):
        raise ValueError(
            f"{owner}: expected at least one request, with as many suffix_keys and "
            f"suffix_values as queries, got {len(queries)} queries, {len(suffix_keys)} "
            f"suffix_keys and {len(suffix_values)} suffix_values"
        )
    kv_heads, _, head_dim = prefix_keys.shape
    value_dim = prefix_values.shape[-1]
    first = queries[0]
    every = [prefix_keys, prefix_values, *queries, *suffix_keys, *suffix_values]
    if len({(t.dtype, t.device) for t in every}) > 1:
        raise ValueError(
            f"{owner}: expected every tensor of one dtype and device, got "
            + ", ".join(sorted({f"{t.dtype} on {t.device}" for t in every}))
        )
    if prefix_values.shape[:2] != (kv_heads, prefix_keys.shape[1]):
        raise ValueError(
            f"{owner}: expected prefix_values of shape (num_kv_heads, num_prefix, value_dim) "
            f"= ({kv_heads}, {prefix_keys.shape[1]}, value_dim), got "
            f"{tuple(prefix_values.shape)}"
        )
    num_heads = first.shape[0]
    if num_heads % kv_heads:
        raise ValueError(
            f"{owner}: expected num_kv_heads dividing num_heads, got {kv_heads} key/value "
            f"heads and {num_heads} query heads"
        )
    for i, (q, k, v) in enumerate(zip(queries, suffix_keys, suffix_values, strict=True)):
        suffix = k.shape[1]
        if (
            q.shape[0] != num_heads
            or q.shape[2] != head_dim
            or k.shape != (kv_heads, suffix, head_dim)
            or v.shape != (kv_heads, suffix, value_dim)
            or not 1 <= q.shape[1] <= suffix
        ):
            raise ValueError(
                f"{owner}: expected request {i}'s queries of shape (num_heads, num_new, "
                f"head_dim) = ({num_heads}, num_new, {head_dim}), its suffix_keys of shape "
                f"({kv_heads}, num_suffix, {head_dim}) and suffix_values of shape "
                f"({kv_heads}, num_suffix, {value_dim}), with 1 <= num_new <= num_suffix "
                f"(its new tokens are its suffix's last), got {tuple(q.shape)}, "
                f"{tuple(k.shape)} and {tuple(v.shape)}"
            )


def cascade_attention(
    queries: Sequence[torch.Tensor],
    prefix_keys: torch.Tensor,
    prefix_values: torch.Tensor,
    suffix_keys: Sequence[torch.Tensor],
    suffix_values: Sequence[torch.Tensor],
) -> list[torch.Tensor]:
    """Attention of several requests over a shared prefix and their own suffixes.

    Request ``r``'s keys are the shared prefix's, then its own suffix's; its new
    tokens are the last ``num_new`` of its suffix, and each sees the whole prefix, the
    suffix before the new tokens, and the new tokens up to itself (causal). The prefix
    is attended once, in one call with every request's queries stacked; each suffix
    apart; :func:`~attention.merge.merge_attention_states` joins the parts. Query head
    ``h`` reads key/value head ``h // (num_heads // num_kv_heads)``, with the scale
    ``1 / sqrt(head_dim)``.

    Parameters
    ----------
    queries : sequence of torch.Tensor, each of shape (num_heads, num_new, head_dim)
        Each request's new tokens' queries, ``num_new >= 1`` (1 while decoding).
    prefix_keys : torch.Tensor, shape (num_kv_heads, num_prefix, head_dim)
    prefix_values : torch.Tensor, shape (num_kv_heads, num_prefix, value_dim)
        The shared prefix's keys and values; ``num_prefix`` may be 0.
    suffix_keys : sequence of torch.Tensor, each of shape (num_kv_heads, num_suffix, head_dim)
    suffix_values : sequence of torch.Tensor, each of shape (num_kv_heads, num_suffix, value_dim)
        Each request's own tokens after the prefix, its new ones last
        (``num_suffix >= num_new``).

    Returns
    -------
    list of torch.Tensor, each of shape (num_heads, num_new, value_dim)
        Per request, what attention over its prefix and suffix together gives.

    Raises
    ------
    TypeError
        For arguments that are not tensors, or lists of them.
    ValueError
        For no request, lists of different lengths, shapes that do not fit, or tensors
        of different dtypes or devices.

    Examples
    --------
    Three requests decode a token each after a shared prompt of 6 tokens; their own
    suffixes hold 2, 1 and 4 tokens, the new one included:

    >>> import torch
    >>> from attention import attend
    >>> _ = torch.manual_seed(0)
    >>> prefix_k, prefix_v = torch.randn(2, 6, 8), torch.randn(2, 6, 8)  # 2 kv heads
    >>> suffix_k = [torch.randn(2, n, 8) for n in (2, 1, 4)]
    >>> suffix_v = [torch.randn(2, n, 8) for n in (2, 1, 4)]
    >>> queries = [torch.randn(4, 1, 8) for _ in range(3)]  # 4 query heads, 1 new token
    >>> outs = cascade_attention(queries, prefix_k, prefix_v, suffix_k, suffix_v)
    >>> [tuple(out.shape) for out in outs]
    [(4, 1, 8), (4, 1, 8), (4, 1, 8)]
    >>> k, v = torch.cat((prefix_k, suffix_k[2]), 1), torch.cat((prefix_v, suffix_v[2]), 1)
    >>> torch.allclose(outs[2], attend(queries[2][None], k[None], v[None])[0], atol=1e-6)
    True
    """
    owner = "cascade_attention"
    queries = _tensors(owner, "queries", queries)
    suffix_keys = _tensors(owner, "suffix_keys", suffix_keys)
    suffix_values = _tensors(owner, "suffix_values", suffix_values)
    layout = "(num_kv_heads, num_prefix, dim)"
    prefix_keys = _checks.float_tensor(owner, "prefix_keys", prefix_keys, 3, layout)
    prefix_values = _checks.float_tensor(owner, "prefix_values", prefix_values, 3, layout)
    _check(owner, queries, prefix_keys, prefix_values, suffix_keys, suffix_values)
    news = [q.shape[1] for q in queries]
    parts: list[tuple[list[torch.Tensor], list[torch.Tensor]]] = [([], []) for _ in queries]
    if prefix_keys.shape[1]:
        # The shared prefix, once: every request's queries stacked along the tokens.
        stacked = torch.cat(queries, dim=1)  # (num_heads, sum of num_new, head_dim)
        out, lse = tiled_attention(stacked, prefix_keys, prefix_values, return_lse=True)
        for (outs, lses), o, s in zip(parts, out.split(news, 1), lse.split(news, 1), strict=True):
            outs.append(o)
            lses.append(s)
    for (outs, lses), q, k, v in zip(parts, queries, suffix_keys, suffix_values, strict=True):
        earlier = k.shape[1] - q.shape[1]  # suffix tokens before the new ones: all seen
        if earlier:
            out, lse = tiled_attention(q, k[:, :earlier], v[:, :earlier], return_lse=True)
            outs.append(out)
            lses.append(lse)
        # The new tokens among themselves: causal, with as many keys as queries.
        k_new, v_new = k[:, earlier:], v[:, earlier:]
        out, lse = tiled_attention(q, k_new, v_new, causal=True, return_lse=True)
        outs.append(out)
        lses.append(lse)
    return [merge_attention_states(outs, lses)[0] for outs, lses in parts]
