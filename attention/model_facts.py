"""The attention-relevant config of every real model this site names, with its source.

Every number the site gives about a real model (its layers, heads, window, RoPE base,
context, bytes of cache) is computed from this one table, never typed into a page.
Each entry copies the fields of a released ``config.json`` and says which checkpoint
it comes from; where a number is not in that file (the context a model was trained
with, a field the file leaves to its ``transformers`` config class's default), the
entry names its source too.

Two numbers are easy to confuse. ``max_position_embeddings`` is how many positions the
config allows; ``trained_context`` is the longest text the model was trained on, which
its authors give as its context. Mistral 7B v0.1 allows 32,768 positions but was
trained on 8,192 tokens.

>>> from attention import MODELS
>>> llama = MODELS["Llama 3 8B"]
>>> llama.num_heads, llama.num_kv_heads, llama.head_dim, llama.attention
(32, 8, 128, 'GQA')
>>> llama.kv_bytes_per_token()  # 16-bit numbers: 2 * 32 layers * 8 heads * 128 * 2 bytes
131072
>>> MODELS["Mistral 7B"].kv_cache_bytes(100_000) / 2**30  # its window caps the cache
0.5

The hybrids of Part IV keep keys and values in a few layers only, and a state of fixed
size in the others:

>>> qwen = MODELS["Qwen3.5 397B-A17B"]
>>> qwen.layer_types[:4]
('linear_attention', 'linear_attention', 'linear_attention', 'full_attention')
>>> qwen.kv_bytes_per_token()  # 15 full-attention layers: 15 * 2 * 2 heads * 256 * 2 bytes
30720
>>> qwen.state_bytes() // 2**20  # MiB of Gated DeltaNet state per sequence, at any length
184
>>> MODELS["DeepSeek-V3.2"].indexer_bytes_per_token()  # 61 layers * 128 * 2 bytes
15616
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from attention.kv_cache import _dtype_bytes, kv_cache_bytes_per_token
from attention.latent import latent_cache_bytes_per_token

__all__ = ["MODELS", "ModelFacts"]

# transformers' layer_types
FULL, SLIDING = "full_attention", "sliding_attention"
CHUNKED, LINEAR = "chunked_attention", "linear_attention"
INDEXED = "indexed_attention"  # DeepSeek Sparse Attention: MLA over the keys an indexer picks
QK_NORMS = ("head", "projection", "l2")
POSITIONS = ("rope", "learned", "none")
LINEAR_SIZES = (
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
)
INDEXER_SIZES = ("index_n_heads", "index_head_dim", "index_topk")


@dataclass(frozen=True, kw_only=True)
class ModelFacts:
    """One released model's attention, as its ``config.json`` and its authors give it.

    Field names follow ``transformers``' config classes where they have one
    (``num_key_value_heads`` becomes ``num_kv_heads``, as in the package's modules).

    Attributes
    ----------
    name, checkpoint, year : str, str, int
        The name the site uses, the checkpoint whose ``config.json`` the numbers come
        from, and the year the model was released.
    source : str
        Where the numbers come from: the ``config.json`` and, for what it does not
        hold, a paper or a model card.
    layers, hidden_size, num_heads, num_kv_heads : int
        ``num_hidden_layers``, ``hidden_size``, ``num_attention_heads``,
        ``num_key_value_heads``.
    head_dim : int
        The config's ``head_dim``, or ``hidden_size // num_heads`` where it has none
        (for latent attention, ``qk_nope_head_dim + qk_rope_head_dim``).
    max_position_embeddings : int
        Positions the config allows.
    trained_context : int
        The longest context the model was trained with, from ``context_source``.
    positions : str
        ``"learned"`` (a position embedding table), ``"rope"``, or ``"none"``: no layer
        encodes positions, the order comes from the recurrent layers (Kimi Linear, whose
        MLA layers are NoPE, ``mla_use_nope``).
    rope_theta, rope_scaling, local_rope_theta : float, dict, float or None
        RoPE's base for the global (full-attention) layers, its scaling in
        ``transformers``' ``rope_parameters`` form, and the base of the sliding layers
        where they have their own.
    sliding_window : int or None
        Tokens a sliding layer sees, the query included.
    global_every : int or None
        One full-attention layer every ``global_every`` layers (layer ``i`` is full when
        ``(i + 1) % global_every == 0``); the others slide (``sliding_window``, Gemma's
        ``sliding_window_pattern``), are chunked (``attention_chunk_size``) or are not
        attention at all (``linear_attention``). ``None``: every layer is of that local
        kind, but for the layers ``full_attention_layers`` lists.
    kv_lora_rank, q_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim : int or None
        Multi-head latent attention's sizes (DeepSeek).
    query_pre_attn_scalar : int or None
        Where the scores are scaled by ``query_pre_attn_scalar ** -0.5`` instead of
        ``head_dim ** -0.5`` (Gemma).
    qk_norm : str or None
        Normalisation of the queries and keys before RoPE: ``"head"``, an RMSNorm over
        each head's ``head_dim`` with a learned scale (Qwen3, Gemma 3 and 4, Qwen3-Next);
        ``"projection"``, an RMSNorm over the whole query or key projection,
        ``num_heads * head_dim`` features (OLMo 2); ``"l2"``, an L2 norm over each head
        with no learned scale, on the RoPE layers only (Llama 4's ``use_qk_norm``).
        ``None``: no QK-norm.
    attn_logit_softcapping, final_logit_softcapping : float or None
        ``c`` in ``c * tanh(s / c)``, applied to the scaled attention scores and to the
        output logits (Gemma 2).
    sinks : bool
        One learned sink logit per head joins each softmax (gpt-oss; always on in
        ``GptOssAttention``, no config field).
    output_gate : bool
        The attention output is multiplied by ``sigmoid(W_gate x)`` before the output
        projection (Qwen3-Next; always on in ``Qwen3NextAttention``, no config field).
    value_norm : bool
        An RMSNorm without a learned scale over each head's values (Gemma 4's ``v_norm``;
        no config field).
    attention_k_eq_v : bool
        The full-attention layers use the key projection's output as the values, with no
        value projection (Gemma 4).
    scale : float or None
        The factor on the scores where the model sets it outright (Gemma 4: 1.0, in
        ``Gemma4TextAttention``); ``None``: ``head_dim ** -0.5``, or
        ``query_pre_attn_scalar ** -0.5`` where that is given.
    global_head_dim, num_global_kv_heads : int or None
        ``head_dim`` and key/value heads of the full-attention layers where they differ
        from the others' (Gemma 4's ``global_head_dim`` and
        ``num_global_key_value_heads``; ``transformers`` applies the latter only with
        ``attention_k_eq_v``).
    num_kv_shared_layers : int
        The last ``num_kv_shared_layers`` layers compute no keys and values: each reuses
        those of the last earlier layer of its own type, and caches nothing (Gemma 3n,
        Gemma 4 E2B and E4B).
    partial_rotary_factor : float
        The share of each head's dimensions that RoPE rotates, the first ones, with
        frequencies computed from that rotary size (Qwen3-Next: 0.25). Gemma 4's
        ``"proportional"`` RoPE keeps its own ``partial_rotary_factor`` inside
        ``rope_scaling``, with another meaning (all dimensions rotate in pairs across the
        whole head; the pairs past that share have frequency zero).
    attention_chunk_size : int or None
        Llama 4's chunked attention: a chunked layer's query sees only the keys of its
        own chunk of ``attention_chunk_size`` tokens.
    nope_every : int or None
        One layer without RoPE (NoPE) every ``nope_every`` layers, layer ``i`` when
        ``(i + 1) % nope_every == 0`` (Llama 4 and SmolLM3: 4, ``no_rope_layers`` and
        ``no_rope_layer_interval`` in their configs).
    attn_temperature_tuning, floor_scale, attn_scale : bool, int or None, float or None
        Llama 4 multiplies the queries of its NoPE layers by
        ``1 + attn_scale * log(1 + floor((position + 1) / floor_scale))``.
    linear_attention : str or None
        The token mixer of the layers that are not attention (Qwen3-Next and Qwen3.5:
        ``"Gated DeltaNet"``; Kimi Linear: ``"Kimi Delta Attention"``;
        ``"linear_attention"`` in their ``layer_types``). Their state is not a key/value
        cache: the ``kv_*`` figures count the attention layers only, :meth:`state_bytes`
        counts the state.
    full_attention_layers : tuple of int or None
        The full-attention layers, 0-based, where they follow no ``global_every`` pattern
        (Kimi Linear: every fourth layer and the last, ``full_attn_layers`` in its
        ``linear_attn_config``, 1-based there).
    linear_num_key_heads, linear_num_value_heads : int or None
        Query/key heads and value heads of a linear-attention layer (Gated DeltaNet: each
        query/key head serves ``linear_num_value_heads // linear_num_key_heads``
        consecutive value heads; Kimi Linear's ``num_heads`` is both).
    linear_key_head_dim, linear_value_head_dim : int or None
        Their sizes (Kimi Linear's ``head_dim`` is both).
    linear_conv_kernel_dim : int or None
        Taps of the short causal convolution over the queries, keys and values of a
        linear-attention layer (``short_conv_kernel_size`` in Kimi Linear's file).
    index_n_heads, index_head_dim, index_topk : int or None
        DeepSeek Sparse Attention's lightning indexer: its heads, their size (the one
        indexer key each token caches has ``index_head_dim`` numbers), and how many keys
        each query attends to.
    parameters : int or None
        Weights of the whole model, from ``parameters_source``.
    config_class : str
        The ``transformers`` config class that reads the ``config.json``.
    class_defaults : tuple of str
        Attributes whose values the released ``config.json`` leaves out, so that they
        are the defaults of ``config_class``; the tests check those defaults.
    """

    name: str
    checkpoint: str
    year: int
    source: str
    config_class: str
    layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    max_position_embeddings: int
    trained_context: int
    context_source: str
    positions: str = "rope"
    head_dim: int | None = None
    rope_theta: float | None = None
    rope_scaling: dict | None = None
    local_rope_theta: float | None = None
    sliding_window: int | None = None
    global_every: int | None = None
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None
    qk_nope_head_dim: int | None = None
    qk_rope_head_dim: int | None = None
    v_head_dim: int | None = None
    query_pre_attn_scalar: int | None = None
    qk_norm: str | None = None
    attn_logit_softcapping: float | None = None
    final_logit_softcapping: float | None = None
    sinks: bool = False
    output_gate: bool = False
    value_norm: bool = False
    attention_k_eq_v: bool = False
    scale: float | None = None
    global_head_dim: int | None = None
    num_global_kv_heads: int | None = None
    num_kv_shared_layers: int = 0
    partial_rotary_factor: float = 1.0
    attention_chunk_size: int | None = None
    nope_every: int | None = None
    attn_temperature_tuning: bool = False
    floor_scale: int | None = None
    attn_scale: float | None = None
    linear_attention: str | None = None
    full_attention_layers: tuple[int, ...] | None = None
    linear_num_key_heads: int | None = None
    linear_num_value_heads: int | None = None
    linear_key_head_dim: int | None = None
    linear_value_head_dim: int | None = None
    linear_conv_kernel_dim: int | None = None
    index_n_heads: int | None = None
    index_head_dim: int | None = None
    index_topk: int | None = None
    parameters: int | None = None
    parameters_source: str = ""
    class_defaults: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.head_dim is None:
            if self.kv_lora_rank is not None:  # latent attention: a query's or key's size
                head_dim = self.qk_nope_head_dim + self.qk_rope_head_dim
            else:
                head_dim = self.hidden_size // self.num_heads
            object.__setattr__(self, "head_dim", head_dim)
        if self.qk_norm is not None and self.qk_norm not in QK_NORMS:
            raise ValueError(
                f"ModelFacts {self.name!r}: qk_norm must be None or one of {QK_NORMS} "
                f"(got {self.qk_norm!r})"
            )
        local = [
            name
            for name in ("sliding_window", "attention_chunk_size", "linear_attention")
            if getattr(self, name) is not None
        ]
        if len(local) > 1:
            raise ValueError(
                f"ModelFacts {self.name!r}: the layers that are not full attention are of "
                f"one kind; expected at most one of sliding_window, attention_chunk_size "
                f"and linear_attention (got {', '.join(local)})"
            )
        if self.num_global_kv_heads is not None and not self.attention_k_eq_v:
            raise ValueError(
                f"ModelFacts {self.name!r}: num_global_kv_heads is applied with "
                f"attention_k_eq_v only, as transformers' Gemma 4 does (got "
                f"num_global_kv_heads={self.num_global_kv_heads}, attention_k_eq_v=False)"
            )
        if not 0 <= self.num_kv_shared_layers < self.layers:
            raise ValueError(
                f"ModelFacts {self.name!r}: expected 0 <= num_kv_shared_layers < layers "
                f"(got {self.num_kv_shared_layers} of {self.layers})"
            )
        if self.positions not in POSITIONS:
            raise ValueError(
                f"ModelFacts {self.name!r}: positions must be one of {POSITIONS} "
                f"(got {self.positions!r})"
            )
        self._check_hybrid_layout()
        linear = [getattr(self, name) for name in LINEAR_SIZES]
        hybrid = self.linear_attention is not None
        if any((size is None) == hybrid for size in linear):  # all given, or none
            raise ValueError(
                f"ModelFacts {self.name!r}: a model with linear-attention layers gives all "
                f"of {', '.join(LINEAR_SIZES)}, and only such a model (got "
                f"linear_attention={self.linear_attention!r}, sizes {linear})"
            )
        if hybrid and self.linear_num_value_heads % self.linear_num_key_heads:
            raise ValueError(
                f"ModelFacts {self.name!r}: linear_num_value_heads must be a multiple of "
                f"linear_num_key_heads (got {self.linear_num_value_heads} and "
                f"{self.linear_num_key_heads})"
            )
        indexer = [getattr(self, name) for name in INDEXER_SIZES]
        given = {size is not None for size in indexer}
        if len(given) > 1 or (True in given and self.kv_lora_rank is None):
            raise ValueError(
                f"ModelFacts {self.name!r}: a lightning indexer gives all of "
                f"{', '.join(INDEXER_SIZES)} and selects keys for latent attention "
                f"(got {indexer}, kv_lora_rank={self.kv_lora_rank})"
            )

    def _check_hybrid_layout(self) -> None:
        layers = self.full_attention_layers
        if layers is None:
            return
        if self.global_every is not None or self.linear_attention is None:
            raise ValueError(
                f"ModelFacts {self.name!r}: full_attention_layers lists the attention layers "
                f"of a linear-attention hybrid, in place of global_every (got "
                f"global_every={self.global_every}, linear_attention={self.linear_attention!r})"
            )
        if list(layers) != sorted(set(layers)) or not all(0 <= i < self.layers for i in layers):
            raise ValueError(
                f"ModelFacts {self.name!r}: full_attention_layers must be increasing layer "
                f"indices from 0 to {self.layers - 1} (got {layers})"
            )

    @property
    def attention(self) -> str:
        """``"MLA"``, ``"MHA"`` (a key/value head per query head), ``"MQA"`` or ``"GQA"``."""
        if self.kv_lora_rank is not None:
            return "MLA"
        if self.num_kv_heads == self.num_heads:
            return "MHA"
        return "MQA" if self.num_kv_heads == 1 else "GQA"

    @property
    def group_size(self) -> int:
        """Query heads that share one key/value head (in the layers that are not global,
        where the global ones have heads of their own: ``num_global_kv_heads``)."""
        return self.num_heads // self.num_kv_heads

    @property
    def layer_types(self) -> tuple[str, ...]:
        """Each layer's kind, in ``transformers``' names, ``"full_attention"``,
        ``"sliding_attention"``, ``"chunked_attention"``, ``"linear_attention"`` or
        ``"indexed_attention"`` (DeepSeek Sparse Attention, in place of full attention)."""
        full = INDEXED if self.index_topk is not None else FULL
        if self.sliding_window is not None:
            local = SLIDING
        elif self.attention_chunk_size is not None:
            local = CHUNKED
        elif self.linear_attention is not None:
            local = LINEAR
        else:
            return (full,) * self.layers
        if self.full_attention_layers is not None:
            chosen = set(self.full_attention_layers)
            return tuple(full if i in chosen else local for i in range(self.layers))
        if self.global_every is None:
            return (local,) * self.layers
        return tuple(
            full if (i + 1) % self.global_every == 0 else local for i in range(self.layers)
        )

    @property
    def uses_rope(self) -> tuple[bool, ...]:
        """For each layer, whether it rotates its queries and keys (False on NoPE layers)."""
        if self.positions != "rope":
            return (False,) * self.layers
        if self.nope_every is None:
            return (True,) * self.layers
        return tuple((i + 1) % self.nope_every != 0 for i in range(self.layers))

    @property
    def kv_shared(self) -> tuple[bool, ...]:
        """For each layer, whether it reuses an earlier layer's keys and values."""
        first_shared = self.layers - self.num_kv_shared_layers
        return tuple(i >= first_shared for i in range(self.layers))

    @property
    def layer_kv_shapes(self) -> tuple[tuple[int, int], ...]:
        """``(key/value heads, head_dim)`` of each layer's attention.

        The full-attention layers take ``num_global_kv_heads`` and ``global_head_dim``
        where the model gives them (Gemma 4); a linear-attention layer has the shape of
        the others, though it does not use it.
        """
        local = (self.num_kv_heads, self.head_dim)
        full = (self.num_global_kv_heads or local[0], self.global_head_dim or local[1])
        return tuple(full if kind == FULL else local for kind in self.layer_types)

    @property
    def receptive_field(self) -> int | None:
        """Positions back the last layer can draw on, if every layer slides; else ``None``.

        Each sliding layer reaches ``sliding_window - 1`` positions further back.
        """
        if self.sliding_window is None or set(self.layer_types) != {SLIDING}:
            return None
        return self.layers * (self.sliding_window - 1)

    def layer_kv_bytes_per_token(self, dtype: torch.dtype = torch.bfloat16) -> tuple[int, ...]:
        """Bytes each layer's cache grows by per token, in ``dtype`` numbers.

        ``2 * kv_heads * head_dim * bytes`` (the full-attention layers' own heads and size
        where they differ), or for latent attention ``(kv_lora_rank + qk_rope_head_dim) *
        bytes``; 0 for a layer that reuses another's keys and values and for a
        linear-attention layer, whose state is no key/value cache.

        Gemma 4's ``attention_k_eq_v`` layers count keys and values both: the key
        projection feeds both, but the keys are normalised and rotated and the values
        only normalised, and ``transformers`` caches the two.
        """
        if self.kv_lora_rank is not None:
            per_layer = latent_cache_bytes_per_token(
                1, self.kv_lora_rank, self.qk_rope_head_dim, dtype
            )
            return tuple(0 if kind == LINEAR else per_layer for kind in self.layer_types)
        return tuple(
            0 if shared or kind == LINEAR else kv_cache_bytes_per_token(1, *shape, dtype)
            for kind, shared, shape in zip(
                self.layer_types, self.kv_shared, self.layer_kv_shapes, strict=True
            )
        )

    def kv_bytes_per_token(self, dtype: torch.dtype = torch.bfloat16) -> int:
        """Bytes the cache of all layers grows by per token, in ``dtype`` numbers.

        ``2 * layers * num_kv_heads * head_dim * bytes``, or for latent attention
        ``layers * (kv_lora_rank + qk_rope_head_dim) * bytes``, counting the attention
        layers only; the sum of :meth:`layer_kv_bytes_per_token` where layers differ.
        A lightning indexer's keys are not counted: :meth:`indexer_bytes_per_token`.
        """
        return sum(self.layer_kv_bytes_per_token(dtype))

    def kv_cache_bytes(self, tokens: int, dtype: torch.dtype = torch.bfloat16) -> int:
        """Bytes of cache for one sequence of ``tokens`` tokens.

        A sliding layer keeps at most ``sliding_window`` tokens and a chunked one at most
        ``attention_chunk_size`` (the keys of the current chunk); a full one keeps all.
        A layer that reuses another's keys and values keeps none, and so does a
        linear-attention layer: its fixed-size state is not counted here.
        """
        limits = {SLIDING: self.sliding_window, CHUNKED: self.attention_chunk_size}
        return sum(
            per_token * min(tokens, limits.get(kind) or tokens)
            for kind, per_token in zip(
                self.layer_types, self.layer_kv_bytes_per_token(dtype), strict=True
            )
        )

    def layer_state_bytes(
        self, dtype: torch.dtype = torch.bfloat16, state_dtype: torch.dtype = torch.float32
    ) -> tuple[int, ...]:
        """Bytes of each layer's fixed-size state for one sequence; 0 for attention layers.

        A linear-attention layer keeps two states, laid out as ``transformers``' cache
        holds them (``LinearAttentionLayer``: ``conv_states`` and ``recurrent_states``):

        - the short convolution's window over the queries, keys and values,
          ``(2 * linear_num_key_heads * linear_key_head_dim + linear_num_value_heads *
          linear_value_head_dim) * linear_conv_kernel_dim`` numbers in ``dtype``, the
          model's (``transformers`` keeps all ``linear_conv_kernel_dim`` inputs, though
          the next step needs one fewer);
        - the delta rule's state, a ``linear_key_head_dim`` by ``linear_value_head_dim``
          matrix per value head, ``linear_num_value_heads * linear_key_head_dim *
          linear_value_head_dim`` numbers in ``state_dtype``: ``float32`` in
          ``transformers``, whose Gated DeltaNet and KDA functions compute in float32 and
          hand the state back in it.

        Neither grows with the sequence.
        """
        if self.linear_attention is None:
            return (0,) * self.layers
        channels = (
            2 * self.linear_num_key_heads * self.linear_key_head_dim
            + self.linear_num_value_heads * self.linear_value_head_dim
        )
        conv = channels * self.linear_conv_kernel_dim * _dtype_bytes("layer_state_bytes", dtype)
        delta = (
            self.linear_num_value_heads
            * self.linear_key_head_dim
            * self.linear_value_head_dim
            * _dtype_bytes("layer_state_bytes", state_dtype)
        )
        return tuple(conv + delta if kind == LINEAR else 0 for kind in self.layer_types)

    def state_bytes(
        self, dtype: torch.dtype = torch.bfloat16, state_dtype: torch.dtype = torch.float32
    ) -> int:
        """Bytes of the fixed-size state of all linear-attention layers, per sequence:
        the sum of :meth:`layer_state_bytes`, the same at any length."""
        return sum(self.layer_state_bytes(dtype, state_dtype))

    def indexer_bytes_per_token(self, dtype: torch.dtype = torch.bfloat16) -> int:
        """Bytes the lightning indexer's key cache grows by per token, in ``dtype`` numbers.

        Each indexed layer caches one key of ``index_head_dim`` numbers per token, shared
        by the indexer's heads (``transformers``' ``DynamicIndexedLayer.indexer_keys``,
        in the model's number type); 0 without an indexer.
        """
        if self.index_head_dim is None:
            return 0
        per_layer = self.index_head_dim * _dtype_bytes("indexer_bytes_per_token", dtype)
        return per_layer * self.layer_types.count(INDEXED)

    def cache_bytes(
        self,
        tokens: int,
        dtype: torch.dtype = torch.bfloat16,
        state_dtype: torch.dtype = torch.float32,
    ) -> int:
        """Everything the cache holds for one sequence of ``tokens`` tokens: the keys and
        values (:meth:`kv_cache_bytes`), the indexer's keys and the linear-attention
        layers' states."""
        return (
            self.kv_cache_bytes(tokens, dtype)
            + tokens * self.indexer_bytes_per_token(dtype)
            + self.state_bytes(dtype, state_dtype)
        )


def _hf(checkpoint: str) -> str:
    return f"https://huggingface.co/{checkpoint}/blob/main/config.json"


_ENTRIES = (
    ModelFacts(
        name="GPT-2",
        checkpoint="openai-community/gpt2",
        year=2019,
        source=_hf("openai-community/gpt2") + " (n_layer, n_embd, n_head, n_positions)",
        config_class="GPT2Config",
        layers=12,
        hidden_size=768,
        num_heads=12,
        num_kv_heads=12,
        max_position_embeddings=1024,
        trained_context=1024,
        context_source="Radford et al. 2019, section 2.3: a context of 1024 tokens",
        positions="learned",
        parameters=124_439_808,
        parameters_source="the released weights (embeddings tied to the output layer)",
    ),
    ModelFacts(
        name="GPT-2 medium",
        checkpoint="openai-community/gpt2-medium",
        year=2019,
        source=_hf("openai-community/gpt2-medium") + " (n_layer, n_embd, n_head, n_positions)",
        config_class="GPT2Config",
        layers=24,
        hidden_size=1024,
        num_heads=16,
        num_kv_heads=16,
        max_position_embeddings=1024,
        trained_context=1024,
        context_source="Radford et al. 2019, section 2.3: a context of 1024 tokens",
        positions="learned",
        parameters=354_823_168,
        parameters_source="the released weights (embeddings tied to the output layer)",
    ),
    ModelFacts(
        name="Llama 2 7B",
        checkpoint="meta-llama/Llama-2-7b-hf",
        year=2023,
        source=_hf("meta-llama/Llama-2-7b-hf"),
        config_class="LlamaConfig",
        layers=32,
        hidden_size=4096,
        num_heads=32,
        num_kv_heads=32,
        max_position_embeddings=4096,
        trained_context=4096,
        context_source="Touvron et al. 2023 (Llama 2), table 1: context length 4k",
        rope_theta=10000.0,
        parameters=6_738_415_616,
        parameters_source="the released weights (untied embeddings and output layer)",
    ),
    ModelFacts(
        name="Llama 3 8B",
        checkpoint="meta-llama/Meta-Llama-3-8B",
        year=2024,
        source=_hf("meta-llama/Meta-Llama-3-8B"),
        config_class="LlamaConfig",
        layers=32,
        hidden_size=4096,
        num_heads=32,
        num_kv_heads=8,
        max_position_embeddings=8192,
        trained_context=8192,
        context_source="the model card: context length 8k",
        rope_theta=500000.0,
    ),
    ModelFacts(
        name="Mistral 7B",
        checkpoint="mistralai/Mistral-7B-v0.1",
        year=2023,
        source=_hf("mistralai/Mistral-7B-v0.1"),
        config_class="MistralConfig",
        layers=32,
        hidden_size=4096,
        num_heads=32,
        num_kv_heads=8,
        max_position_embeddings=32768,
        trained_context=8192,
        context_source="Jiang et al. 2023 (Mistral 7B), table 1: context_len 8192",
        rope_theta=10000.0,
        sliding_window=4096,
    ),
    ModelFacts(
        name="Gemma 2B",
        checkpoint="google/gemma-2b",
        year=2024,
        source=_hf("google/gemma-2b"),
        config_class="GemmaConfig",
        layers=18,
        hidden_size=2048,
        num_heads=8,
        num_kv_heads=1,
        head_dim=256,
        max_position_embeddings=8192,
        trained_context=8192,
        context_source="Gemma Team 2024 (Gemma), table 1: context length 8192",
        rope_theta=10000.0,
    ),
    ModelFacts(
        name="Gemma 3 27B",
        checkpoint="google/gemma-3-27b-it",
        year=2025,
        source=_hf("google/gemma-3-27b-it")
        + " (text_config); the local:global pattern and QK-norm from Gemma Team 2025 "
        "(Gemma 3 technical report), section 2",
        config_class="Gemma3TextConfig",
        layers=62,
        hidden_size=5376,
        num_heads=32,
        num_kv_heads=16,
        head_dim=128,
        max_position_embeddings=131072,
        trained_context=131072,
        context_source="Gemma 3 technical report, section 2.2: 128K tokens, RoPE rescaled "
        "by 8 on the global layers",
        rope_theta=1_000_000.0,
        rope_scaling={"rope_type": "linear", "factor": 8.0},
        local_rope_theta=10000.0,
        sliding_window=1024,
        global_every=6,
        query_pre_attn_scalar=168,
        qk_norm="head",
        class_defaults=(
            "rope_theta",
            "local_rope_theta",
            "global_every",
            "max_position_embeddings",
        ),
    ),
    ModelFacts(
        name="DeepSeek-V3",
        checkpoint="deepseek-ai/DeepSeek-V3",
        year=2024,
        source=_hf("deepseek-ai/DeepSeek-V3"),
        config_class="DeepseekV3Config",
        layers=61,
        hidden_size=7168,
        num_heads=128,
        num_kv_heads=128,
        max_position_embeddings=163840,
        trained_context=131072,
        context_source="DeepSeek-AI 2024 (DeepSeek-V3 technical report), section 4.3: "
        "extended to 32K, then to 128K, with YaRN",
        rope_theta=10000.0,
        rope_scaling={
            "rope_type": "yarn",
            "factor": 40.0,
            "original_max_position_embeddings": 4096,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
        },
        kv_lora_rank=512,
        q_lora_rank=1536,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
        parameters=671_000_000_000,
        parameters_source="the technical report and model card: 671B in all, 37B active per token",
    ),
    ModelFacts(
        name="Qwen3 8B",
        checkpoint="Qwen/Qwen3-8B",
        year=2025,
        source=_hf("Qwen/Qwen3-8B") + "; QK-norm (q_norm, k_norm over each head) from "
        "Qwen3Attention and Qwen Team 2025 (Qwen3 technical report), section 2",
        config_class="Qwen3Config",
        layers=36,
        hidden_size=4096,
        num_heads=32,
        num_kv_heads=8,
        head_dim=128,
        max_position_embeddings=40960,
        trained_context=32768,
        context_source="the model card of Qwen/Qwen3-8B: context length 32,768 natively "
        "(131,072 with YaRN, which the released config leaves off)",
        rope_theta=1_000_000.0,
        qk_norm="head",
    ),
    ModelFacts(
        name="Gemma 2 9B",
        checkpoint="google/gemma-2-9b",
        year=2024,
        source=_hf("google/gemma-2-9b") + "; the 1:1 local:global pattern from Gemma Team "
        "2024 (Gemma 2 technical report), section 2",
        config_class="Gemma2Config",
        layers=42,
        hidden_size=3584,
        num_heads=16,
        num_kv_heads=8,
        head_dim=256,
        max_position_embeddings=8192,
        trained_context=8192,
        context_source="Gemma 2 technical report, section 2: context length 8192, "
        "sliding window 4096 in every other layer",
        rope_theta=10000.0,
        sliding_window=4096,
        global_every=2,
        query_pre_attn_scalar=256,
        attn_logit_softcapping=50.0,
        final_logit_softcapping=30.0,
        class_defaults=("global_every",),
    ),
    ModelFacts(
        name="Gemma 4 31B",
        checkpoint="google/gemma-4-31B-it",
        year=2026,
        source=_hf("google/gemma-4-31B-it") + " (text_config); QK-norm, the value norm and "
        "a score scale of 1 from Gemma4TextAttention in transformers",
        config_class="Gemma4TextConfig",
        layers=60,
        hidden_size=5376,
        num_heads=32,
        num_kv_heads=16,
        head_dim=256,
        max_position_embeddings=262144,
        trained_context=262144,
        context_source="the model card of google/gemma-4-31B-it: context length 256K",
        rope_theta=1_000_000.0,
        rope_scaling={"rope_type": "proportional", "partial_rotary_factor": 0.25},
        local_rope_theta=10000.0,
        sliding_window=1024,
        global_every=6,
        qk_norm="head",
        value_norm=True,
        attention_k_eq_v=True,
        scale=1.0,
        global_head_dim=512,
        num_global_kv_heads=4,
        final_logit_softcapping=30.0,
        parameters=30_700_000_000,
        parameters_source="the model card of google/gemma-4-31B-it: 30.7B",
    ),
    ModelFacts(
        name="Gemma 4 E2B",
        checkpoint="google/gemma-4-E2B-it",
        year=2026,
        source=_hf("google/gemma-4-E2B-it") + " (text_config); QK-norm, the value norm and "
        "a score scale of 1 from Gemma4TextAttention in transformers",
        config_class="Gemma4TextConfig",
        layers=35,
        hidden_size=1536,
        num_heads=8,
        num_kv_heads=1,
        head_dim=256,
        max_position_embeddings=131072,
        trained_context=131072,
        context_source="the model card of google/gemma-4-E2B-it: context length 128K",
        rope_theta=1_000_000.0,
        rope_scaling={"rope_type": "proportional", "partial_rotary_factor": 0.25},
        local_rope_theta=10000.0,
        sliding_window=512,
        global_every=5,
        qk_norm="head",
        value_norm=True,
        scale=1.0,
        global_head_dim=512,
        num_kv_shared_layers=20,
        final_logit_softcapping=30.0,
    ),
    ModelFacts(
        name="gpt-oss-120b",
        checkpoint="openai/gpt-oss-120b",
        year=2025,
        source=_hf("openai/gpt-oss-120b") + "; the learned sinks from GptOssAttention in "
        "transformers and OpenAI 2025 (gpt-oss-120b & gpt-oss-20b model card), section 2",
        config_class="GptOssConfig",
        layers=36,
        hidden_size=2880,
        num_heads=64,
        num_kv_heads=8,
        head_dim=64,
        max_position_embeddings=131072,
        trained_context=131072,
        context_source="gpt-oss model card (arXiv 2508.10925), section 2: context extended "
        "to 131,072 tokens with YaRN",
        rope_theta=150000.0,
        rope_scaling={
            "rope_type": "yarn",
            "factor": 32.0,
            "original_max_position_embeddings": 4096,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
        },
        sliding_window=128,
        global_every=2,
        sinks=True,
        parameters=116_800_000_000,
        parameters_source="gpt-oss model card (arXiv 2508.10925), section 2: 116.8B in all",
    ),
    ModelFacts(
        name="gpt-oss-20b",
        checkpoint="openai/gpt-oss-20b",
        year=2025,
        source=_hf("openai/gpt-oss-20b") + "; the learned sinks from GptOssAttention in "
        "transformers and OpenAI 2025 (gpt-oss-120b & gpt-oss-20b model card), section 2",
        config_class="GptOssConfig",
        layers=24,
        hidden_size=2880,
        num_heads=64,
        num_kv_heads=8,
        head_dim=64,
        max_position_embeddings=131072,
        trained_context=131072,
        context_source="gpt-oss model card (arXiv 2508.10925), section 2: context extended "
        "to 131,072 tokens with YaRN",
        rope_theta=150000.0,
        rope_scaling={
            "rope_type": "yarn",
            "factor": 32.0,
            "original_max_position_embeddings": 4096,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
        },
        sliding_window=128,
        global_every=2,
        sinks=True,
        parameters=20_900_000_000,
        parameters_source="gpt-oss model card (arXiv 2508.10925), section 2: 20.9B in all",
    ),
    ModelFacts(
        name="Llama 4 Scout",
        checkpoint="meta-llama/Llama-4-Scout-17B-16E",
        year=2025,
        source=_hf("meta-llama/Llama-4-Scout-17B-16E") + " (text_config). It writes "
        '"attn_temperature_tuning": 4, which Llama4TextAttention reads as true and '
        "transformers 5's Llama4TextConfig rejects as not a bool",
        config_class="Llama4TextConfig",
        layers=48,
        hidden_size=5120,
        num_heads=40,
        num_kv_heads=8,
        head_dim=128,
        max_position_embeddings=262144,
        trained_context=262144,
        context_source="Meta 2025, 'The Llama 4 herd' (ai.meta.com/blog/"
        "llama-4-multimodal-intelligence): pre-trained and post-trained with a 256K context",
        rope_theta=500000.0,
        rope_scaling={
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
        attention_chunk_size=8192,
        global_every=4,
        nope_every=4,
        qk_norm="l2",
        attn_temperature_tuning=True,
        floor_scale=8192,
        attn_scale=0.1,
        parameters=109_000_000_000,
        parameters_source="Meta 2025, 'The Llama 4 herd': 109B in all, 17B active per token",
    ),
    ModelFacts(
        name="SmolLM3 3B",
        checkpoint="HuggingFaceTB/SmolLM3-3B",
        year=2025,
        source=_hf("HuggingFaceTB/SmolLM3-3B") + " (no_rope_layers: every 4th layer 0)",
        config_class="SmolLM3Config",
        layers=36,
        hidden_size=2048,
        num_heads=16,
        num_kv_heads=4,
        max_position_embeddings=65536,
        trained_context=65536,
        context_source="Hugging Face 2025, 'SmolLM3: smol, multilingual, long-context "
        "reasoner' (huggingface.co/blog/smollm3): trained up to 64k, 128k with YaRN",
        rope_theta=5_000_000.0,
        nope_every=4,
    ),
    ModelFacts(
        name="OLMo 2 7B",
        checkpoint="allenai/OLMo-2-1124-7B",
        year=2024,
        source=_hf("allenai/OLMo-2-1124-7B") + "; QK-norm over the whole projection "
        "(q_norm over num_heads * head_dim) from Olmo2Attention and OLMo et al. 2024 "
        "(2 OLMo 2 Furious), section 3",
        config_class="Olmo2Config",
        layers=32,
        hidden_size=4096,
        num_heads=32,
        num_kv_heads=32,
        max_position_embeddings=4096,
        trained_context=4096,
        context_source="2 OLMo 2 Furious (OLMo et al. 2024), section 3: pretrained on "
        "sequences of 4096 tokens",
        rope_theta=500000.0,
        qk_norm="projection",
    ),
    ModelFacts(
        name="Qwen3-Next 80B-A3B",
        checkpoint="Qwen/Qwen3-Next-80B-A3B-Instruct",
        year=2025,
        source=_hf("Qwen/Qwen3-Next-80B-A3B-Instruct") + " (full_attention_interval 4, "
        "partial_rotary_factor 0.25); the output gate and QK-norm from "
        "Qwen3NextAttention in transformers",
        config_class="Qwen3NextConfig",
        layers=48,
        hidden_size=2048,
        num_heads=16,
        num_kv_heads=2,
        head_dim=256,
        max_position_embeddings=262144,
        trained_context=262144,
        context_source="the model card of Qwen/Qwen3-Next-80B-A3B-Instruct: context "
        "length 262,144 natively",
        rope_theta=10_000_000.0,
        partial_rotary_factor=0.25,
        global_every=4,
        linear_attention="Gated DeltaNet",
        linear_num_key_heads=16,
        linear_num_value_heads=32,
        linear_key_head_dim=128,
        linear_value_head_dim=128,
        linear_conv_kernel_dim=4,
        qk_norm="head",
        output_gate=True,
    ),
    ModelFacts(
        name="Qwen3.5 397B-A17B",
        checkpoint="Qwen/Qwen3.5-397B-A17B",
        year=2026,
        source=_hf("Qwen/Qwen3.5-397B-A17B") + " (text_config; full_attention_interval 4, "
        "rope_parameters with partial_rotary_factor 0.25, and mrope_section for images, "
        "which text tokens do not feel); the output gate and QK-norm from "
        "Qwen3_5MoeAttention in transformers",
        config_class="Qwen3_5MoeTextConfig",
        layers=60,
        hidden_size=4096,
        num_heads=32,
        num_kv_heads=2,
        head_dim=256,
        max_position_embeddings=262144,
        trained_context=262144,
        context_source="the model card of Qwen/Qwen3.5-397B-A17B: context length 262,144 "
        "natively, extensible up to 1,010,000 tokens",
        rope_theta=10_000_000.0,
        partial_rotary_factor=0.25,
        global_every=4,
        linear_attention="Gated DeltaNet",
        linear_num_key_heads=16,
        linear_num_value_heads=64,
        linear_key_head_dim=128,
        linear_value_head_dim=128,
        linear_conv_kernel_dim=4,
        qk_norm="head",
        output_gate=True,
        parameters=397_000_000_000,
        parameters_source="the model card of Qwen/Qwen3.5-397B-A17B: 397B in all, 17B "
        "activated per token",
    ),
    ModelFacts(
        name="Kimi Linear",
        checkpoint="moonshotai/Kimi-Linear-48B-A3B-Instruct",
        year=2025,
        source=_hf("moonshotai/Kimi-Linear-48B-A3B-Instruct") + " (linear_attn_config: "
        "full_attn_layers 4, 8, ..., 24 and 27, 1-based, the others kda_layers; num_heads "
        "and head_dim of the KDA layers; mla_use_nope: no RoPE, so its rope_theta goes "
        "unused); KimiLinearAttention in transformers applies no rotation",
        config_class="KimiLinearConfig",
        layers=27,
        hidden_size=2304,
        num_heads=32,
        num_kv_heads=32,
        max_position_embeddings=1048576,
        trained_context=1048576,
        context_source="the model card of moonshotai/Kimi-Linear-48B-A3B-Instruct: "
        "context length 1M (model_max_length 1,048,576 in its config.json)",
        positions="none",
        kv_lora_rank=512,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
        linear_attention="Kimi Delta Attention",
        full_attention_layers=(3, 7, 11, 15, 19, 23, 26),
        linear_num_key_heads=32,
        linear_num_value_heads=32,
        linear_key_head_dim=128,
        linear_value_head_dim=128,
        linear_conv_kernel_dim=4,
        parameters=48_000_000_000,
        parameters_source="the model card of moonshotai/Kimi-Linear-48B-A3B-Instruct: 48B "
        "in all, 3B activated per token",
    ),
    ModelFacts(
        name="DeepSeek-V3.2",
        checkpoint="deepseek-ai/DeepSeek-V3.2",
        year=2025,
        source=_hf("deepseek-ai/DeepSeek-V3.2") + " (MLA as DeepSeek-V3; the lightning "
        "indexer's index_n_heads, index_head_dim and index_topk; k = 2,048 also in the "
        "technical report, section 2.1.1)",
        config_class="DeepseekV32Config",
        layers=61,
        hidden_size=7168,
        num_heads=128,
        num_kv_heads=128,
        max_position_embeddings=163840,
        trained_context=131072,
        context_source="DeepSeek-AI 2025 (DeepSeek-V3.2 technical report), section 2.1.1: "
        "continued pre-training on sequences of 128K tokens from DeepSeek-V3.1-Terminus, "
        "whose context length has been extended to 128K",
        rope_theta=10000.0,
        rope_scaling={
            "rope_type": "yarn",
            "factor": 40.0,
            "original_max_position_embeddings": 4096,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
        },
        kv_lora_rank=512,
        q_lora_rank=1536,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
        index_n_heads=64,
        index_head_dim=128,
        index_topk=2048,
    ),
)

#: Every model the site names, by the name it uses.
MODELS: dict[str, ModelFacts] = {entry.name: entry for entry in _ENTRIES}
