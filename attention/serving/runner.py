"""The model runner: one packed batch of prefill chunks and decode tokens per step.

A serving engine asks its model one question per step: here are some requests'
next tokens, each request's own number of them, at each request's own positions;
what comes after each? A request still reading its prompt brings a *chunk* of it,
one already answering brings the one token it generated last. The runner packs all
those tokens into one sequence, chapter 29's layout, with ``cu_seqlens`` saying where
each request's tokens start, and runs the model once over the pack.

Everything between the attention layers (the embedding, the norms, the MLPs, the
output head) acts on each token alone, so packing changes nothing there. Attention
is the one place where tokens meet, and there each request's queries see only their
own request: the keys and values it computed in earlier steps, read from the paged
cache (:class:`~attention.PagedKVCache`) through its block table, and the new ones of
this step, causally. After the pass the new keys and values of every layer are
written at the end of each request's blocks.

The model is a ``transformers`` decoder of the Llama family, with its own weights
(random, from a config, or a checkpoint's); its attention layers are the package's,
built by :func:`~attention.models.from_transformers` with the same weights. The cache
keeps all layers of a token in one block row, as vLLM's blocks do: one block table
per request serves every layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from attention import _checks
from attention.gqa import GroupedQueryAttention
from attention.masks import causal_mask
from attention.models.weights import from_transformers
from attention.paged import PagedKVCache
from attention.step import attend

__all__ = ["SUPPORTED_MODEL_TYPES", "ModelRunner", "cu_seqlens_of"]

#: The ``transformers`` model types the runner serves: pre-norm decoders whose layers
#: are ``input_layernorm``, ``self_attn``, ``post_attention_layernorm`` and ``mlp``,
#: with full causal attention (no sliding window) and no scale on the embeddings.
SUPPORTED_MODEL_TYPES = ("llama", "qwen3")


def cu_seqlens_of(lengths: Sequence[int]) -> list[int]:
    """Chapter 29's cumulative lengths: 0, then where each packed sequence ends.

    >>> cu_seqlens_of([3, 1, 1])
    [0, 3, 4, 5]
    """
    ends = [0]
    for length in lengths:
        ends.append(ends[-1] + length)
    return ends


class ModelRunner:
    """A ``transformers`` Llama-family decoder run over a paged cache, one packed batch a step.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal language model of one of :data:`SUPPORTED_MODEL_TYPES`
        (``LlamaForCausalLM``, ``Qwen3ForCausalLM``), built from a config or loaded.
        Its attention layers are replaced, for the runner only, by the package's
        (:func:`~attention.models.from_transformers`); the model itself is unchanged.
    num_blocks, block_size : int
        The paged cache's pool: ``num_blocks`` blocks of ``block_size`` tokens, each
        token holding every layer's key and value.

    Attributes
    ----------
    cache : PagedKVCache
        The pool, ``num_kv_heads = num_layers * model's num_key_value_heads``: layer
        ``l``'s heads of a token are rows ``l * kv_heads`` to ``(l + 1) * kv_heads - 1``.
    attention : list of GroupedQueryAttention
        The package's attention layers, one per decoder layer.

    Examples
    --------
    >>> import torch
    >>> from transformers import LlamaConfig, LlamaForCausalLM
    >>> _ = torch.manual_seed(0)
    >>> config = LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32,
    ...                      num_hidden_layers=2, num_attention_heads=4,
    ...                      num_key_value_heads=2)
    >>> model = LlamaForCausalLM(config).double().eval()
    >>> runner = ModelRunner(model, num_blocks=8, block_size=4)
    >>> runner.cache.add(0)
    >>> runner.cache.add(1)
    >>> logits = runner.step([0, 1], [[5, 6, 7], [9]])  # a chunk of 3 and a token
    >>> logits.shape  # (requests, vocab_size): the next token's scores, each request
    torch.Size([2, 32])
    >>> full = model(torch.tensor([[5, 6, 7]])).logits[0, -1]
    >>> torch.allclose(logits[0], full, atol=1e-10, rtol=0)
    True
    """

    def __init__(self, model: nn.Module, *, num_blocks: int, block_size: int) -> None:
        owner = type(self).__name__
        config = getattr(model, "config", None)
        model_type = getattr(config, "model_type", None)
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
        self.model: Any = model
        decoder: Any = self.model.model
        self.attention: list[GroupedQueryAttention] = []
        for index, layer in enumerate(decoder.layers):
            attention = from_transformers(layer.self_attn).eval()
            if not isinstance(attention, GroupedQueryAttention) or any(
                part is not None
                for part in (
                    *(attention.window, attention.chunk, attention.softcap),
                    *(attention.sinks, attention.W_gate, attention.v_norm),
                )
            ):
                raise ValueError(
                    f"{owner}: layer {index} must be full causal attention (a "
                    f"GroupedQueryAttention with no window, chunk, softcap, sinks, gate or "
                    f"value norm), got {attention!r}"
                )
            if attention.W_value is None:  # Gemma 4's values are its keys
                raise ValueError(
                    f"{owner}: layer {index} must have its own values (W_value), got none"
                )
            self.attention.append(attention)
        first = self.attention[0]
        self.num_layers = len(self.attention)
        self.num_kv_heads, self.head_dim = first.num_kv_heads, first.head_dim
        dtype = first.W_key.weight.dtype
        self.cache = PagedKVCache(
            num_blocks,
            block_size,
            num_kv_heads=self.num_layers * self.num_kv_heads,
            head_dim=self.head_dim,
            dtype=dtype,
        )

    @property
    def vocab_size(self) -> int:
        """How many token ids the model reads and scores."""
        return int(self.model.config.vocab_size)

    @property
    def cache_bytes_per_block(self) -> int:
        """The bytes of one block, every layer's keys and values for ``block_size`` tokens."""
        return self.cache.nbytes // self.cache.num_blocks

    def _layer_heads(self, keys: torch.Tensor, layer: int) -> torch.Tensor:
        # (tokens, num_layers * kv_heads, dim) -> (1, kv_heads, tokens, dim), one layer's
        start = layer * self.num_kv_heads
        return keys[:, start : start + self.num_kv_heads].transpose(0, 1)[None]

    @torch.no_grad()
    def step(self, seq_ids: Sequence[int], chunks: Sequence[Sequence[int]]) -> torch.Tensor:
        """Run one packed batch; write its keys and values; return each last token's logits.

        Parameters
        ----------
        seq_ids : list of int
            Sequences of :attr:`cache` (added, perhaps on shared prefix blocks), each once.
        chunks : list of list of int
            ``chunks[i]``: the tokens ``seq_ids[i]`` adds this step, at positions
            ``cache.num_tokens(seq_ids[i])`` onwards: a chunk of its prompt, or the
            one token it generated last. None is empty.

        Returns
        -------
        torch.Tensor, shape (len(seq_ids), vocab_size)
            The scores of the token after each chunk's last token.
        """
        owner = f"{type(self).__name__}.step"
        seq_ids = [_checks.whole_number(owner, s, "seq_ids must hold ints") for s in seq_ids]
        if len(set(seq_ids)) != len(seq_ids) or len(chunks) != len(seq_ids):
            raise ValueError(
                f"{owner}: seq_ids must be distinct and chunks must hold one list per "
                f"sequence, got {len(seq_ids)} seq_ids ({len(set(seq_ids))} distinct) and "
                f"{len(chunks)} chunks"
            )
        if not seq_ids:
            raise ValueError(f"{owner}: a step needs at least one sequence, got none")
        tokens = []
        for seq_id, chunk in zip(seq_ids, chunks, strict=True):
            if isinstance(chunk, (str, bytes)) or not isinstance(chunk, Sequence) or not chunk:
                raise ValueError(
                    f"{owner}: the chunk of sequence {seq_id} must be a non-empty list of "
                    f"token ids, got {chunk!r}"
                )
            for token in chunk:
                token = _checks.whole_number(owner, token, "chunks must hold ints")
                if not 0 <= token < self.vocab_size:
                    raise ValueError(
                        f"{owner}: token {token} of sequence {seq_id} is not in the "
                        f"vocabulary, 0 to {self.vocab_size - 1}"
                    )
                tokens.append(token)
        starts = [self.cache.num_tokens(s) for s in seq_ids]  # each chunk's first position
        cu_seqlens = cu_seqlens_of([len(chunk) for chunk in chunks])
        # Each sequence's past, every layer at once: (held, num_layers * kv_heads, dim).
        past = [self.cache.gather(s) if n else None for s, n in zip(seq_ids, starts, strict=True)]
        device = self.cache.key_blocks.device
        decoder = self.model.model
        hidden = decoder.embed_tokens(torch.tensor([tokens], device=device))  # (1, total, d)
        new_keys, new_values = [], []
        layers = zip(decoder.layers, self.attention, strict=True)
        for index, (layer, attention) in enumerate(layers):
            x = layer.input_layernorm(hidden)
            heads, keys, values = self._attend_packed(attention, x, index, past, starts, cu_seqlens)
            new_keys.append(keys)
            new_values.append(values)
            hidden = hidden + heads
            hidden = hidden + layer.mlp(layer.post_attention_layernorm(hidden))
        last = torch.tensor(cu_seqlens[1:], device=device) - 1  # each chunk's last token
        logits = self.model.lm_head(decoder.norm(hidden[0, last]))  # (num_seqs, vocab)
        # (total, kv_heads, dim) per layer -> (total, num_layers * kv_heads, dim)
        keys_all, values_all = torch.cat(new_keys, dim=1), torch.cat(new_values, dim=1)
        for i, seq_id in enumerate(seq_ids):
            rows = slice(cu_seqlens[i], cu_seqlens[i + 1])
            self.cache.update(seq_id, keys_all[rows], values_all[rows])
        return logits

    def _attend_packed(
        self,
        attention: GroupedQueryAttention,
        x: torch.Tensor,
        layer: int,
        past: list[tuple[torch.Tensor, torch.Tensor] | None],
        starts: list[int],
        cu_seqlens: list[int],
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One attention layer over the pack: each sequence's queries, its past and new keys.

        Returns the layer's output ``(1, total, hidden)`` and the new tokens' keys and
        values ``(total, kv_heads, head_dim)``, rotated, to be cached.
        """
        # The projections and QK-norms act token by token: one call for the whole pack.
        queries, keys, values = _project(attention, x)
        outputs, keys_out, values_out = [], [], []
        for i, start in enumerate(starts):
            rows = slice(cu_seqlens[i], cu_seqlens[i + 1])
            q, k, v = queries[:, :, rows], keys[:, :, rows], values[:, :, rows]
            if attention.rotary is not None:  # RoPE at this sequence's own positions
                q, k = attention.rotary(q, start), attention.rotary(k, start)
            keys_out.append(k[0].transpose(0, 1))
            values_out.append(v[0].transpose(0, 1))
            held = past[i]
            if held is not None:
                past_keys, past_values = held
                k = torch.cat((self._layer_heads(past_keys, layer), k), dim=2)
                v = torch.cat((self._layer_heads(past_values, layer), v), dim=2)
            num_new = q.shape[2]
            # A chunk's queries are the last num_new of the keys: causal, bottom-right.
            allowed = None if num_new == 1 else causal_mask(num_new, k.shape[2], device=q.device)
            outputs.append(attend(q, k, v, allowed=allowed, scale=attention.scale))
        context = torch.cat(outputs, dim=2)  # (1, heads, total, dim)
        context = context.transpose(1, 2).reshape(1, context.shape[2], -1)
        return attention.out_proj(context), torch.cat(keys_out), torch.cat(values_out)


def _project(
    attention: GroupedQueryAttention, x: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Queries, keys and values of ``x``, ``(1, heads, tokens, head_dim)``, normed, not rotated.

    The layer's own public parts: its projections and its QK-norms (Qwen3); the
    runner refused layers with other parts.
    """
    batch, num_tokens, _ = x.shape

    def heads(projected: torch.Tensor, num_heads: int) -> torch.Tensor:
        return projected.view(batch, num_tokens, num_heads, attention.head_dim).transpose(1, 2)

    queries = heads(attention.W_query(x), attention.num_heads)
    keys = heads(attention.W_key(x), attention.num_kv_heads)
    assert attention.W_value is not None  # ModelRunner refuses layers without one
    values = heads(attention.W_value(x), attention.num_kv_heads)
    if attention.q_norm is not None:
        queries = attention.q_norm(queries)
    if attention.k_norm is not None:
        keys = attention.k_norm(keys)
    return queries, keys, values
