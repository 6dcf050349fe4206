"""Compressed attention (DeepSeek-V4): a window of recent tokens, and summaries of the rest.

Every layer of DeepSeek-V4 attends to a sliding window of raw tokens, with one
key/value vector per token (the key is the value) and an attention sink per head. Two
kinds of layer also attend to *compressed entries*, one learned summary per group of
tokens:

* **CSA** (compressed sparse attention): one entry per ``rate`` tokens (4 in V4), each
  a gated weighted sum over ``2 * rate`` tokens, so neighbouring entries overlap; a
  lightning indexer (:class:`CompressedIndexer`) then picks ``top_k`` of the entries
  for each query.
* **HCA** (heavily compressed attention): one entry per ``rate`` tokens (128 in V4),
  each over its own group only, and every entry read.

The pieces, each as ``transformers`` 5.23 computes it:

* :class:`TokenCompressor`: a group of tokens becomes one entry
  (``DeepseekV4CSACompressor`` and ``DeepseekV4HCACompressor``, without the indexer).
* :class:`CompressedIndexer`: the scores of the entries for each query, and the
  ``top_k`` picks (``DeepseekV4Indexer``).
* :class:`CompressedAttention`: the whole layer, sliding, CSA or HCA
  (``DeepseekV4Attention``).
* :class:`CompressedCache` and :class:`CompressorState`: what decoding keeps, the
  window's keys, the entries made so far, and the tokens waiting for their group to
  fill, with their gates (``DeepseekV4CSACache``, ``DeepseekV4HCACache``).

A query at position ``t`` sees entry ``w`` once its group is complete, when
``(w + 1) * rate <= t + 1``; until then it sees only the window. RoPE turns the last
``rope_dim`` numbers of each vector, its pairs neighbours, and an entry turns as the
first token of its group.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn
from torch.nn import functional as F

from attention import _checks
from attention.cache import _CacheBase, _check_cache
from attention.kv_cache import KVCache
from attention.norms import RMSNorm
from attention.rope import Rotary

__all__ = [
    "CompressedAttention",
    "CompressedCache",
    "CompressedIndexer",
    "CompressorState",
    "TokenCompressor",
]


def _rotate_last(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Turn the last ``2 * cos.shape[-1]`` numbers of ``x`` in neighbouring pairs.

    ``x`` is ``(..., num_tokens, dim)``, ``cos`` and ``sin`` ``(num_tokens, rope_dim / 2)``.
    The numbers before the rotary part pass unchanged, and each pair stays where it
    was: V4's layout (``transformers``' ``apply_rotary_pos_emb`` for DeepSeek-V4). A
    negated ``sin`` turns them back.
    """
    rope_dim = 2 * cos.shape[-1]
    rest, turned = x[..., :-rope_dim], x[..., -rope_dim:]
    even, odd = turned[..., 0::2], turned[..., 1::2]
    pairs = torch.stack((even * cos - odd * sin, odd * cos + even * sin), dim=-1)
    return torch.cat((rest, pairs.flatten(-2)), dim=-1)


def _rope(owner: str, rope_dim: int, base: float, scaling: Mapping | None) -> Rotary:
    """The table of V4's RoPE, ``rope_dim`` numbers of each vector turning."""
    rope_dim = _checks.positive_int(owner, "rope_dim", rope_dim)
    return Rotary(rope_dim, base, scaling)


class CompressorState:
    """What one :class:`TokenCompressor` keeps between calls, for one sequence.

    Empty when made; a compressor fills it. Each tensor may also be given, as
    attributes of the same names, to hand a :class:`CompressedCache` a state built
    elsewhere (:meth:`CompressedCache.holding` checks their shapes).

    Attributes
    ----------
    entries : torch.Tensor or None
        The entries made so far, rotated (``compressed_kv``), shape ``(batch,
        num_entries, head_dim)``.
    waiting_kv, waiting_gate : torch.Tensor or None
        The projections and gates of the tokens whose group is not full yet
        (``buffer_kv``, ``buffer_gate``), shape ``(batch, num_waiting, width)``;
        ``width`` is ``2 * head_dim`` where groups overlap, ``head_dim`` otherwise.
    overlap_kv, overlap_gate : torch.Tensor or None
        Overlapping groups only: the last full group's first half, which the next entry
        also reads (``overlap_kv``, ``overlap_gate``; the gates with the position bias
        added), shape ``(batch, rate, head_dim)``.
    """

    def __init__(
        self,
        *,
        entries: torch.Tensor | None = None,
        waiting_kv: torch.Tensor | None = None,
        waiting_gate: torch.Tensor | None = None,
        overlap_kv: torch.Tensor | None = None,
        overlap_gate: torch.Tensor | None = None,
    ) -> None:
        self.entries = entries
        self.waiting_kv, self.waiting_gate = waiting_kv, waiting_gate
        self.overlap_kv, self.overlap_gate = overlap_kv, overlap_gate

    @property
    def num_entries(self) -> int:
        """Entries made so far."""
        return 0 if self.entries is None else self.entries.shape[1]

    @property
    def num_waiting(self) -> int:
        """Tokens waiting for their group to fill."""
        return 0 if self.waiting_kv is None else self.waiting_kv.shape[1]

    @property
    def nbytes(self) -> int:
        """Bytes of every tensor held."""
        held = [self.entries, self.waiting_kv, self.waiting_gate]
        held += [self.overlap_kv, self.overlap_gate]
        return sum(t.numel() * t.element_size() for t in held if t is not None)


