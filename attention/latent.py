"""Multi-head latent attention (MLA), the attention of DeepSeek-V2 and DeepSeek-V3.

Grouped-query attention shrinks the KV cache by sharing key/value heads. MLA keeps
every head distinct and caches something smaller instead: one *latent* vector per
token, ``kv_lora_rank`` numbers, from which each head's key and value are
re-projected (``W_uk``, ``W_uv``). The latent carries no position, because RoPE's
rotation could not be moved through those up-projections; so each key gets a second,
*decoupled* part, ``qk_rope_head_dim`` numbers rotated by RoPE and shared by all heads,
which the cache holds too. Per token and layer the cache is
``kv_lora_rank + qk_rope_head_dim`` numbers: 576 for DeepSeek-V3, where its 128 heads
would otherwise cache ``128 * (192 + 128) = 40960``.

Queries may be compressed the same way (``q_lora_rank``), which saves weights but not
cache. The layers match ``transformers``' ``DeepseekV3Attention``; see
:meth:`~attention.MultiHeadLatentAttention.forward` for the shapes at each step.
"""

from __future__ import annotations

import torch
from torch import nn

from attention import _checks
from attention.cache import _CacheBase, _check_cache
from attention.cache_sizes import latent_cache_bytes_per_token
from attention.kv_cache import _check_new, _Storage
from attention.masks import _causal_mask
from attention.norms import RMSNorm
from attention.rope import Rotary, _softmax_mscale
from attention.scaled import _scaled_dot_product_weights
from attention.step import _attend

__all__ = ["LatentCache", "MultiHeadLatentAttention", "latent_cache_bytes_per_token"]


