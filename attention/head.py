"""One head of causal self-attention in Karpathy's ``(B, T, C)`` notation.

``B`` is the batch size, ``T`` the number of tokens ("time"), ``C`` the embedding
size ("channels"). The same computation as :class:`~attention.CausalAttention`, written
the way "Let's build GPT" writes it.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from attention import _checks


class Head(nn.Module):
    """One head of causal self-attention, as in "Let's build GPT".

    Every token emits a query ("what am I looking for?") and a key ("what do I
    contain?"); their dot product is the affinity ``wei``. The value is what the
    token passes on to whoever attends to it.

    Parameters
    ----------
    n_embd : int
        ``C``, the size of each input embedding.
    head_size : int
        Size of each key, query, value and output vector.
    block_size : int
        The most tokens the head accepts (the book's ``context_length``).
    dropout : float
        Dropout probability on the affinities, in [0, 1).

    Attributes
    ----------
    tril : torch.Tensor
        Booleans of shape ``(block_size, block_size)``, ``True`` on and below the
        diagonal: where a token may look. A buffer.

    Shapes
    ------
    Input ``(B, T, C)`` with ``T <= block_size``; output ``(B, T, head_size)``.

    Examples
    --------
    >>> import torch
    >>> _ = torch.manual_seed(1337)
    >>> head = Head(n_embd=32, head_size=16, block_size=8)
    >>> x = torch.randn(4, 8, 32)  # (B, T, C)
    >>> head(x).shape
    torch.Size([4, 8, 16])
    """

    tril: torch.Tensor  # a buffer: register_buffer("tril", ...) in __init__

    def __init__(self, n_embd: int, head_size: int, block_size: int, dropout: float = 0.0):
        super().__init__()
        self.n_embd, self.head_size, self.block_size = _checks.sizes(
            type(self).__name__, n_embd=n_embd, head_size=head_size, block_size=block_size
        )
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer("tril", torch.ones(block_size, block_size, dtype=torch.bool).tril())
        self.dropout = nn.Dropout(_checks.dropout_rate(type(self).__name__, dropout))

    def attention_weights(self, x: torch.Tensor) -> torch.Tensor:
        """The affinities ``wei`` after softmax and dropout, shape ``(B, T, T)``."""
        names = ("n_embd", "block_size")
        _checks.module_input(self, x, d_in=self.n_embd, context_length=self.block_size, names=names)
        B, T, C = x.shape  # noqa: RUF059 (the notation is the point; only T is used)
        k = self.key(x)  # (B, T, head_size)
        q = self.query(x)  # (B, T, head_size)
        # Scale by 1/sqrt(head_size) so wei has unit variance at initialisation and the
        # softmax stays diffuse instead of collapsing onto the largest affinity.
        wei = q @ k.transpose(-2, -1) * self.head_size**-0.5  # (B, T, T)
        wei = wei.masked_fill(~self.tril[:T, :T], float("-inf"))  # no peeking ahead
        wei = F.softmax(wei, dim=-1)  # (B, T, T)
        return self.dropout(wei)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        wei = self.attention_weights(x)  # (B, T, T)
        v = self.value(x)  # (B, T, head_size)
        return wei @ v  # (B, T, head_size)
