"""Self-attention without trainable weights (section 3.3 of the book).

Each token's embedding is its own query, key and value: the score of token ``j`` for
query ``i`` is the dot product ``x_i . x_j``, a softmax turns each row of scores into
attention weights, and each context vector is the weighted sum of all embeddings.

>>> from attention import INPUTS
>>> simple_self_attention(INPUTS)[1]  # the context vector of "journey"
tensor([0.4419, 0.6515, 0.5683])
"""

from __future__ import annotations

import torch

from attention._checks import float_tensor


def _check_inputs(owner: str, inputs: object) -> torch.Tensor:
    return float_tensor(owner, "inputs", inputs, 2, "(num_tokens, d)")


def scores_for_query(query: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
    """Attention scores of one query against every token: ``inputs @ query``.

    Parameters
    ----------
    query : torch.Tensor, shape (d,)
        The embedding of the token that is asking, e.g. ``INPUTS[1]``.
    inputs : torch.Tensor, shape (num_tokens, d)
        The embeddings of all tokens.

    Returns
    -------
    torch.Tensor, shape (num_tokens,)
        Entry ``j`` is the dot product ``query . inputs[j]``.

    Examples
    --------
    >>> from attention import INPUTS
    >>> scores_for_query(INPUTS[1], INPUTS)
    tensor([0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865])
    """
    inputs = _check_inputs("scores_for_query", inputs)
    query = float_tensor("scores_for_query", "query", query)
    if query.shape != inputs.shape[1:]:
        raise ValueError(
            f"scores_for_query: expected a query of shape ({inputs.shape[1]},) to match "
            f"inputs of shape {tuple(inputs.shape)}, got shape {tuple(query.shape)}; "
            f"pass one row of the inputs, such as inputs[1]"
        )
    return inputs @ query


def scores_for_all(inputs: torch.Tensor) -> torch.Tensor:
    """Attention scores of every token against every token: ``inputs @ inputs.T``.

    Parameters
    ----------
    inputs : torch.Tensor, shape (num_tokens, d)

    Returns
    -------
    torch.Tensor, shape (num_tokens, num_tokens)
        Row ``i`` holds the scores of query ``i``. The matrix is symmetric, because
        here each token is its own query and key.

    Examples
    --------
    >>> from attention import INPUTS
    >>> scores_for_all(INPUTS)[1]
    tensor([0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865])
    """
    inputs = _check_inputs("scores_for_all", inputs)
    return inputs @ inputs.T


def softmax_naive(scores: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax straight from the formula, ``exp(x) / sum(exp(x))``.

    Correct for small scores, but ``exp`` overflows to ``inf`` for scores above about
    88 in float32, and the result becomes ``nan``. Use :func:`softmax_stable`.

    Parameters
    ----------
    scores : torch.Tensor, any shape
    dim : int
        The dimension that sums to 1 afterwards.

    Examples
    --------
    >>> import torch
    >>> softmax_naive(torch.tensor([1.0, 2.0, 3.0]))
    tensor([0.0900, 0.2447, 0.6652])
    >>> softmax_naive(torch.tensor([1000.0, 1001.0]))  # exp(1000) overflows
    tensor([nan, nan])
    """
    scores = float_tensor("softmax_naive", "scores", scores)
    exp = torch.exp(scores)
    # keepdim=True keeps the summed dimension, so each row (or column) is divided by
    # its own total rather than broadcast against the wrong axis.
    return exp / exp.sum(dim=dim, keepdim=True)


def softmax_stable(scores: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax that cannot overflow: subtract the maximum before ``exp``.

    ``softmax(x) == softmax(x - c)`` for any constant ``c``; with ``c = max(x)`` every
    exponent is at most 0, so ``exp`` stays in (0, 1]. This is what ``torch.softmax``
    does. The parameters are those of :func:`softmax_naive`.

    Examples
    --------
    >>> import torch
    >>> softmax_stable(torch.tensor([1000.0, 1001.0]))
    tensor([0.2689, 0.7311])
    """
    scores = float_tensor("softmax_stable", "scores", scores)
    exp = torch.exp(scores - scores.amax(dim=dim, keepdim=True))
    return exp / exp.sum(dim=dim, keepdim=True)


def attention_weights(scores: torch.Tensor) -> torch.Tensor:
    """Normalise scores into attention weights: a softmax over the last dimension.

    The last dimension runs over the keys, so each query's weights sum to 1.

    Parameters
    ----------
    scores : torch.Tensor, shape (..., num_keys)

    Returns
    -------
    torch.Tensor, same shape as ``scores``

    Examples
    --------
    >>> from attention import INPUTS
    >>> attention_weights(scores_for_query(INPUTS[1], INPUTS))
    tensor([0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581])
    """
    float_tensor("attention_weights", "scores", scores)
    return softmax_stable(scores, dim=-1)


def context_vectors(weights: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
    """Weighted sums of the inputs: ``weights @ inputs``.

    Parameters
    ----------
    weights : torch.Tensor, shape (num_tokens,) or (num_queries, num_tokens)
        Attention weights of one query, or one row per query.
    inputs : torch.Tensor, shape (num_tokens, d)

    Returns
    -------
    torch.Tensor, shape (d,) or (num_queries, d)

    Examples
    --------
    >>> from attention import INPUTS
    >>> weights = attention_weights(scores_for_query(INPUTS[1], INPUTS))
    >>> context_vectors(weights, INPUTS)
    tensor([0.4419, 0.6515, 0.5683])
    """
    inputs = _check_inputs("context_vectors", inputs)
    weights = float_tensor("context_vectors", "weights", weights)
    if weights.dim() not in (1, 2) or weights.shape[-1] != inputs.shape[0]:
        raise ValueError(
            f"context_vectors: expected weights of shape ({inputs.shape[0]},) or "
            f"(num_queries, {inputs.shape[0]}), one weight per input token, "
            f"got shape {tuple(weights.shape)}"
        )
    return weights @ inputs


def simple_self_attention(inputs: torch.Tensor) -> torch.Tensor:
    """Context vectors of every token, with no trainable weights.

    Scores ``inputs @ inputs.T``, a softmax over each row, then ``weights @ inputs``.

    Parameters
    ----------
    inputs : torch.Tensor, shape (num_tokens, d)

    Returns
    -------
    torch.Tensor, shape (num_tokens, d)

    Examples
    --------
    >>> from attention import INPUTS
    >>> simple_self_attention(INPUTS)
    tensor([[0.4421, 0.5931, 0.5790],
            [0.4419, 0.6515, 0.5683],
            [0.4431, 0.6496, 0.5671],
            [0.4304, 0.6298, 0.5510],
            [0.4671, 0.5910, 0.5266],
            [0.4177, 0.6503, 0.5645]])
    """
    inputs = _check_inputs("simple_self_attention", inputs)
    weights = attention_weights(scores_for_all(inputs))  # (num_tokens, num_tokens)
    return weights @ inputs  # (num_tokens, d)