class LatentCache(_CacheBase):
    """What MLA caches per token: the latent and the shared rotary key.

    :meth:`update` appends the new tokens' :attr:`latent` ``(batch, num_new,
    kv_lora_rank)`` and :attr:`rope_keys` ``(batch, num_new, qk_rope_head_dim)``
    (already rotated) and returns every token's, as :class:`~attention.KVCache` does
    with keys and values (and in the same kind of storage, with room after the held
    tokens). It keeps every token, and implements :class:`~attention.Cache`.

    Examples
    --------
    >>> import torch
    >>> cache = LatentCache()
    >>> _ = cache.update(torch.zeros(1, 3, 16), torch.zeros(1, 3, 4))  # 3 tokens
    >>> cache.latent.shape, cache.rope_keys.shape, cache.nbytes // len(cache)
    (torch.Size([1, 3, 16]), torch.Size([1, 3, 4]), 80)
    """

    _holds = "MLA's latent and RoPE keys"
    _layers = ("MultiHeadLatentAttention",)

    def __init__(self) -> None:
        super().__init__()
        self._storage = _Storage()

    @property
    def latent(self) -> torch.Tensor | None:
        """The compressed keys and values, ``(batch, len(cache), kv_lora_rank)``, or ``None``."""
        return self._storage.part(0)

    @property
    def rope_keys(self) -> torch.Tensor | None:
        """The rotated key part shared by all heads, ``(batch, len(cache), qk_rope_head_dim)``."""
        return self._storage.part(1)

    def __len__(self) -> int:
        """How many tokens the cache holds."""
        return self._storage.length

    @property
    def shape(self) -> torch.Size | None:
        """The latent's shape, ``(batch, len(cache), kv_lora_rank)``, or ``None`` while empty."""
        return None if self.latent is None else self.latent.shape

    @property
    def nbytes(self) -> int:
        """Bytes held by the latents and the rotary keys."""
        return self._storage.nbytes

    def update(
        self, latent: torch.Tensor, rope_keys: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the new tokens' latents and rotary keys; return every token's, new ones last.

        Shapes ``(batch, num_new, kv_lora_rank)`` and ``(batch, num_new,
        qk_rope_head_dim)`` in, ``(batch, len(cache), ...)`` out: views of the cache's
        storage, as :meth:`~attention.KVCache.update` returns.
        """
        owner, names = type(self).__name__, ("latent", "rope_keys")
        latent, rope_keys = _check_new(owner, latent, rope_keys, self.latent, self.rope_keys, names)
        self._seen += latent.shape[-2]
        latent, rope_keys = self._storage.cat(latent, rope_keys)
        return latent, rope_keys

    def _forget(self, length: int) -> None:  # crop: it keeps every token, so it goes back
        if not length:
            self._storage = _Storage()  # as new: latent None, any sizes
        else:
            self._storage.crop(length)

    def __repr__(self) -> str:
        shape = None if self.latent is None else tuple(self.latent.shape)
        return (
            f"{type(self).__name__}(tokens={len(self)}, latent shape={shape}, nbytes={self.nbytes})"
        )


#: Keywords MLA used to take, and what to write now.
_REMOVED = {
    "bias": "write qkv_bias= for W_dq, W_dkv and W_kr, out_bias= for out_proj",
    "rope_base": "give rotary=Rotary(qk_rope_head_dim, base, interleaved=True)",
    "rope_scaling": "give rotary=Rotary(qk_rope_head_dim, base, scaling, interleaved=True)",
    "rope_interleave": "give rotary=Rotary(qk_rope_head_dim, base, interleaved=...)",
}


def _rotary(owner: str, rotary: object, rope_dim: int, *, interleaved: bool) -> Rotary:
    """``rotary``, checked to turn ``rope_dim`` numbers, or a plain one of that size."""
    if rotary is None:
        return Rotary(rope_dim, interleaved=interleaved)
    if not isinstance(rotary, Rotary):
        raise TypeError(f"{owner}: rotary must be a Rotary or None, got {type(rotary).__name__}")
    if rotary.head_dim != rope_dim:
        raise ValueError(
            f"{owner}: expected a rotary over qk_rope_head_dim={rope_dim} numbers, got {rotary!r}"
        )
    return rotary


class MultiHeadLatentAttention(nn.Module):
    """Causal multi-head latent attention, as in DeepSeek-V2 and V3.

    Every argument after ``context_length`` is keyword-only, under the names that
    :class:`~attention.GroupedQueryAttention` uses too.

    Parameters
    ----------
    d_in : int
        Size of each input embedding (``hidden_size``).
    d_out : int
        Output size (``hidden_size`` again in DeepSeek).
    context_length : int
        The most tokens the module attends over, cached ones included.
    num_heads : int
        Attention heads (``num_attention_heads``).
    kv_lora_rank : int
        Size of the latent that keys and values are compressed into, and cached as.
    qk_nope_head_dim : int
        Per head, the part of the query and key without position (from the latent).
    qk_rope_head_dim : int
        Per head, the part of the query and key rotated by RoPE; the key part is one
        vector shared by all heads. Must be even.
    v_head_dim : int
        Size of each head's value.
    q_lora_rank : int, optional
        If given, queries go through a latent of this size too; ``None``: one projection.
    dropout : float
        Dropout probability on the attention weights, in [0, 1), while training.
    qkv_bias : bool
        Bias on the down-projections ``W_dq``, ``W_dkv`` and ``W_kr``; the
        up-projections and ``W_query`` have none, as in DeepSeek.
    out_bias : bool
        Bias on ``out_proj``. DeepSeek's ``attention_bias`` is ``qkv_bias=out_bias``.
    rotary : Rotary, optional
        The RoPE of the rotary parts, over ``qk_rope_head_dim`` numbers; default
        ``Rotary(qk_rope_head_dim, interleaved=True)``: base 10,000, and the pairs laid
        out as neighbours, as in DeepSeek's weights and ``transformers``' default
        (``rope_interleave=True``); ``interleaved=False`` for the half-split layout.
        Its ``scaling`` is RoPE scaled for a longer context, in ``transformers``'
        ``rope_parameters`` form (see :func:`~attention.rope_frequencies`). DeepSeek-V3's
        is YaRN, ``{"rope_type": "yarn", "factor": 40.0,
        "original_max_position_embeddings": 4096, "beta_fast": 32.0, "beta_slow": 1.0,
        "mscale": 1.0, "mscale_all_dim": 1.0}``. As ``DeepseekV3Attention`` does, cos
        and sin are multiplied by the attention factor, and with a nonzero
        ``mscale_all_dim`` the softmax scale ``1 / sqrt(qk_head_dim)`` by
        ``(0.1 * mscale_all_dim * ln(factor) + 1) ** 2``.
    eps : float
        Epsilon of the RMS norms on the latents (``rms_norm_eps``).
    bias : None
        No longer taken: giving it raises a ``ValueError`` that says to write
        ``qkv_bias`` and ``out_bias``.

    Attributes
    ----------
    W_dq, q_norm, W_uq : nn.Linear, RMSNorm, nn.Linear
        Query down-projection, norm and up-projection (with ``q_lora_rank``);
        ``W_query`` instead without.
    W_dkv, kv_norm : nn.Linear, RMSNorm
        ``d_in -> kv_lora_rank``: the latent that is cached.
    W_kr : nn.Linear
        ``d_in -> qk_rope_head_dim``: the decoupled key, rotated and cached.
    W_uk, W_uv : nn.Linear
        ``kv_lora_rank -> num_heads * qk_nope_head_dim`` and ``-> num_heads * v_head_dim``.
    out_proj : nn.Linear
        ``num_heads * v_head_dim -> d_out``.

    Examples
    --------
    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> mla = MultiHeadLatentAttention(32, 32, context_length=8, num_heads=4, q_lora_rank=12,
    ...     kv_lora_rank=8, qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=5)
    >>> x = torch.randn(1, 8, 32)
    >>> cache = LatentCache()
    >>> out = torch.cat([mla(x[:, :5], cache=cache), mla(x[:, 5:], cache=cache)], dim=1)
    >>> torch.allclose(out, mla(x), atol=1e-5)
    True
    >>> cache.latent.shape, cache.rope_keys.shape  # (batch, tokens, 8) and (batch, tokens, 4)
    (torch.Size([1, 8, 8]), torch.Size([1, 8, 4]))
    >>> mla.cache_bytes_per_token  # (8 + 4) float32 numbers, whatever the number of heads
    48
    """

    #: The cache ``forward`` takes, and its name in the error that refuses another one.
    _cache_type = (LatentCache, "a LatentCache")

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        *,
        num_heads: int,
        kv_lora_rank: int,
        qk_nope_head_dim: int,
        qk_rope_head_dim: int,
        v_head_dim: int,
        q_lora_rank: int | None = None,
        dropout: float = 0.0,
        qkv_bias: bool = False,
        out_bias: bool = False,
        rotary: Rotary | None = None,
        eps: float = 1e-6,
        **removed: object,
    ):
        super().__init__()
        owner = type(self).__name__
        _checks.refuse_removed(owner, removed, _REMOVED)
        _checks.flag(owner, "qkv_bias", qkv_bias, "whether W_dq, W_dkv and W_kr have a bias")
        _checks.flag(owner, "out_bias", out_bias, "whether out_proj has a bias")
        self.d_in, self.d_out, self.context_length, self.num_heads = _checks.sizes(
            owner, d_in=d_in, d_out=d_out, context_length=context_length, num_heads=num_heads
        )
        self.kv_lora_rank, self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim = (
            _checks.sizes(
                owner,
                kv_lora_rank=kv_lora_rank,
                qk_nope_head_dim=qk_nope_head_dim,
                qk_rope_head_dim=qk_rope_head_dim,
                v_head_dim=v_head_dim,
            )
        )
        self.q_lora_rank = None
        if q_lora_rank is not None:
            self.q_lora_rank = _checks.positive_int(owner, "q_lora_rank", q_lora_rank)
        dropout = _checks.dropout_rate(owner, dropout)
        if qk_rope_head_dim % 2:
            raise ValueError(
                f"{owner}: qk_rope_head_dim must be even, since RoPE rotates pairs of "
                f"numbers, got qk_rope_head_dim={qk_rope_head_dim}"
            )
        eps = _checks.positive_number(owner, "eps", eps)
        self.qk_head_dim = qk_nope_head_dim + qk_rope_head_dim
        self.rotary = _rotary(owner, rotary, qk_rope_head_dim, interleaved=True)
        # The softmax scale: None is 1 / sqrt(qk_head_dim); YaRN's mscale_all_dim raises it
        mscale = _softmax_mscale(self.rotary._key)
        self._scale = None if mscale == 1.0 else self.qk_head_dim**-0.5 * mscale * mscale
        q_out = num_heads * self.qk_head_dim
        if q_lora_rank is None:
            self.W_query = nn.Linear(d_in, q_out, bias=False)
        else:
            self.W_dq = nn.Linear(d_in, q_lora_rank, bias=qkv_bias)
            self.q_norm = RMSNorm(q_lora_rank, eps)
            self.W_uq = nn.Linear(q_lora_rank, q_out, bias=False)
        self.W_dkv = nn.Linear(d_in, kv_lora_rank, bias=qkv_bias)
        self.W_kr = nn.Linear(d_in, qk_rope_head_dim, bias=qkv_bias)
        self.kv_norm = RMSNorm(kv_lora_rank, eps)
        self.W_uk = nn.Linear(kv_lora_rank, num_heads * qk_nope_head_dim, bias=False)
        self.W_uv = nn.Linear(kv_lora_rank, num_heads * v_head_dim, bias=False)
        self.out_proj = nn.Linear(num_heads * v_head_dim, d_out, bias=out_bias)
        self.dropout = nn.Dropout(dropout)

    @property
    def cache_bytes_per_token(self) -> int:
        """Bytes this layer's :class:`LatentCache` grows by per token.

        ``(kv_lora_rank + qk_rope_head_dim) * bytes per number``, whatever ``num_heads``.
        """
        return (self.kv_lora_rank + self.qk_rope_head_dim) * self.W_dkv.weight.element_size()

    def _rope(self, x: torch.Tensor, start: int) -> torch.Tensor:
        return self.rotary(x, start)  # from position start, in the rotary's layout

    def _project(
        self, x: object, cache: LatentCache | None, allowed: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        _check_cache(self, cache, *self._cache_type)
        x, num_cached = _checks.cached_input(self, x, cache)
        batch, num_tokens, _ = x.shape
        if allowed is not None:
            owner, num_keys = type(self).__name__, num_cached + num_tokens
            scores = (batch, self.num_heads, num_tokens, num_keys)
            allowed = _checks.allowed_mask(owner, allowed, scores)
        H, nope = self.num_heads, self.qk_nope_head_dim

        if self.q_lora_rank is None:
            queries = self.W_query(x)  # (b, n, H * qk_head_dim)
        else:
            queries = self.W_uq(self.q_norm(self.W_dq(x)))  # via (b, n, q_lora_rank)
        queries = queries.view(batch, num_tokens, H, self.qk_head_dim).transpose(1, 2)
        q_nope, q_rope = queries.split([nope, self.qk_rope_head_dim], dim=-1)
        q_rope = self._rope(q_rope, num_cached)  # (b, H, n, qk_rope_head_dim)

        latent = self.kv_norm(self.W_dkv(x))  # (b, n, kv_lora_rank)
        k_rope = self._rope(self.W_kr(x), num_cached)  # (b, n, qk_rope_head_dim), one for all heads
        if cache is not None:
            # (b, num_cached + n, kv_lora_rank) and (b, num_cached + n, qk_rope_head_dim)
            latent, k_rope = cache.update(latent, k_rope)
        num_keys = latent.shape[1]

        # Each head's keys and values, re-projected from the latent
        k_nope = self.W_uk(latent).view(batch, num_keys, H, nope).transpose(1, 2)
        values = self.W_uv(latent).view(batch, num_keys, H, self.v_head_dim).transpose(1, 2)
        k_rope = k_rope[:, None].expand(batch, H, num_keys, self.qk_rope_head_dim)
        keys = torch.cat((k_nope, k_rope), dim=-1)  # (b, H, num_keys, qk_head_dim)
        queries = torch.cat((q_nope, q_rope), dim=-1)  # (b, H, n, qk_head_dim)
        mask = _causal_mask(num_tokens, num_keys, None, x.device) if num_tokens > 1 else None
        if allowed is not None:
            # (batch, 1, num_tokens or 1, num_keys), True only where both allow
            mask = allowed if mask is None else mask & allowed
        return queries, keys, values, mask

    def forward(
        self,
        x: torch.Tensor,
        cache: LatentCache | None = None,
        allowed: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Attend causally, as :meth:`~attention.GroupedQueryAttention.forward` does.

        ``cache`` is this layer's :class:`~attention.LatentCache`, updated in place;
        ``allowed`` (``True`` where a query may attend), as in
        :meth:`~attention.GroupedQueryAttention.forward`, is combined with the causal mask.
        """
        projected = self._project(x, cache, allowed)  # queries, keys, values, mask
        context = self._attend_heads(x, projected, cache, allowed)
        batch, num_tokens, _ = x.shape
        context = context.transpose(1, 2).reshape(batch, num_tokens, -1)  # (b, n, H * v_head_dim)
        return self.out_proj(context)  # (b, n, d_out)

    def _attend_heads(
        self,
        x: torch.Tensor,
        projected: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None],
        cache: LatentCache | None,
        allowed: torch.Tensor | None,
    ) -> torch.Tensor:
        """Each head's context, ``(b, H, n, v_head_dim)``, from ``_project``'s four tensors.

        The scale is 1 / sqrt(qk_nope_head_dim + qk_rope_head_dim), times YaRN's
        correction with a rope_scaling that has mscale_all_dim. (DeepSeek-V3.2's layer
        reads ``x``, ``cache`` and ``allowed`` here too, for its indexer.)
        """
        queries, keys, values, mask = projected
        dropout = self.dropout.p if self.training else 0.0
        return _attend(queries, keys, values, mask, scale=self._scale, dropout=dropout)

    def attention_weights(
        self, x: torch.Tensor, allowed: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Each head's attention weights over a full pass (no dropout, no cache).

        ``allowed`` as in :meth:`forward`.

        Returns
        -------
        torch.Tensor, shape (batch, num_heads, num_tokens, num_tokens)
        """
        queries, keys, _, mask = self._project(x, None, allowed)
        # The scale is 1 / sqrt(qk_head_dim) (and YaRN's correction); mask: True = may attend.
        return _scaled_dot_product_weights(queries, keys, mask, self._scale)