class TokenCompressor(nn.Module):
    """Each full group of ``rate`` tokens becomes one entry: a gated weighted sum.

    Every token gets a vector ``c = W_kv x`` and a gate ``z = W_gate x``, both
    ``head_dim`` wide; the group's position bias ``B`` (one row per place in the
    group) is added to the gates, and the entry is

    ``entry = kv_norm(sum_j softmax_j(z_j + B_j) * c_j)``,

    the softmax taken over the tokens of the group, one per number of the vector. The
    entry is then rotated (RoPE) as the group's first token.

    With ``overlap`` (CSA), each token gets two vectors and two gates, ``2 * head_dim``
    wide: the second half counts for its own group, the first half for the next one, so
    that each entry is a weighted sum over ``2 * rate`` tokens, its group and the one
    before. The first group has no group before it: those places get weight 0.

    Parameters
    ----------
    d_in : int
        Size of each input embedding.
    head_dim : int
        Size of each entry.
    rate : int
        Tokens per entry (V4: 4 for CSA, 128 for HCA).
    overlap : bool
        Each entry also reads the group before (CSA).
    rotary : Rotary
        The RoPE of the entries' last ``rotary.rotary_dim`` numbers.
    eps : float
        Epsilon of ``kv_norm``.

    Attributes
    ----------
    W_kv, W_gate : nn.Linear
        ``d_in -> width``, no bias (``kv_proj``, ``gate_proj``), ``width`` being
        ``2 * head_dim`` with ``overlap``, else ``head_dim``.
    position_bias : nn.Parameter
        Added to the gates, by place in the group, shape ``(rate, width)``.
    kv_norm : RMSNorm
        On each entry, before RoPE.

    Examples
    --------
    >>> import torch
    >>> from attention import Rotary
    >>> _ = torch.manual_seed(0)
    >>> hca = TokenCompressor(8, 6, rate=4, overlap=False, rotary=Rotary(2))
    >>> x = torch.randn(1, 10, 8)
    >>> hca(x).shape  # two full groups of 4; the last 2 tokens make no entry yet
    torch.Size([1, 2, 6])

    With a state, the tokens of a group may come in several calls:

    >>> state = CompressorState()
    >>> first, second = hca(x[:, :3], state), hca(x[:, 3:], state)
    >>> first.shape[1], second.shape[1], state.num_waiting
    (0, 2, 2)
    >>> torch.allclose(second, hca(x), atol=1e-6)
    True
    """

    def __init__(
        self,
        d_in: int,
        head_dim: int,
        *,
        rate: int,
        overlap: bool,
        rotary: Rotary,
        eps: float = 1e-6,
    ):
        super().__init__()
        owner = type(self).__name__
        self.d_in, self.head_dim, self.rate = _checks.sizes(
            owner, d_in=d_in, head_dim=head_dim, rate=rate
        )
        self.overlap = _checks.flag(owner, "overlap", overlap, "each entry reads the group before")
        if not isinstance(rotary, Rotary):
            raise TypeError(f"{owner}: rotary must be a Rotary, got {type(rotary).__name__}")
        if rotary.rotary_dim > head_dim:
            raise ValueError(
                f"{owner}: rotary turns {rotary.rotary_dim} numbers, more than head_dim={head_dim}"
            )
        self.rotary = rotary
        width = head_dim * (2 if overlap else 1)
        self.W_kv = nn.Linear(d_in, width, bias=False)
        self.W_gate = nn.Linear(d_in, width, bias=False)
        self.position_bias = nn.Parameter(torch.zeros(rate, width))
        self.kv_norm = RMSNorm(head_dim, _checks.positive_number(owner, "eps", eps))

    def forward(self, x: torch.Tensor, state: CompressorState | None = None) -> torch.Tensor:
        """The entries the tokens of ``x`` complete (with ``state``: every entry so far).

        Parameters
        ----------
        x : torch.Tensor, shape (batch, num_tokens, d_in)
            The new tokens.
        state : CompressorState, optional
            The tokens still waiting from earlier calls, and the entries made; updated
            in place. ``None``: ``x`` is a whole sequence from position 0, and the
            tokens after its last full group are dropped.

        Returns
        -------
        torch.Tensor, shape (batch, num_entries, head_dim)
            Without a state, one entry per full group of ``x``; with one, every entry
            made so far (``state.entries``).
        """
        owner = type(self).__name__
        if state is not None and not isinstance(state, CompressorState):
            raise TypeError(
                f"{owner}: state must be a CompressorState or None, got {type(state).__name__}"
            )
        x = _checks.module_input(self, x, d_in=self.d_in)
        return self._compress(x, state)

    def _compress(self, x: torch.Tensor, state: CompressorState | None) -> torch.Tensor:
        """:meth:`forward`, unchecked."""
        batch = x.shape[0]
        kv, gate = self.W_kv(x), self.W_gate(x)  # (batch, num_tokens, width)
        done = 0 if state is None else state.num_entries  # entries made before this call
        if state is not None and state.waiting_kv is not None:
            kv = torch.cat((state.waiting_kv, kv), dim=1)
            assert state.waiting_gate is not None  # written together
            gate = torch.cat((state.waiting_gate, gate), dim=1)
        groups = kv.shape[1] // self.rate
        usable = groups * self.rate
        if state is not None:  # the rest waits for its group to fill
            state.waiting_kv, state.waiting_gate = kv[:, usable:], gate[:, usable:]
        if groups:
            kv = kv[:, :usable].reshape(batch, groups, self.rate, -1)
            gate = gate[:, :usable].reshape(batch, groups, self.rate, -1) + self.position_bias
            if self.overlap:
                kv, gate = self._with_group_before(kv, gate, state)
            # (batch, groups, places, head_dim): a softmax over the places, per number
            summed = (kv * torch.softmax(gate, dim=2)).sum(dim=2)
            new = self.kv_norm(summed)  # (batch, groups, head_dim)
            # Entry w turns as its group's first token, at position w * rate
            cos, sin = self.rotary.cos_sin(done * self.rate, usable, new)
            new = _rotate_last(new, cos[:: self.rate], sin[:: self.rate])
        else:
            new = x.new_zeros(batch, 0, self.head_dim)
        if state is None:
            return new
        if state.entries is None:
            state.entries = new
        elif new.shape[1]:  # a step that completes no group copies nothing
            state.entries = torch.cat((state.entries, new), dim=1)
        return state.entries

    def _with_group_before(
        self, kv: torch.Tensor, gate: torch.Tensor, state: CompressorState | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Each group's places preceded by the group before's first halves.

        ``(batch, groups, rate, 2 * head_dim)`` in, ``(batch, groups, 2 * rate,
        head_dim)`` out. Before the first group of a sequence: vectors 0 and gates
        ``-inf``, which the softmax gives weight 0.
        """
        batch = kv.shape[0]
        d = self.head_dim
        own_kv, own_gate = kv[..., d:], gate[..., d:]  # its own group's half
        if state is not None and state.overlap_kv is not None:
            assert state.overlap_gate is not None  # written together
            first_kv, first_gate = state.overlap_kv[:, None], state.overlap_gate[:, None]
        else:
            first_kv = kv.new_zeros(batch, 1, self.rate, d)
            first_gate = gate.new_full((batch, 1, self.rate, d), float("-inf"))
        before_kv = torch.cat((first_kv, kv[:, :-1, :, :d]), dim=1)
        before_gate = torch.cat((first_gate, gate[:, :-1, :, :d]), dim=1)
        if state is not None:  # the last group's first half, for the next call's first entry
            state.overlap_kv, state.overlap_gate = kv[:, -1, :, :d], gate[:, -1, :, :d]
        return torch.cat((before_kv, own_kv), dim=2), torch.cat((before_gate, own_gate), dim=2)


class CompressedIndexer(nn.Module):
    """DeepSeek-V4's lightning indexer: which compressed entries each query reads.

    It makes entries of its own, smaller ones (``head_dim`` numbers, a
    :class:`TokenCompressor` with overlapping groups), and scores each against each
    query as DeepSeek-V3.2's indexer scores keys (chapter 24):

    ``score[s, w] = sum_h weight[s, h] * relu(q[s, h] . entry[w]) / sqrt(head_dim)``,

    with ``num_heads`` query heads ``q[s, h]`` made from the attention's query latent
    (``W_query``, then RoPE at the query's position) and one weight per head and query
    from the input (``W_weights``, times ``1 / sqrt(num_heads)``). An entry whose group
    is not complete at the query's position scores ``-inf``.

    Parameters
    ----------
    d_in : int
        Size of each input embedding.
    q_lora_rank : int
        Size of the query latent.
    num_heads, head_dim : int
        The indexer's heads and their size (``index_n_heads``, ``index_head_dim``).
    rate : int
        Tokens per entry, the CSA compressor's.
    top_k : int
        Entries each query reads (``index_topk``).
    rotary : Rotary
        The layer's RoPE, turning the last ``rotary.rotary_dim`` numbers.
    eps : float
        Epsilon of the compressor's norm.

    Attributes
    ----------
    compressor : TokenCompressor
        The indexer's own entries (``kv_proj``, ``gate_proj``, ``position_bias``,
        ``kv_norm`` of ``DeepseekV4Indexer``).
    W_query : nn.Linear
        ``q_lora_rank -> num_heads * head_dim``, no bias (``q_b_proj``).
    W_weights : nn.Linear
        ``d_in -> num_heads``, no bias (``weights_proj``).

    Examples
    --------
    >>> import torch
    >>> from attention import Rotary
    >>> _ = torch.manual_seed(0)
    >>> indexer = CompressedIndexer(8, 6, num_heads=2, head_dim=4, rate=2, top_k=1,
    ...                             rotary=Rotary(2))
    >>> x, q_latent = torch.randn(1, 6, 8), torch.randn(1, 6, 6)
    >>> scores = indexer(x, q_latent)
    >>> scores.shape  # (batch, num_tokens, num_entries): 3 groups of 2
    torch.Size([1, 6, 3])
    >>> scores[0].isfinite().sum(dim=-1).tolist()  # entries complete at each position
    [0, 1, 1, 2, 2, 3]
    >>> indexer.chosen(scores).sum(dim=-1).tolist()  # top_k=1 of them, or none yet
    [[0, 1, 1, 1, 1, 1]]
    """

    def __init__(
        self,
        d_in: int,
        q_lora_rank: int,
        *,
        num_heads: int,
        head_dim: int,
        rate: int,
        top_k: int,
        rotary: Rotary,
        eps: float = 1e-6,
    ):
        super().__init__()
        owner = type(self).__name__
        self.d_in, self.q_lora_rank = _checks.sizes(owner, d_in=d_in, q_lora_rank=q_lora_rank)
        self.num_heads, self.head_dim, self.top_k = _checks.sizes(
            owner, num_heads=num_heads, head_dim=head_dim, top_k=top_k
        )
        self.compressor = TokenCompressor(
            d_in, head_dim, rate=rate, overlap=True, rotary=rotary, eps=eps
        )
        self.rotary = rotary
        self.W_query = nn.Linear(q_lora_rank, num_heads * head_dim, bias=False)
        self.W_weights = nn.Linear(d_in, num_heads, bias=False)

    @property
    def rate(self) -> int:
        """Tokens per entry."""
        return self.compressor.rate

    def forward(
        self,
        x: torch.Tensor,
        q_latent: torch.Tensor,
        state: CompressorState | None = None,
        start: int = 0,
    ) -> torch.Tensor:
        """Score every entry for each new token.

        Parameters
        ----------
        x : torch.Tensor, shape (batch, num_tokens, d_in)
            The new tokens' inputs, at positions ``start, start + 1, ...``.
        q_latent : torch.Tensor, shape (batch, num_tokens, q_lora_rank)
            Their query latents (the attention's ``q_norm(W_dq(x))``).
        state : CompressorState, optional
            The indexer's entries and waiting tokens; updated in place. ``None``: ``x``
            is a whole sequence (``start`` must be 0).
        start : int
            The first new token's position: the tokens ``state`` has seen.

        Returns
        -------
        torch.Tensor, shape (batch, num_tokens, num_entries)
            ``-inf`` where the entry's group is not complete at the query's position.
        """
        owner = type(self).__name__
        if state is not None and not isinstance(state, CompressorState):
            raise TypeError(
                f"{owner}: state must be a CompressorState or None, got {type(state).__name__}"
            )
        x = _checks.module_input(self, x, d_in=self.d_in)
        start = _checks.whole_number(owner, start, "start must be an integer >= 0")
        if start < 0 or (state is None and start):
            raise ValueError(
                f"{owner}: start must be 0 without a state, the tokens the state has seen "
                f"with one, got start={start}"
            )
        expected = (x.shape[0], x.shape[1], self.q_lora_rank)
        _checks.float_tensor(owner, "q_latent", q_latent)
        if tuple(q_latent.shape) != expected or q_latent.dtype != x.dtype:
            raise ValueError(
                f"{owner}: q_latent must have shape (batch, num_tokens, q_lora_rank) = "
                f"{expected} and x's dtype {x.dtype}, got shape {tuple(q_latent.shape)} "
                f"and dtype {q_latent.dtype}"
            )
        return self._scores(x, q_latent, state, start)

    def _scores(
        self,
        x: torch.Tensor,
        q_latent: torch.Tensor,
        state: CompressorState | None,
        start: int,
    ) -> torch.Tensor:
        """:meth:`forward`, unchecked."""
        batch, num_tokens, _ = x.shape
        entries = self.compressor._compress(x, state)  # (batch, num_entries, head_dim)
        queries = self.W_query(q_latent).view(batch, num_tokens, self.num_heads, self.head_dim)
        cos, sin = self.rotary.cos_sin(start, num_tokens, x)
        queries = _rotate_last(queries.transpose(1, 2), cos, sin)  # (b, heads, n, head_dim)
        # (b, heads, n, entries): each head's rectified, scaled dot products
        scores = F.relu(queries @ entries[:, None].transpose(-2, -1)) * self.head_dim**-0.5
        weights = self.W_weights(x) * self.num_heads**-0.5  # (b, n, heads)
        index_scores = torch.einsum("bnh,bhnw->bnw", weights, scores)
        complete = _complete(start, num_tokens, entries.shape[1], self.rate, x.device)
        return index_scores.masked_fill(~complete, float("-inf"))

    def chosen(self, scores: torch.Tensor) -> torch.Tensor:
        """``True`` at each query's ``top_k`` best complete entries (all, if fewer).

        Parameters
        ----------
        scores : torch.Tensor, shape (batch, num_tokens, num_entries)
            :meth:`forward`'s scores.

        Returns
        -------
        torch.Tensor of bool, shape (batch, num_tokens, num_entries)
        """
        scores = _checks.float_tensor(type(self).__name__, "scores", scores)
        if scores.dim() != 3:
            raise ValueError(
                f"{type(self).__name__}: scores must be (batch, num_tokens, num_entries), "
                f"got shape {tuple(scores.shape)}"
            )
        return _top(scores, self.top_k)


def _complete(
    start: int, num_tokens: int, num_entries: int, rate: int, device: torch.device
) -> torch.Tensor:
    """``True`` where entry ``w``'s group is complete at the query's position ``t``.

    ``(num_tokens, num_entries)``: ``(w + 1) * rate <= t + 1``, for ``t`` from ``start``.
    """
    positions = torch.arange(start, start + num_tokens, device=device)
    entries = torch.arange(num_entries, device=device)
    return entries[None, :] < ((positions + 1) // rate)[:, None]


def _attend_one_head(
    queries: torch.Tensor,
    blocks: list[tuple[torch.Tensor, torch.Tensor]],
    scale: float,
    sinks: torch.Tensor,
) -> torch.Tensor:
    """Every head's queries over one key/value head whose key is also the value, with
    one sink per head: chapter 16's softmax over the allowed keys and the sink.

    ``queries`` is ``(batch, heads, n, d)``; each block is keys ``(batch, keys, d)``
    (the window's, then the entries) and which of them each query may read, ``(batch,
    n, keys)``. Returns ``(batch, heads, n, d)``. The heads are folded into the rows of
    one query matrix, so that each key is read once for every head rather than copied
    per head, and the blocks are never concatenated, only their scores: a decoding
    step at 64k tokens would otherwise copy its entries each step, once per head.
    """
    batch, heads, num_queries, dim = queries.shape
    rows = queries.reshape(batch, heads * num_queries, dim)
    scores = [
        ((rows @ keys.transpose(1, 2)) * scale)
        .view(batch, heads, num_queries, -1)
        .masked_fill(~allowed[:, None], float("-inf"))
        for keys, allowed in blocks
    ]
    sink = sinks.view(1, heads, 1, 1).expand(batch, heads, num_queries, 1)
    weights = torch.softmax(torch.cat((*scores, sink), dim=-1), dim=-1)
    out, first = None, 0
    for keys, _ in blocks:
        share = weights[..., first : first + keys.shape[1]]
        first += keys.shape[1]
        part = share.reshape(batch, heads * num_queries, -1) @ keys
        out = part if out is None else out + part
    assert out is not None  # the window's block, always
    return out.view(batch, heads, num_queries, dim)


def _top(scores: torch.Tensor, top_k: int) -> torch.Tensor:
    """The ``top_k`` best scores above ``-inf`` of each row, as a mask. Unchecked."""
    if scores.shape[-1] <= top_k:  # every entry: those complete
        return scores > float("-inf")
    best, picks = scores.topk(top_k, dim=-1)
    return torch.zeros_like(scores, dtype=torch.bool).scatter(-1, picks, best > float("-inf"))


class CompressedCache(_CacheBase):
    """What a :class:`CompressedAttention` layer keeps for one sequence while decoding.

    Three things, as ``transformers``' ``DeepseekV4CSACache`` and
    ``DeepseekV4HCACache`` hold them:

    * the window: the last ``window - 1`` tokens' key vectors, each key serving as its
      value (``window_cache``, a rolling :class:`~attention.KVCache` whose values
      are empty);
    * the compressed entries made so far (``compressor``'s ``entries``, and the
      indexer's own in a CSA layer, ``indexer``);
    * the tokens whose group is not full yet, their vectors and gates (``waiting_kv``,
      ``waiting_gate``), and in a CSA layer the last full group's first half.

    ``len(cache)`` counts the tokens of the window held; :attr:`num_entries` and
    :attr:`num_waiting` count the rest. It can go back to 0 tokens only: its entries
    fold tokens together. It implements :class:`~attention.Cache`.

    Parameters
    ----------
    window : int
        The layer's window: a query sees itself and ``window - 1`` tokens before it.

    Examples
    --------
    >>> import torch
    >>> from attention import CompressedAttention
    >>> _ = torch.manual_seed(0)
    >>> hca = CompressedAttention(16, 16, 64, num_heads=2, head_dim=8, q_lora_rank=8,
    ...     window=4, rope_dim=4, compress_rate=8, o_groups=2, o_lora_rank=4)
    >>> cache = CompressedCache(window=4)
    >>> _ = hca(torch.randn(1, 10, 16), cache=cache)
    >>> cache.seen_tokens, len(cache), cache.num_entries, cache.num_waiting
    (10, 3, 1, 2)
    >>> cache.nbytes  # (3 keys + 1 entry + 2 waiting vectors and 2 gates) * 8 numbers * 4
    256
    """

    _holds = "a window, compressed entries and the tokens waiting for their group"
    _layers = ("CompressedAttention",)

    def __init__(self, window: int) -> None:
        super().__init__()
        self.window = _checks.positive_int(type(self).__name__, "window", window)
        self.window_cache = KVCache(window=self.window)
        self.compressor: CompressorState | None = None
        self.indexer: CompressorState | None = None
        self.kind: str | None = None  # the kind of layer it has served

    @classmethod
    def holding(
        cls,
        window_keys: torch.Tensor,
        *,
        window: int,
        seen_tokens: int,
        rate: int | None = None,
        compressor: CompressorState | None = None,
        indexer: CompressorState | None = None,
    ) -> CompressedCache:
        """A cache that has seen ``seen_tokens`` tokens and holds the tensors given.

        What a prefill of ``seen_tokens`` tokens would leave, without running one: a
        benchmark fills a cache of 64k tokens with tensors of the right shapes, and a
        reader can build the state a figure describes. The kind of layer it serves
        follows from the states: none, a sliding layer's; ``compressor`` alone, an HCA
        layer's; both, a CSA layer's. Every shape is checked against the counts a
        prefill leaves: ``seen_tokens // rate`` entries, ``seen_tokens % rate``
        tokens waiting, and in a CSA layer the overlap once a group is complete.

        The states are taken as they are, not copied; a step replaces their tensors
        with new ones and never writes into those given, so one set of tensors can
        seed many caches.

        Parameters
        ----------
        window_keys : torch.Tensor, shape (batch, min(seen_tokens, window - 1), head_dim)
            The last tokens' key vectors, rotated, oldest first.
        window : int
            The layer's window.
        seen_tokens : int
            The tokens the cache has seen, at least 1: the next token's position.
        rate : int, optional
            Tokens per entry, with ``compressor``.
        compressor : CompressorState, optional
            The layer's entries ``(batch, seen_tokens // rate, head_dim)``, the tokens
            waiting ``(batch, seen_tokens % rate, width)`` (vectors and gates, ``width``
            twice ``head_dim`` in a CSA layer), and in a CSA layer that has completed a
            group, the overlap ``(batch, rate, head_dim)``; ``None`` in a sliding layer.
        indexer : CompressorState, optional
            A CSA layer's indexer's own, laid out the same with its ``head_dim``.

        Returns
        -------
        CompressedCache

        Raises
        ------
        TypeError
            For a tensor or state of the wrong type.
        ValueError
            For a count or a shape that a prefill of ``seen_tokens`` tokens would not
            leave, a dtype or device that differs from ``window_keys``', or an indexer
            without a compressor.

        Examples
        --------
        >>> import torch
        >>> from attention import CompressedAttention
        >>> _ = torch.manual_seed(0)
        >>> hca = CompressedAttention(16, 16, 64, num_heads=2, head_dim=8, q_lora_rank=8,
        ...     window=4, rope_dim=4, compress_rate=8, o_groups=2, o_lora_rank=4)
        >>> prefilled = CompressedCache(window=4)
        >>> _ = hca(torch.randn(1, 10, 16), cache=prefilled)
        >>> state = prefilled.compressor
        >>> built = CompressedCache.holding(
        ...     prefilled.window_keys, window=4, seen_tokens=10, rate=8,
        ...     compressor=CompressorState(entries=state.entries,
        ...         waiting_kv=state.waiting_kv, waiting_gate=state.waiting_gate))
        >>> built.kind, built.seen_tokens, len(built), built.num_entries, built.num_waiting
        ('heavily_compressed_attention', 10, 3, 1, 2)
        >>> x = torch.randn(1, 1, 16)  # the next token, through both caches
        >>> torch.equal(hca(x, cache=built), hca(x, cache=prefilled))
        True
        """
        owner = f"{cls.__name__}.holding"
        cache = cls(window)
        seen = _checks.whole_number(owner, seen_tokens, "seen_tokens must be an integer >= 1")
        if seen < 1:
            raise ValueError(
                f"{owner}: seen_tokens must be at least 1 (an empty cache is "
                f"{cls.__name__}(window={cache.window})), got {seen}"
            )
        keys = _checks.float_tensor(
            owner, "window_keys", window_keys, 3, "(batch, tokens held, head_dim)"
        )
        batch, held, head_dim = keys.shape
        if held != min(seen, cache.window - 1):
            raise ValueError(
                f"{owner}: window_keys must hold min(seen_tokens, window - 1) = "
                f"{min(seen, cache.window - 1)} tokens (the window's, before the next "
                f"token), got {held}"
            )
        if indexer is not None and compressor is None:
            raise ValueError(
                f"{owner}: an indexer's state comes with a compressor's (a CSA layer has "
                "both), got an indexer alone"
            )
        if (rate is None) != (compressor is None):
            raise ValueError(
                f"{owner}: give rate with compressor (a CSA or HCA layer), neither in a "
                f"sliding layer, got rate={rate} and compressor={type(compressor).__name__}"
            )
        cache.kind = SLIDING_KIND
        if compressor is not None:
            rate = _checks.positive_int(owner, "rate", rate)
            csa = indexer is not None
            cache.kind = CSA_KIND if csa else HCA_KIND
            expected = _Held(keys, batch, seen, rate, overlap=csa)
            cache.compressor = expected.check(owner, "compressor", compressor, head_dim)
            if indexer is not None:
                cache.indexer = expected.check(owner, "indexer", indexer, None)
        cache.window_cache.update(keys, keys[..., :0])  # copies: the key is the value
        # The window's cache rolls by the position of the next token, as it would have
        # after a prefill: it has seen every token, and holds the window's.
        cache.window_cache._seen = seen
        cache._seen = seen
        return cache

    @property
    def window_keys(self) -> torch.Tensor | None:
        """The window's keys (also its values), ``(batch, len(cache), head_dim)``."""
        return self.window_cache.keys

    @property
    def entries(self) -> torch.Tensor | None:
        """The compressed entries, ``(batch, num_entries, head_dim)``; ``None`` if none."""
        return None if self.compressor is None else self.compressor.entries

    @property
    def num_entries(self) -> int:
        """Compressed entries made so far (0 in a sliding layer's cache)."""
        return 0 if self.compressor is None else self.compressor.num_entries

    @property
    def num_waiting(self) -> int:
        """Tokens waiting for their group to fill."""
        return 0 if self.compressor is None else self.compressor.num_waiting

    def __len__(self) -> int:
        return len(self.window_cache)

    @property
    def nbytes(self) -> int:
        """Bytes of the window's keys, the entries and the waiting tokens, indexer's too."""
        states = (self.compressor, self.indexer)
        return self.window_cache.nbytes + sum(s.nbytes for s in states if s is not None)

    def _why_not_crop(self, length: int) -> str | None:
        if length == self._seen:
            return None
        return (
            "a compressed cache folds its tokens into entries and drops those past its "
            "window, so it goes back to 0 tokens only (or stays where it is)"
        )

    def _forget(self, length: int) -> None:
        if not length:
            self.window_cache.crop(0)
            self.compressor = self.indexer = None
            self.kind = None

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(window={self.window}, seen_tokens={self._seen}, "
            f"window tokens={len(self)}, entries={self.num_entries}, "
            f"waiting={self.num_waiting}, nbytes={self.nbytes})"
        )


class _Held:
    """What :meth:`CompressedCache.holding` expects of a :class:`CompressorState`."""

    def __init__(self, like: torch.Tensor, batch: int, seen: int, rate: int, *, overlap: bool):
        self.like, self.batch, self.rate, self.overlap = like, batch, rate, overlap
        self.entries, self.waiting = divmod(seen, rate)

    def check(self, owner: str, name: str, state: object, head_dim: int | None) -> CompressorState:
        """``state``, checked; ``head_dim`` ``None``: the entries' own (the indexer's)."""
        if not isinstance(state, CompressorState):
            raise TypeError(
                f"{owner}: {name} must be a CompressorState, got {type(state).__name__}"
            )
        entries = self.tensor(owner, f"{name}.entries", state.entries)
        head_dim = entries.shape[-1] if head_dim is None else head_dim
        width = head_dim * (2 if self.overlap else 1)
        self.shape(owner, f"{name}.entries", entries, (self.entries, head_dim))
        for part in ("waiting_kv", "waiting_gate"):
            held = self.tensor(owner, f"{name}.{part}", getattr(state, part))
            self.shape(owner, f"{name}.{part}", held, (self.waiting, width))
        # The overlap is the last complete group's first half: held in a CSA layer
        # once a group is complete, never in an HCA layer
        for part in ("overlap_kv", "overlap_gate"):
            held = getattr(state, part)
            if self.overlap and self.entries:
                held = self.tensor(owner, f"{name}.{part}", held)
                self.shape(owner, f"{name}.{part}", held, (self.rate, head_dim))
            elif held is not None:
                why = "before a group is complete" if self.overlap else "without an indexer (HCA)"
                raise ValueError(f"{owner}: {name}.{part} must be None {why}")
        return state

    def tensor(self, owner: str, name: str, value: object) -> torch.Tensor:
        value = _checks.float_tensor(owner, name, value, 3, "(batch, tokens, dim)")
        if value.dtype != self.like.dtype or value.device != self.like.device:
            raise ValueError(
                f"{owner}: {name} must have window_keys' dtype {self.like.dtype} and device "
                f"{self.like.device}, got {value.dtype} on {value.device}"
            )
        return value

    def shape(self, owner: str, name: str, value: torch.Tensor, rest: tuple[int, int]) -> None:
        expected = (self.batch, *rest)
        if tuple(value.shape) != expected:
            raise ValueError(
                f"{owner}: {name} must have shape {expected} after the tokens seen (rate "
                f"{self.rate}), got {tuple(value.shape)}"
            )


#: The three kinds of layer, by transformers' layer_types.
SLIDING_KIND = "sliding_attention"
CSA_KIND = "compressed_sparse_attention"
HCA_KIND = "heavily_compressed_attention"


class CompressedAttention(nn.Module):
    """A DeepSeek-V4 attention layer: sliding, CSA or HCA, as ``DeepseekV4Attention``.

    The queries come through a low-rank latent, ``q_latent = q_norm(W_dq x)``, then
    ``W_uq``, ``num_heads`` heads of ``head_dim``, each normalised by its root mean
    square without a learned scale (QK-norm on the queries). One key/value vector per
    token, ``kv_norm(W_kv x)`` (an RMSNorm with a scale), is the key and the value of
    every head. RoPE turns the last ``rope_dim`` numbers of the queries and keys, in
    neighbouring pairs, and the compressed entries as their group's first token.

    Each query attends, with one sink per head, to

    * the ``window`` tokens up to itself (chapter 17's window, chapter 16's sinks);
    * with ``compress_rate``: the complete compressed entries (HCA), or, with an
      indexer (``index_top_k``), the ``index_top_k`` of them its indexer picks (CSA,
      whose groups overlap).

    The values carry the keys' rotation, so the output's last ``rope_dim`` numbers are
    turned back by the query's position. The heads are then projected in ``o_groups``
    groups, each to ``o_lora_rank`` numbers (``W_out_groups``), and mixed to ``d_out``
    (``W_out``).

    Parameters
    ----------
    d_in, d_out : int
        Input and output sizes (``hidden_size``).
    context_length : int
        The most tokens a sequence may have (``max_position_embeddings``).
    num_heads, head_dim : int
        Query heads and their size.
    q_lora_rank : int
        The query latent's size.
    window : int
        Tokens a query sees uncompressed, itself included (``sliding_window``).
    rope_dim : int
        The numbers of each head that turn, the last ones (``qk_rope_head_dim``), even.
    rope_base : float
        RoPE's base: 10,000 on V4's sliding layers, 160,000 on its compressed ones.
    rope_scaling : dict, optional
        RoPE's scaling, in ``transformers``' ``rope_parameters`` form (V4's compressed
        layers: YaRN, factor 16 from 65,536, with an ``attention_factor`` of 1).
    compress_rate : int, optional
        Tokens per compressed entry; ``None``: a sliding layer.
    index_top_k, index_num_heads, index_head_dim : int, optional
        All three, with ``compress_rate``: a CSA layer, its groups overlapping and an
        indexer picking ``index_top_k`` entries per query. None: an HCA layer.
    o_groups, o_lora_rank : int
        The grouped output projection: heads in ``o_groups`` groups, each to
        ``o_lora_rank`` numbers.
    eps : float
        The RMS norms' epsilon.

    Attributes
    ----------
    kind : str
        ``"sliding_attention"``, ``"compressed_sparse_attention"`` or
        ``"heavily_compressed_attention"``.
    W_dq, q_norm, W_uq : nn.Linear, RMSNorm, nn.Linear
        The query path (``q_a_proj``, ``q_a_norm``, ``q_b_proj``).
    q_head_norm : RMSNorm
        Over each query head, without a scale (``q_b_norm``).
    W_kv, kv_norm : nn.Linear, RMSNorm
        The key/value vector (``kv_proj``, ``kv_norm``).
    sinks : nn.Parameter
        One logit per head that joins each softmax, shape ``(num_heads,)``.
    W_out_groups : nn.Linear
        The groups' projections, stacked: weight ``(o_groups * o_lora_rank,
        num_heads * head_dim / o_groups)``, group ``g`` in rows ``g * o_lora_rank``
        onwards (``o_a_proj``).
    W_out : nn.Linear
        ``o_groups * o_lora_rank -> d_out`` (``o_b_proj``).
    compressor : TokenCompressor or None
        The entries (``None`` in a sliding layer).
    indexer : CompressedIndexer or None
        The picks (CSA only).
    rotary : Rotary
        The table of the layer's RoPE, ``rope_dim`` numbers.

    Examples
    --------
    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> csa = CompressedAttention(16, 16, 64, num_heads=2, head_dim=8, q_lora_rank=8,
    ...     window=4, rope_dim=4, compress_rate=2, index_top_k=2, index_num_heads=2,
    ...     index_head_dim=6, o_groups=2, o_lora_rank=4)
    >>> csa.kind
    'compressed_sparse_attention'
    >>> x = torch.randn(1, 9, 16)
    >>> out = csa(x)
    >>> out.shape
    torch.Size([1, 9, 16])

    Decoding token by token with a cache gives the same outputs:

    >>> cache = CompressedCache(window=4)
    >>> steps = [csa(x[:, :5], cache=cache)] + [csa(x[:, i:i + 1], cache=cache)
    ...                                         for i in range(5, 9)]
    >>> torch.allclose(torch.cat(steps, dim=1), out, atol=1e-5)
    True
    >>> cache.num_entries, cache.num_waiting  # 4 groups of 2; token 8 waits
    (4, 1)
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        *,
        num_heads: int,
        head_dim: int,
        q_lora_rank: int,
        window: int,
        rope_dim: int,
        rope_base: float = 10000.0,
        rope_scaling: Mapping | None = None,
        compress_rate: int | None = None,
        index_top_k: int | None = None,
        index_num_heads: int | None = None,
        index_head_dim: int | None = None,
        o_groups: int,
        o_lora_rank: int,
        eps: float = 1e-6,
    ):
        super().__init__()
        owner = type(self).__name__
        self.d_in, self.d_out, self.context_length = _checks.sizes(
            owner, d_in=d_in, d_out=d_out, context_length=context_length
        )
        self.num_heads, self.head_dim, self.q_lora_rank = _checks.sizes(
            owner, num_heads=num_heads, head_dim=head_dim, q_lora_rank=q_lora_rank
        )
        self.window, self.o_groups, self.o_lora_rank = _checks.sizes(
            owner, window=window, o_groups=o_groups, o_lora_rank=o_lora_rank
        )
        rope_dim = _checks.positive_int(owner, "rope_dim", rope_dim)
        if rope_dim % 2 or rope_dim > head_dim:
            raise ValueError(
                f"{owner}: rope_dim must be even (RoPE turns pairs) and at most "
                f"head_dim={head_dim}, got rope_dim={rope_dim}"
            )
        if (num_heads * head_dim) % o_groups:
            raise ValueError(
                f"{owner}: o_groups must divide num_heads * head_dim = "
                f"{num_heads * head_dim}, got o_groups={o_groups}"
            )
        index = {"index_top_k": index_top_k, "index_num_heads": index_num_heads}
        index["index_head_dim"] = index_head_dim
        given = [name for name, value in index.items() if value is not None]
        if given and (len(given) < 3 or compress_rate is None):
            raise ValueError(
                f"{owner}: a CSA layer's indexer needs compress_rate, index_top_k, "
                f"index_num_heads and index_head_dim together, got compress_rate="
                f"{compress_rate} and only {given}"
            )
        eps = _checks.positive_number(owner, "eps", eps)
        self.rope_dim = rope_dim
        self.rotary = _rope(owner, rope_dim, rope_base, rope_scaling)
        self.W_dq = nn.Linear(d_in, q_lora_rank, bias=False)
        self.q_norm = RMSNorm(q_lora_rank, eps)
        self.W_uq = nn.Linear(q_lora_rank, num_heads * head_dim, bias=False)
        self.q_head_norm = RMSNorm(head_dim, eps, elementwise_affine=False)
        self.W_kv = nn.Linear(d_in, head_dim, bias=False)
        self.kv_norm = RMSNorm(head_dim, eps)
        self.W_out_groups = nn.Linear(
            num_heads * head_dim // o_groups, o_groups * o_lora_rank, bias=False
        )
        self.W_out = nn.Linear(o_groups * o_lora_rank, d_out, bias=False)
        self.sinks = nn.Parameter(torch.zeros(num_heads))
        self.compressor: TokenCompressor | None = None
        self.indexer: CompressedIndexer | None = None
        self.kind = SLIDING_KIND
        if compress_rate is not None:
            csa = bool(given)
            self.kind = CSA_KIND if csa else HCA_KIND
            self.compressor = TokenCompressor(
                d_in, head_dim, rate=compress_rate, overlap=csa, rotary=self.rotary, eps=eps
            )
        if given:
            assert index_top_k and index_num_heads and index_head_dim  # all three, checked
            if rope_dim > index_head_dim:
                raise ValueError(
                    f"{owner}: the indexer turns rope_dim={rope_dim} numbers, more than "
                    f"index_head_dim={index_head_dim}"
                )
            self.indexer = CompressedIndexer(
                d_in,
                q_lora_rank,
                num_heads=index_num_heads,
                head_dim=index_head_dim,
                rate=compress_rate,  # type: ignore[arg-type]  # checked above
                top_k=index_top_k,
                rotary=self.rotary,
                eps=eps,
            )

    @property
    def compress_rate(self) -> int | None:
        """Tokens per compressed entry; ``None`` in a sliding layer."""
        return None if self.compressor is None else self.compressor.rate

    def forward(self, x: torch.Tensor, cache: CompressedCache | None = None) -> torch.Tensor:
        """Attend over the window and the entries.

        Parameters
        ----------
        x : torch.Tensor, shape (batch, num_tokens, d_in)
            The new tokens, after those ``cache`` has seen.
        cache : CompressedCache, optional
            Updated in place; ``None``: ``x`` is a whole sequence, from position 0.

        Returns
        -------
        torch.Tensor, shape (batch, num_tokens, d_out)
        """
        _check_cache(self, cache, CompressedCache, "a CompressedCache")
        if cache is not None:
            self._check_kind(cache)
        x, start = _checks.cached_input(self, x, cache)
        out = self._attend_heads(x, start, cache)  # (batch, heads, n, head_dim)
        if cache is not None:
            cache._seen += x.shape[1]
            cache.kind = self.kind
        return self._project_out(out)

    def _check_kind(self, cache: CompressedCache) -> None:
        owner = type(self).__name__
        if cache.window != self.window:
            raise ValueError(
                f"{owner}: the cache keeps a window of {cache.window} tokens, this layer's "
                f"is {self.window}; give it a CompressedCache(window={self.window})"
            )
        if cache.kind is not None and cache.kind != self.kind:
            raise ValueError(
                f"{owner}: the cache holds a {cache.kind!r} layer's tokens, this layer "
                f"is {self.kind!r}; give each layer a cache of its own"
            )
        # A cache built by CompressedCache.holding was checked on its own; here, that
        # it was built for a layer of these sizes
        held = cache.window_keys
        if held is not None and held.shape[-1] != self.head_dim:
            raise ValueError(
                f"{owner}: the cache holds keys of {held.shape[-1]} numbers, this layer's "
                f"head_dim is {self.head_dim}"
            )
        state, rate = cache.compressor, self.compress_rate
        if state is None or rate is None:  # a sliding layer, or no entry made yet
            return
        if state.num_entries * rate + state.num_waiting != cache.seen_tokens:
            raise ValueError(
                f"{owner}: the cache holds {state.num_entries} entries and "
                f"{state.num_waiting} waiting tokens after {cache.seen_tokens} tokens: "
                f"not this layer's rate of {rate} tokens per entry"
            )

    def _attend_heads(
        self, x: torch.Tensor, start: int, cache: CompressedCache | None
    ) -> torch.Tensor:
        """The heads' outputs, ``(batch, num_heads, num_tokens, head_dim)``, turned back."""
        batch, num_tokens, _ = x.shape
        q_latent = self.q_norm(self.W_dq(x))  # (b, n, q_lora_rank)
        queries = self.W_uq(q_latent).view(batch, num_tokens, self.num_heads, self.head_dim)
        queries = self.q_head_norm(queries.transpose(1, 2))  # (b, heads, n, head_dim)
        cos, sin = self.rotary.cos_sin(start, num_tokens, x)
        queries = _rotate_last(queries, cos, sin)
        kv = _rotate_last(self.kv_norm(self.W_kv(x)), cos, sin)  # (b, n, head_dim)
        if cache is not None:  # the window's keys, the held ones first (no values)
            kv, _ = cache.window_cache.update(kv, kv[..., :0])
        # Query t sees key s in the window when t - window < s <= t
        query_positions = torch.arange(start, start + num_tokens, device=x.device)
        key_positions = torch.arange(start + num_tokens - kv.shape[1], start + num_tokens)
        gap = query_positions[:, None] - key_positions.to(x.device)[None, :]
        allowed = ((gap >= 0) & (gap < self.window)).expand(batch, -1, -1)  # (b, n, keys)
        blocks = [(kv, allowed)]
        if self.compressor is not None:
            blocks.append(self._entries(x, q_latent, start, cache))
        out = _attend_one_head(queries, blocks, self.head_dim**-0.5, self.sinks)
        return _rotate_last(out, cos, -sin)  # the values' rotation, undone at the query's

    def _entries(
        self,
        x: torch.Tensor,
        q_latent: torch.Tensor,
        start: int,
        cache: CompressedCache | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The entries ``(batch, num_entries, head_dim)`` and which each query reads."""
        assert self.compressor is not None  # a CSA or HCA layer
        state = None
        if cache is not None:
            if cache.compressor is None:
                cache.compressor = CompressorState()
            state = cache.compressor
        entries = self.compressor._compress(x, state)
        num_tokens = x.shape[1]
        reads = _complete(start, num_tokens, entries.shape[1], self.compressor.rate, x.device)
        reads = reads.expand(x.shape[0], -1, -1)
        if self.indexer is not None:
            index_state = None
            if cache is not None:
                if cache.indexer is None:
                    cache.indexer = CompressorState()
                index_state = cache.indexer
            scores = self.indexer._scores(x, q_latent, index_state, start)
            reads = _top(scores, self.indexer.top_k)  # complete ones only: -inf otherwise
        return entries, reads

    def _project_out(self, out: torch.Tensor) -> torch.Tensor:
        """``(batch, heads, n, head_dim)`` -> the grouped projections -> ``(batch, n, d_out)``."""
        batch, _, num_tokens, _ = out.shape
        groups = out.transpose(1, 2).reshape(batch, num_tokens, self.o_groups, -1)
        weight = self.W_out_groups.weight.view(self.o_groups, self.o_lora_rank, -1)
        grouped = torch.einsum("bngi,gri->bngr", groups, weight)  # each group its own rows
        return self.W_out(grouped.reshape(batch, num_tokens, -1))
