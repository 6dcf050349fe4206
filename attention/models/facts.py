"""What a real model's attention is made of: :class:`ModelFacts` and its groups.

Every number the site gives about a real model (its layers, heads, window, RoPE base,
context, bytes of cache) is computed from one table,
:data:`.MODELS`, whose entries copy the fields of a released
``config.json`` and say which checkpoint they come from; where a number is not in
that file (the context a model was trained with, a field the file leaves to its
``transformers`` config class's default), the entry names its source too.

Two numbers are easy to confuse. ``max_position_embeddings`` is how many positions the
config allows; ``trained_context`` is the longest text the model was trained on, which
its authors give as its context. Mistral 7B v0.1 allows 32,768 positions but was
trained on 8,192 tokens. A config with ALiBi (BLOOM) sets no limit at all: ``None``.

>>> from attention import MODELS
>>> llama = MODELS["Llama 3 8B"]
>>> llama.num_heads, llama.num_kv_heads, llama.head_dim, llama.attention
(32, 8, 128, 'GQA')

A mechanism a model has is one group of fields, present or absent as a whole, which
checks itself: Mistral's sliding layers, DeepSeek's latent, Qwen3-Next's Gated DeltaNet
sizes. The fields of each group are read through it; where a field is one of the
``config.json``, its name there is a read-only view of it:

>>> MODELS["Mistral 7B"].local
Sliding(window=4096)
>>> MODELS["Mistral 7B"].local.window
4096
>>> MODELS["Mistral 7B"].sliding_window, MODELS["Llama 3 8B"].sliding_window
(4096, None)

The hybrids of Part IV keep keys and values in a few layers only, and a state of fixed
size in the others:

>>> qwen = MODELS["Qwen3.5 397B-A17B"]
>>> qwen.layer_types[:4]
('linear_attention', 'linear_attention', 'linear_attention', 'full_attention')
>>> qwen.layer_types.count("full_attention"), qwen.local.num_value_heads
(15, 64)

What these cost, in bytes of cache at a length, is :mod:`attention.models.costs`.
"""

from __future__ import annotations

from dataclasses import MISSING, Field, dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar

from attention import _checks
from attention.cache_sizes import latent_cache_bytes_per_token

# No torch at run time: the facts and their costs run in the site's calculator, in the
# browser, where there is none (a dtype is a torch.dtype or its size in bytes).
if TYPE_CHECKING:
    import torch

__all__ = [
    "Chunked",
    "Compressed",
    "Cross",
    "GlobalLayers",
    "Indexer",
    "Latent",
    "LayerParts",
    "LinearAttention",
    "Mamba",
    "ModelFacts",
    "Quantization",
    "Rope",
    "Scores",
    "ShortConv",
    "Sliding",
    "TemperatureTuning",
    "Weights",
]

# transformers' layer_types
FULL, SLIDING = "full_attention", "sliding_attention"
CHUNKED, LINEAR = "chunked_attention", "linear_attention"
INDEXED = "indexed_attention"  # DeepSeek Sparse Attention: MLA over the keys an indexer picks
# Kinds a model gives outright, layer by layer (``layer_pattern``): hybrids of three or
# more kinds, and layers that are not attention at all.
MAMBA = "mamba"  # a Mamba or Mamba-2 mixer: a state of fixed size (Jamba, Nemotron-H)
# attention and a Mamba-2 mixer in one layer: side by side (Falcon-H1), or a shared
# attention block before the mixer (Zamba2)
HYBRID = "hybrid"
NO_MIXER = "mlp"  # an MLP or MoE block only: nothing mixes the tokens, nothing is cached
CONV = "conv"  # LFM2's gated short convolution: a window of its last inputs, nothing more
CSA = "compressed_sparse_attention"  # DeepSeek-V4: a window plus compressed entries, indexed
HCA = "heavily_compressed_attention"  # DeepSeek-V4: a window plus heavily compressed entries
CROSS = "cross_attention"  # queries from the text, keys and values from an image (Mllama)
KINDS = (FULL, SLIDING, CHUNKED, LINEAR, INDEXED, MAMBA, HYBRID, NO_MIXER, CSA, HCA, CROSS, CONV)
QK_NORMS = ("head", "projection", "l2", "head_after_rope", "layer_norm", "unscaled_query_head")
# The flat names of the groups' sizes, as transformers' configs spell them.
LINEAR_SIZES = (
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
)
INDEXER_SIZES = ("index_n_heads", "index_head_dim", "index_topk")


# The types a group's fields may declare, and what each admits. Numbers are positive:
# a size, a count, a base, a scale; a float field takes an int too (10_000 for 10000.0).
_TYPES = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,)}


def _check_field(owner: str, name: str, declared: str, value: object) -> None:
    """Check ``value`` against the type a field declares (``"int | None"``, ...)."""
    kind = declared.removesuffix(" | None")
    if (value is None and kind != declared) or kind not in _TYPES:
        return  # absent where it may be, or a type checked by its group (dict, tuple)
    if isinstance(value, bool) != (kind == "bool") or not isinstance(value, _TYPES[kind]):
        raise TypeError(
            f"{owner}: expected {name} to be {declared}, got {value!r} of type "
            f"{type(value).__name__}"
        )
    if isinstance(value, int | float) and kind in ("int", "float") and not value > 0:
        raise ValueError(f"{owner}: expected {name} > 0, got {value}")


class _Group:
    """A group of facts. It checks each field against the type the field declares (a
    number must be positive) and the choices it lists, if any, and its repr names the
    fields a model sets, the required ones first."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # each subclass is a dataclass

    def __post_init__(self) -> None:
        owner = type(self).__name__
        for item in fields(self):
            value = getattr(self, item.name)
            _check_field(owner, item.name, str(item.type), value)  # a str: annotations
            choices = item.metadata.get("choices", (value,))
            if value is not None and value not in choices:
                raise ValueError(
                    f"{owner}: expected {item.name} to be None or one of {choices}, got {value!r}"
                )

    def __repr__(self) -> str:
        given = [f for f in fields(self) if f.repr and getattr(self, f.name) != f.default]
        given.sort(key=lambda f: f.default is not MISSING)  # stable: required ones first
        inner = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in given)
        return f"{type(self).__name__}({inner})"


@dataclass(frozen=True, kw_only=True, repr=False)
class _Options(_Group):
    """A group of switches and values, each optional: absent as a whole rather than empty."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if all(getattr(self, f.name) == f.default for f in fields(self)):
            names = ", ".join(f.name for f in fields(self))
            raise ValueError(
                f"{type(self).__name__}: expected at least one of {names} to be set, got "
                f"none; a model without them leaves the group out (None)"
            )


@dataclass(frozen=True, kw_only=True, repr=False)
class Rope(_Group):
    """Rotary position embeddings, as the config's ``rope_parameters`` give them.

    Attributes
    ----------
    theta : float
        RoPE's base for the global (full-attention) layers (``rope_theta``).
    scaling : dict or None
        Its scaling for longer contexts, in ``transformers``' ``rope_parameters`` form
        (``rope_type``, ``factor``, ...). Gemma 4's ``"proportional"`` RoPE keeps its
        own ``partial_rotary_factor`` here, with another meaning than the field below
        (all dimensions rotate in pairs across the whole head; the pairs past that
        share have frequency zero).
    local_theta : float or None
        The base of the sliding layers, where their RoPE is not the full layers': a
        base of their own (Gemma 3 and 4: 10,000), or the same base without the
        scaling (OLMo 3). Sliding layers with a RoPE of their own never scale it.
    partial_rotary_factor : float
        The share of each head's dimensions that RoPE rotates, the first ones, with
        frequencies computed from that rotary size (Qwen3-Next: 0.25).
    nope_every : int or None
        One layer without RoPE (NoPE) every ``nope_every`` layers, layer ``i`` when
        ``(i + 1) % nope_every == 0`` (Llama 4 and SmolLM3: 4, ``no_rope_layers`` and
        ``no_rope_layer_interval`` in their configs).

    Examples
    --------
    >>> Rope(theta=500000.0, nope_every=4).partial_rotary_factor
    1.0
    """

    theta: float
    scaling: dict | None = None
    local_theta: float | None = None
    partial_rotary_factor: float = 1.0
    nope_every: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.partial_rotary_factor > 1:
            raise ValueError(
                f"Rope: expected partial_rotary_factor in (0, 1], got {self.partial_rotary_factor}"
            )
        if self.scaling is not None and "rope_type" not in self.scaling:
            raise ValueError(f"Rope: expected scaling to name its rope_type, got {self.scaling}")


@dataclass(frozen=True, kw_only=True, repr=False)
class _LocalLayers(_Group):
    """The layers that are not full attention, and where the full ones fall among them:
    every ``global_every``-th layer, or those ``full_attention_layers`` lists (0-based),
    or none (see ``local`` in :class:`ModelFacts`)."""

    kind: ClassVar[str]
    global_every: int | None = None
    full_attention_layers: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        owner = type(self).__name__
        layers = self.full_attention_layers
        if layers is None:
            return
        if self.global_every is not None:
            raise ValueError(
                f"{owner}: expected global_every or full_attention_layers, not both, got "
                f"global_every={self.global_every}, full_attention_layers={layers}"
            )
        if not isinstance(layers, tuple):
            raise TypeError(
                f"{owner}: expected full_attention_layers to be a tuple of layer indices, "
                f"got {type(layers).__name__}"
            )
        if list(layers) != sorted(set(layers)) or min(layers, default=0) < 0:
            raise ValueError(
                f"{owner}: expected full_attention_layers to be increasing layer indices "
                f"from 0, got {layers}"
            )

    def is_full(self, index: int) -> bool:
        """Whether layer ``index`` is a full-attention layer."""
        if self.full_attention_layers is not None:
            return index in self.full_attention_layers
        return self.global_every is not None and (index + 1) % self.global_every == 0

    @property
    def tokens_kept(self) -> int | None:
        """Tokens of keys and values a layer of this kind keeps at most; ``None``: all."""
        return None


@dataclass(frozen=True, kw_only=True, repr=False)
class Sliding(_LocalLayers):
    """Sliding-window layers: a query sees the last ``window`` tokens, itself included
    (``sliding_window``); their cache keeps as many. The full layers fall among them
    as ``global_every`` or ``full_attention_layers`` say (``local`` in
    :class:`ModelFacts`), as for the other local kinds.

    Attributes
    ----------
    window : int
        The tokens a query sees, itself included.
    num_kv_heads : int or None
        The sliding layers' own key/value heads, where they differ from the full
        layers' (``num_kv_heads`` in :class:`ModelFacts`): MiMo-V2-Flash's are twice
        its ``num_key_value_heads``, ``MiMoV2FlashAttention``'s ``num_key_value_heads *
        2 if is_swa``, with no config field.
    sinks : bool
        The sliding layers alone hold one learned sink logit per head, which joins each
        softmax (MiMo-V2-Flash: ``self.sinks = ... if is_swa else None``); a model
        whose every layer holds them says so in ``Scores.sinks``.

    Examples
    --------
    >>> Sliding(window=128, global_every=2).is_full(1)  # gpt-oss: every other layer
    True
    """

    kind: ClassVar[str] = SLIDING
    window: int
    num_kv_heads: int | None = None
    sinks: bool = False

    @property
    def tokens_kept(self) -> int:
        return self.window


@dataclass(frozen=True, kw_only=True, repr=False)
class Chunked(_LocalLayers):
    """Llama 4's chunked layers: a query sees only the keys of its own chunk of
    ``size`` tokens (``attention_chunk_size``); their cache keeps one chunk."""

    kind: ClassVar[str] = CHUNKED
    size: int

    @property
    def tokens_kept(self) -> int:
        return self.size


@dataclass(frozen=True, kw_only=True, repr=False)
class LinearAttention(_LocalLayers):
    """Linear-attention layers, whose state is not a key/value cache (Part IV).

    ``transformers`` names them ``"linear_attention"`` in ``layer_types`` and their
    sizes ``linear_*`` (Qwen3-Next, Qwen3.5); Kimi Linear's ``linear_attn_config``
    gives one head count and one head size for queries, keys and values alike.

    Attributes
    ----------
    mixer : str
        The token mixer: ``"Gated DeltaNet"`` (Qwen3-Next and Qwen3.5) or
        ``"Kimi Delta Attention"`` (Kimi Linear).
    num_key_heads, num_value_heads : int
        Query/key heads and value heads (Gated DeltaNet: each query/key head serves
        ``num_value_heads // num_key_heads`` consecutive value heads).
    key_head_dim, value_head_dim : int
        Their sizes.
    conv_kernel_dim : int or None
        Taps of the short causal convolution over the queries, keys and values
        (``short_conv_kernel_size`` in Kimi Linear's file); ``None``: no convolution
        (MiniMax's lightning attention).
    """

    kind: ClassVar[str] = LINEAR
    mixer: str
    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel_dim: int | None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.num_value_heads % self.num_key_heads:
            raise ValueError(
                f"LinearAttention: expected num_value_heads to be a multiple of "
                f"num_key_heads, got {self.num_value_heads} and {self.num_key_heads}"
            )

    def state_bytes(self, dtype: torch.dtype, state_dtype: torch.dtype) -> int:
        """Bytes of one layer's fixed-size state, as ``transformers``' cache holds it
        (``LinearAttentionLayer``: ``conv_states`` and ``recurrent_states``).

        - the short convolution's window over the queries, keys and values,
          ``(2 * num_key_heads * key_head_dim + num_value_heads * value_head_dim) *
          conv_kernel_dim`` numbers in ``dtype``, the model's (``transformers`` keeps
          all ``conv_kernel_dim`` inputs, though the next step needs one fewer);
        - the delta rule's state, a ``key_head_dim`` by ``value_head_dim`` matrix per
          value head, in ``state_dtype``.
        """
        conv, delta = self.state_numbers()
        return conv * _checks.dtype_bytes("layer_state_bytes", dtype) + delta * _checks.dtype_bytes(
            "layer_state_bytes", state_dtype
        )

    def state_numbers(self) -> tuple[int, int]:
        """Numbers of the two states: ``(convolution window, recurrent state)``."""
        channels = 2 * self.num_key_heads * self.key_head_dim
        channels += self.num_value_heads * self.value_head_dim
        conv = channels * (self.conv_kernel_dim or 0)
        return conv, self.num_value_heads * self.key_head_dim * self.value_head_dim


@dataclass(frozen=True, kw_only=True, repr=False)
class Latent(_Group):
    """Multi-head latent attention's sizes (DeepSeek; chapter 13).

    Attributes
    ----------
    kv_lora_rank : int
        The latent each token caches.
    qk_nope_head_dim, qk_rope_head_dim : int
        A query's or key's dimensions without and with RoPE; the rotary key, shared by
        the heads, is cached beside the latent.
    v_head_dim : int
        A value head's size.
    q_lora_rank : int or None
        The queries' own low-rank bottleneck; ``None``: a full query projection.
    """

    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    q_lora_rank: int | None = None

    def cache_bytes_per_token(self, dtype: torch.dtype | int) -> int:
        """Bytes one layer caches per token: the latent and the shared rotary key."""
        return latent_cache_bytes_per_token(1, self.kv_lora_rank, self.qk_rope_head_dim, dtype)


@dataclass(frozen=True, kw_only=True, repr=False)
class Indexer(_Group):
    """An indexer that picks the keys each query reads: DeepSeek Sparse Attention's
    lightning indexer, which picks single keys (chapter 24), or one that picks blocks
    of keys (chapter 26): MiniMax-M3's block top-k (``block_size``) or Qwen4-Exp's
    QSA, a token budget over compressed blocks (``compress_ratio``).

    Attributes
    ----------
    num_heads : int
        Its heads (``index_n_heads`` in the config; ``indexer_n_heads`` in Qwen4-Exp's).
    head_dim : int
        Their size: the one indexer key each token caches has ``head_dim`` numbers
        (``index_head_dim``).
    top_k : int
        How many keys each query attends to (``index_topk``); with ``block_size``, how
        many blocks (``index_topk_blocks``); with ``compress_ratio``, how many tokens of
        complete blocks (``indexer_budget``).
    block_size : int or None
        Keys per block, where the indexer max-pools its key scores into blocks and
        picks whole blocks (``index_block_size``, MiniMax-M3).
    local_blocks : int or None
        Blocks always read, the query's own and those just before, among the
        ``top_k`` (``index_local_blocks``); ``None``: none.
    compress_ratio : int or None
        Keys averaged into one scored key, where the indexer scores compressed blocks
        and a query also reads its last, incomplete block
        (``indexer_compress_ratio``, Qwen4-Exp's QSA).

    Examples
    --------
    >>> Indexer(num_heads=4, head_dim=128, top_k=16, block_size=128).keys_read
    2048
    >>> Indexer(num_heads=16, head_dim=128, top_k=2048, compress_ratio=64).keys_read
    2111
    """

    num_heads: int
    head_dim: int
    top_k: int
    block_size: int | None = None
    local_blocks: int | None = None
    compress_ratio: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.block_size is not None and self.compress_ratio is not None:
            raise ValueError(
                f"Indexer: expected blocks (block_size) or compressed blocks "
                f"(compress_ratio), not both, got {self.block_size} and {self.compress_ratio}"
            )
        if self.local_blocks is not None and (
            self.block_size is None or self.local_blocks > self.top_k
        ):
            raise ValueError(
                f"Indexer: expected local_blocks with block_size, at most top_k={self.top_k} "
                f"blocks, got local_blocks={self.local_blocks}, block_size={self.block_size}"
            )
        if self.compress_ratio is not None and self.top_k % self.compress_ratio:
            raise ValueError(
                f"Indexer: expected compress_ratio to divide the budget top_k (whole blocks "
                f"are read), got top_k={self.top_k}, compress_ratio={self.compress_ratio}"
            )

    @property
    def selects(self) -> str:
        """``"tokens"`` (DeepSeek's), ``"blocks"`` (MiniMax-M3's) or ``"compressed blocks"``
        (Qwen4-Exp's QSA)."""
        if self.block_size is not None:
            return "blocks"
        return "tokens" if self.compress_ratio is None else "compressed blocks"

    @property
    def keys_read(self) -> int:
        """The most keys one query reads once the context is long. That is ``top_k``
        keys, ``top_k`` blocks of ``block_size``, or the budget and the last,
        incomplete block of up to ``compress_ratio - 1`` tokens."""
        if self.block_size is not None:
            return self.top_k * self.block_size
        if self.compress_ratio is not None:
            return self.top_k + self.compress_ratio - 1
        return self.top_k


@dataclass(frozen=True, kw_only=True, repr=False)
class Mamba(_Group):
    """A Mamba mixer's sizes: the layers of ``"mamba"`` (or ``"hybrid"``) kind keep a
    state of fixed size, as a Gated DeltaNet layer does (Part IV).

    Attributes
    ----------
    mixer : str
        ``"Mamba"`` (Jamba) or ``"Mamba-2"`` (Nemotron-H, Falcon-H1).
    inner_size : int
        The channels the mixer works in: ``mamba_expand * hidden_size`` (Mamba), or
        heads times head size (Mamba-2: ``mamba_num_heads * mamba_head_dim``).
    state_size : int
        Numbers of state per channel (``mamba_d_state``, ``ssm_state_size``).
    conv_kernel_dim : int
        Taps of the short causal convolution (``mamba_d_conv``, ``conv_kernel``).
    num_heads : int or None
        Mamba-2's heads (``mamba_num_heads``, ``mamba_n_heads``).
    n_groups : int or None
        Mamba-2's groups of ``B`` and ``C`` projections, which go through the
        convolution with the inner channels (``n_groups``, ``mamba_n_groups``).
    chunk_size : int or None
        Mamba-2's SSD chunk (``chunk_size``, ``mamba_chunk_size``): how many tokens
        its chunked form takes at once. ``None`` where the reader does not build the
        layer (Mamba, Falcon-H1).
    time_step_floor : float or None
        The floor of Mamba-2's step ``dt`` on its chunked path: Nemotron-H's and
        Zamba2's ``time_step_min`` (their mixers clamp ``dt`` to ``(time_step_min,
        inf)``), or the low end of a ``time_step_limit``. ``None``: 0, no floor.
    norm_eps : float or None
        The epsilon of Mamba-2's gated RMSNorm.
    proj_bias, conv_bias : bool or None
        Whether Mamba-2's two projections, and its convolution, have a bias.

    The last five are what :func:`~attention.models.mamba2_layer` builds the layer
    with; where an entry does not give them, it takes Mamba-2's defaults (a chunk of
    256, no floor, an epsilon of 1e-5, no projection bias, a convolution bias). They
    are not compared, so two Mambas with the same sizes are equal.

    Examples
    --------
    >>> Mamba(mixer="Mamba-2", inner_size=16, state_size=4, conv_kernel_dim=3,
    ...       num_heads=4, n_groups=2).state_numbers()  # (16 + 2*2*4) * 3, 16 * 4
    (96, 64)
    """

    mixer: str = field(metadata={"choices": ("Mamba", "Mamba-2")})
    inner_size: int
    state_size: int
    conv_kernel_dim: int
    num_heads: int | None = None
    n_groups: int | None = None
    # What the layer's recipe needs, not the bill: left out of comparisons, so that an
    # entry whose stored file lacks them (Nemotron-H 47B's) still equals its reading.
    chunk_size: int | None = field(default=None, compare=False)
    time_step_floor: float | None = field(default=None, compare=False)
    norm_eps: float | None = field(default=None, compare=False)
    proj_bias: bool | None = field(default=None, compare=False)
    conv_bias: bool | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        two = self.mixer == "Mamba-2"
        if two != (self.num_heads is not None) or two != (self.n_groups is not None):
            raise ValueError(
                f"Mamba: expected num_heads and n_groups with Mamba-2 only, got "
                f"mixer={self.mixer!r}, num_heads={self.num_heads}, n_groups={self.n_groups}"
            )

    def state_numbers(self) -> tuple[int, int]:
        """Numbers of one layer's two states, as ``transformers``' cache holds them
        (``conv_states`` and ``recurrent_states`` of its ``LinearAttentionLayer``):
        ``(convolution window, SSM state)``. The window keeps all ``conv_kernel_dim``
        inputs of ``inner_size + 2 * n_groups * state_size`` channels (one fewer would
        do); the SSM state is ``inner_size * state_size`` numbers."""
        channels = self.inner_size + 2 * (self.n_groups or 0) * self.state_size
        return channels * self.conv_kernel_dim, self.inner_size * self.state_size


@dataclass(frozen=True, kw_only=True, repr=False)
class ShortConv(_Group):
    """LFM2's gated short convolution, the mixer of its ``"conv"`` layers: ``B * x``,
    a causal depthwise convolution of ``conv_kernel_dim`` taps over the tokens, then
    ``C *`` its output (``Lfm2ShortConv``: ``B, C, x`` from one projection). It keeps
    no key, no value and no recurrent state: only the convolution's window.

    Attributes
    ----------
    channels : int
        The channels it convolves: the model's ``hidden_size`` (``nn.Conv1d(
        in_channels=config.hidden_size, ...)``).
    conv_kernel_dim : int
        The convolution's taps (``conv_L_cache``).

    Examples
    --------
    >>> ShortConv(channels=2048, conv_kernel_dim=3).state_numbers()  # LFM2 1.2B
    (6144, 0)
    """

    channels: int
    conv_kernel_dim: int

    def state_numbers(self) -> tuple[int, int]:
        """Numbers of one layer's states, as ``transformers``' cache holds them (the
        ``conv_states`` of a ``LinearAttentionLayer``): ``(convolution window, 0)``, the
        last ``conv_kernel_dim`` inputs of every channel, and no recurrent state."""
        return self.channels * self.conv_kernel_dim, 0


@dataclass(frozen=True, kw_only=True, repr=False)
class Compressed(_Group):
    """DeepSeek-V4's compressed attention: every layer attends to a sliding window of
    uncompressed keys, and its ``"compressed_sparse_attention"`` (CSA) and
    ``"heavily_compressed_attention"`` (HCA) layers also to compressed entries, one per
    ``csa_rate`` or ``hca_rate`` tokens (``compress_rates``). A CSA layer's lightning
    indexer (``indexer``) picks ``top_k`` of its entries, from compressed indexer keys.

    Keys and values are one vector per token (one head, ``num_kv_heads`` of 1, the
    key serving as the value): the cache keeps it once.

    The CSA and HCA layers rotate everything they rotate (the queries, the window's
    keys and the compressed entries) with a RoPE of their own: base ``rope_theta``
    with ``rope_scaling``; only the sliding-only layers use the model's ``rope``
    (``DeepseekV4Attention``'s ``"compress"`` and ``"main"`` rotary tables).

    Attributes
    ----------
    csa_rate, hca_rate : int
        Tokens per compressed entry in the two kinds of layers.
    rope_theta : float or None
        RoPE's base in the CSA and HCA layers (``compress_rope_theta``).
    rope_scaling : dict or None
        Its scaling, in ``transformers``' ``rope_parameters`` form (the config's
        ``rope_scaling``, YaRN, which ``DeepseekV4Config`` gives these layers only,
        with an ``attention_factor`` of 1).
    q_lora_rank : int or None
        The size of the query latent (``q_lora_rank``).
    o_groups, o_lora_rank : int or None
        The grouped output projection: the heads in ``o_groups`` groups, each
        projected to ``o_lora_rank`` numbers before the last projection.
    """

    csa_rate: int
    hca_rate: int
    rope_theta: float | None = None
    rope_scaling: dict | None = None
    q_lora_rank: int | None = None
    o_groups: int | None = None
    o_lora_rank: int | None = None


@dataclass(frozen=True, kw_only=True, repr=False)
class Cross(_Group):
    """Cross-attention (Part VII): queries from the model's own tokens, keys and values
    from another sequence's encoding, an encoder's output or an image's patches. That
    context is encoded once, so its keys and values are computed once per sequence and
    cached whole: they do not grow with the tokens generated.

    Attributes
    ----------
    layers : tuple of int or None
        The layers that cross-attend *in place of* self-attention, 0-based (Llama 3.2
        Vision's ``cross_attention_layers``): their kind is ``"cross_attention"``, and
        they keep nothing per token of the text. ``None``: every layer cross-attends
        after its self-attention, as an encoder–decoder's decoder does (Whisper).
    context_tokens : int or None
        The encoded tokens each cross-attention reads, where the config fixes them
        (Whisper's ``max_source_positions``, its encoder's output for 30 seconds of
        audio); ``None`` where they depend on the input (how many images, of how many
        tiles).
    qk_norm : str or None
        The cross-attention's own QK-norm, as ``LayerParts.qk_norm`` names it:
        ``"head"`` in Llama 3.2 Vision's cross-attention layers
        (``MllamaTextCrossAttention`` always holds it, no config field), whose
        self-attention layers have none.

    Examples
    --------
    >>> Cross(context_tokens=1500).layers is None  # every layer, after self-attention
    True
    """

    layers: tuple[int, ...] | None = None
    context_tokens: int | None = None
    qk_norm: str | None = field(default=None, metadata={"choices": QK_NORMS})

    def __post_init__(self) -> None:
        super().__post_init__()
        layers = self.layers
        if layers is None:
            return
        if not isinstance(layers, tuple):
            raise TypeError(
                f"Cross: expected layers to be a tuple of layer indices, got "
                f"{type(layers).__name__}"
            )
        if not layers or list(layers) != sorted(set(layers)) or layers[0] < 0:
            raise ValueError(
                f"Cross: expected layers to be increasing layer indices from 0, got {layers}"
            )


@dataclass(frozen=True, kw_only=True, repr=False)
class GlobalLayers(_Options):
    """Sizes of the full-attention layers where they differ from the others' (Gemma 4).

    Attributes
    ----------
    head_dim : int or None
        Their ``head_dim`` (``global_head_dim``).
    num_kv_heads : int or None
        Their key/value heads (``num_global_key_value_heads``), which ``transformers``
        applies with ``k_eq_v`` only.
    k_eq_v : bool
        They use the key projection's output as the values, with no value projection
        (``attention_k_eq_v``).
    """

    head_dim: int | None = None
    num_kv_heads: int | None = None
    k_eq_v: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.num_kv_heads is not None and not self.k_eq_v:
            raise ValueError(
                f"GlobalLayers: expected k_eq_v=True with num_kv_heads, as transformers' "
                f"Gemma 4 applies it with attention_k_eq_v only, got "
                f"num_kv_heads={self.num_kv_heads}, k_eq_v=False"
            )


@dataclass(frozen=True, kw_only=True, repr=False)
class Scores(_Options):
    """What the attention does to its scores beyond ``softmax(q k^T / sqrt(head_dim))``.

    Attributes
    ----------
    scale : float or None
        The factor on the scores where the model sets it outright (Gemma 4: 1.0, in
        ``Gemma4TextAttention``; Granite's ``attention_multiplier``).
    query_pre_attn_scalar : int or None
        The scores are scaled by ``query_pre_attn_scalar ** -0.5`` instead of
        ``head_dim ** -0.5`` (Gemma 2 and 3).
    softcap : float or None
        ``c`` in ``c * tanh(s / c)``, applied to the scaled scores
        (``attn_logit_softcapping``, Gemma 2).
    sinks : bool
        One learned sink logit per head joins each softmax (gpt-oss, GraniteSWA; always
        on in ``GptOssAttention`` and ``GraniteSWAAttention``, no config field).
    """

    scale: float | None = None
    query_pre_attn_scalar: int | None = None
    softcap: float | None = None
    sinks: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.scale is not None and self.query_pre_attn_scalar is not None:
            raise ValueError(
                f"Scores: expected scale or query_pre_attn_scalar, not both, got "
                f"{self.scale} and {self.query_pre_attn_scalar}"
            )


@dataclass(frozen=True, kw_only=True, repr=False)
class LayerParts(_Options):
    """Parts the attention layer holds beside its projections (Part III).

    Attributes
    ----------
    qk_norm : str or None
        Normalisation of the queries and keys: ``"head"``, an RMSNorm over each
        head's ``head_dim`` with a learned scale, before RoPE (Qwen3, Gemma 3 and 4,
        Qwen3-Next); ``"projection"``, an RMSNorm over the whole query or key
        projection, ``num_heads * head_dim`` features, before RoPE (OLMo 2);
        ``"l2"``, Llama 4's ``use_qk_norm``: an RMS normalisation of each head with
        no learned scale, ``x * rsqrt(mean(x**2) + eps)``, *after* RoPE and on the
        RoPE layers only. ``transformers`` calls it ``Llama4TextL2Norm``, but it
        divides by the root mean square, not by the length: the result has RMS 1,
        not length 1. NanoChat's ``q_norm`` is the same, on every layer.
        ``"head_after_rope"``, an RMSNorm over each head with a learned scale, after
        RoPE (HunYuan's ``query_layernorm`` and ``key_layernorm``).
        ``"layer_norm"``, a LayerNorm over each head's ``head_dim``, the mean taken
        away before dividing by the spread, with a learned scale, before RoPE
        (Cohere's ``use_qk_norm``; Persimmon, Phi and StableLM's ``qk_layernorm``).
        ``"unscaled_query_head"``, an RMS normalisation of each query head with no
        learned scale, and an RMSNorm with a scale over the one key/value head, both
        before RoPE (DeepSeek-V4's ``q_b_norm`` and ``kv_norm``; no config field).
    value_norm : bool
        An RMSNorm without a learned scale over each head's values (Gemma 4's
        ``v_norm``; no config field).
    output_gate : bool
        The attention output is multiplied by ``sigmoid(W_gate x)`` before the output
        projection (Qwen3-Next; always on in ``Qwen3NextAttention``, no config field).
    head_gate : bool
        Each head's output is multiplied by one number, ``sigmoid(w_h . x)``, before the
        output projection (LFM3's ``use_attention_gate``: ``g_proj`` maps the hidden
        state to one gate per head).
    value_scale : float or None
        A factor on the values before they are cached (MiMo-V2-Flash's
        ``attention_value_scale``, 0.707).
    clip_qkv : float or None
        The queries, keys and values are clamped to ``[-clip_qkv, clip_qkv]`` right
        after their projections (OLMo's and DBRX's ``clip_qkv``). The clamp changes
        no key a query attends to, and nothing the cache holds but the values.
    """

    qk_norm: str | None = field(default=None, metadata={"choices": QK_NORMS})
    value_norm: bool = False
    output_gate: bool = False
    head_gate: bool = False
    value_scale: float | None = None
    clip_qkv: float | None = None


@dataclass(frozen=True, kw_only=True, repr=False)
class TemperatureTuning(_Group):
    """Llama 4's NoPE layers multiply their queries by
    ``1 + attn_scale * log(1 + floor((position + 1) / floor_scale))``
    (``attn_temperature_tuning``)."""

    floor_scale: int
    attn_scale: float


@dataclass(frozen=True, kw_only=True, repr=False)
class Weights(_Group):
    """The whole model's weights, and where the count comes from."""

    parameters: int
    source: str

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.source:
            raise ValueError("Weights: expected a source for the count, got ''")


#: The types a release stores quantized weights in, each a key of
#: :data:`attention.models.BITS`.
QUANTIZED_DTYPES = ("fp8", "mxfp4")


@dataclass(frozen=True, kw_only=True, repr=False)
class Quantization(_Group):
    """The weights a release stores in fewer than 16 bits: its config's
    ``quantization_config``. Every other parameter is stored in bf16.

    Attributes
    ----------
    dtype : str
        ``"fp8"``: e4m3 numbers, one float32 scale per 128 x 128 block (DeepSeek's
        ``weight_block_size``); the bill counts 8 bits a number, leaving out the
        scales, 32 bits per 16,384 numbers, as it leaves out every scale.
        ``"mxfp4"``: the OCP microscaling format, 4-bit numbers sharing one 8-bit
        scale per 32; the bill counts 4 + 8 / 32 = 4.25 bits a number, the scale
        included, since it adds a sixteenth.
    weights : str
        Which weights, in words.
    parameters : tuple of str
        The same weights as patterns over ``transformers``' parameter names
        (``fnmatch.fnmatch``: ``*`` matches any text, dots included), for
        :func:`~attention.models.parameter_count`'s ``only``.
    source : str
        The release's ``quantization_config``, and where it says which weights.
    """

    dtype: str = field(metadata={"choices": QUANTIZED_DTYPES})
    weights: str
    parameters: tuple[str, ...]
    source: str

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.parameters or not all(isinstance(p, str) and p for p in self.parameters):
            raise ValueError(
                f"Quantization: expected parameters to be patterns of parameter names, "
                f"got {self.parameters!r}"
            )


def _count(owner: str, name: str, value: object) -> int:
    """``value`` as a count from 0: TypeError if it is not an int, ValueError if < 0."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{owner}: expected {name} to be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{owner}: expected {name} >= 0, got {value}")
    return value


#: What a source says of a model's context (``ModelFacts.context_claim``): it was
#: trained at that length, the release says it supports it, or it is the config's limit.
CONTEXT_CLAIMS = ("trained", "supported", "configured")


@dataclass(frozen=True, kw_only=True)
class ModelFacts:
    """One released model's attention, as its ``config.json`` and its authors give it.

    Field names follow ``transformers``' config classes where they have one
    (``num_key_value_heads`` becomes ``num_kv_heads``, as in the package's modules).
    Each mechanism is a group, ``None`` where the model lacks it, and its fields are
    read through it: ``facts.latent.kv_lora_rank``, ``facts.local.window`` once
    ``facts.local`` is known to be :class:`Sliding`.

    Where a group's field is a ``config.json`` field, the config's own name is a
    read-only view of the group, for a reader who looks the field up:
    ``facts.sliding_window`` is ``facts.local.window`` (``None`` where the layers do
    not slide), ``facts.kv_lora_rank`` is ``facts.latent.kv_lora_rank``,
    ``facts.index_topk`` is ``facts.indexer.top_k``. The glossary lists them all
    (:doc:`/glossary`). Names of the package's own (``nope_every``, ``sinks``,
    ``qk_norm``) have no view: read them in their groups.

    Attributes
    ----------
    name, checkpoint, year : str, str, int
        The name the site uses, the checkpoint whose ``config.json`` the numbers come
        from, and the year the model was released.
    source : str
        Where the numbers come from: the ``config.json`` and, for what it does not
        hold, a paper or a model card.
    config_class : str
        The ``transformers`` config class that reads the ``config.json``.
    layers, hidden_size, num_heads, num_kv_heads : int
        ``num_hidden_layers``, ``hidden_size``, ``num_attention_heads``,
        ``num_key_value_heads``.
    head_dim : int
        The config's ``head_dim``, or ``hidden_size // num_heads`` where it has none
        (for latent attention, ``qk_nope_head_dim + qk_rope_head_dim``).
    value_head_dim : int or None
        A value head's size where it differs from a key's (``v_head_dim``:
        MiMo-V2-Flash's keys have 192 numbers a head, its values 128); ``None``: the
        values' heads are ``head_dim`` wide too (latent attention gives its own,
        ``latent.v_head_dim``).
    max_position_embeddings : int or None
        Positions the config allows; ``None`` where it sets no limit, as ALiBi needs
        none (BLOOM's config has no such field).
    trained_context, context_source : int or None, str
        The model's context as its source gives it, and where that is said: for most
        entries the longest context the model was trained with (see
        ``context_claim``); ``None`` only for facts read from a config that sets no
        position limit (BLOOM's), with no context given: a bill needs none.
    context_claim : str
        What the source says of that context, one of three: ``"trained"``, the model
        was trained at that length (the default); ``"supported"``, the release says
        the model supports it and gives no length trained on (DeepSeek-V4-Flash's
        1M); ``"configured"``, the config's ``max_position_embeddings``, where no
        source read gives a length. The site names the context by it
        (``context_label``).
    rope : Rope or None
        Its rotary position embeddings; ``None``: no layer rotates (see ``positions``).
    learned_positions : bool
        A position embedding table instead (GPT-2).
    sinusoidal_positions : bool
        A fixed table of sinusoids added to the embeddings instead (Marian, XGLM, CTRL:
        :func:`~attention.sinusoidal_positions`, chapter 10).
    alibi : bool
        ALiBi instead: each head subtracts ``slope * distance`` from its scores, and no
        position is added to the embeddings (BLOOM; always on in ``BloomModel``, no
        config field).
    local : Sliding, Chunked, LinearAttention or None
        The layers that are not full attention, of one kind, and where the full ones
        fall among them: one every ``local.global_every`` layers (layer ``i`` is full
        when ``(i + 1) % global_every == 0``; Gemma's ``sliding_window_pattern``,
        Qwen's ``full_attention_interval``), or those ``local.full_attention_layers``
        lists, 0-based (Kimi Linear's ``full_attn_layers``, 1-based there), or none.
        ``None``: every layer is full attention.
    latent : Latent or None
        Multi-head latent attention (DeepSeek, Kimi Linear's full layers).
    indexer : Indexer or None
        DeepSeek Sparse Attention's lightning indexer, which picks the keys each query
        of the latent attention reads (or the compressed entries of DeepSeek-V4's CSA
        layers).
    mamba : Mamba or None
        The Mamba mixer of the ``"mamba"`` and ``"hybrid"`` layers (Jamba, Nemotron-H,
        Falcon-H1, Bamba, Zamba2).
    short_conv : ShortConv or None
        The gated short convolution of the ``"conv"`` layers (LFM2).
    compressed : Compressed or None
        DeepSeek-V4's compressed entries.
    layer_pattern : tuple of str or None
        Each layer's kind, given outright where the groups cannot say it: models of
        three or more kinds, or with layers that are not attention (Mamba, MLP-only,
        DeepSeek-V4's). ``None``: ``local`` says (see ``layer_types``).
    global_layers : GlobalLayers or None
        The full-attention layers' own sizes (Gemma 4).
    num_kv_shared_layers : int
        The last ``num_kv_shared_layers`` layers compute no keys and values: each reuses
        those of the last earlier layer of its own type, and caches nothing (Gemma 3n,
        Gemma 4 E2B and E4B).
    scores : Scores or None
        A scale, a softcap or sinks on the attention scores.
    parts : LayerParts or None
        QK-norm, a value norm or an output gate in the layer.
    temperature_tuning : TemperatureTuning or None
        Llama 4's query temperature on its NoPE layers.
    final_logit_softcapping : float or None
        ``c`` in ``c * tanh(s / c)`` on the output logits (Gemma 2).
    attention_bias : bool
        The query, key, value and output projections have a bias (the config's
        ``attention_bias``: gpt-oss). Where the config class has no such field, the
        attention module's own choice: GPT-2's, BLOOM's and BERT's projections have
        one; Mistral's, Phi-3's, MiniMax-M2's and Llama 3.2 Vision's none; Whisper's
        key projection has none, so not all four: ``False``.
    rms_norm_eps : float or None
        The epsilon of the model's RMS norms, its QK-norm among them (the config's
        ``rms_norm_eps``); ``None`` where the config has no such field (a model of
        LayerNorms, GPT-2 or Command A; Nemotron-H, which names it
        ``layer_norm_epsilon``).
    weights : Weights or None
        Weights of the whole model, with their source.
    quantization : Quantization or None
        The weights the release stores in fewer than 16 bits (gpt-oss's MXFP4
        experts, DeepSeek's FP8 matrices); ``None``: all in 16 bits as released.
    bidirectional : bool
        An encoder (BERT, ModernBERT): every layer attends both ways, with no causal
        mask, and generates no tokens, so it keeps no cache (every byte count is 0).
        A sliding layer's ``window`` is then ``transformers``' bidirectional one: a
        query sees the keys within ``window`` positions on either side,
        ``sliding_window_mask(n, window + 1, causal=False)``.
    cross : Cross or None
        Cross-attention to an encoded context (Whisper's decoder, Llama 3.2 Vision's
        image layers); the numbers above are the decoder's.
    class_defaults : tuple of str
        Attributes, or fields of its groups (``global_every``, of ``local``), whose
        values the released ``config.json`` leaves out, so that they are the defaults
        of ``config_class``; the tests check them.
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
    max_position_embeddings: int | None
    trained_context: int | None
    context_source: str
    context_claim: str = "trained"
    attention_bias: bool
    rms_norm_eps: float | None
    head_dim: int | None = None
    value_head_dim: int | None = None
    rope: Rope | None = None
    learned_positions: bool = False
    sinusoidal_positions: bool = False
    alibi: bool = False
    local: Sliding | Chunked | LinearAttention | None = None
    latent: Latent | None = None
    indexer: Indexer | None = None
    mamba: Mamba | None = None
    short_conv: ShortConv | None = None
    compressed: Compressed | None = None
    layer_pattern: tuple[str, ...] | None = None
    global_layers: GlobalLayers | None = None
    num_kv_shared_layers: int = 0
    scores: Scores | None = None
    parts: LayerParts | None = None
    temperature_tuning: TemperatureTuning | None = None
    final_logit_softcapping: float | None = None
    weights: Weights | None = None
    quantization: Quantization | None = None
    bidirectional: bool = False
    cross: Cross | None = None
    class_defaults: tuple[str, ...] = field(default=())

    GROUPS: ClassVar[dict[str, tuple[type, ...]]] = {
        "rope": (Rope,),
        "local": (Sliding, Chunked, LinearAttention),
        "latent": (Latent,),
        "indexer": (Indexer,),
        "mamba": (Mamba,),
        "short_conv": (ShortConv,),
        "compressed": (Compressed,),
        "global_layers": (GlobalLayers,),
        "scores": (Scores,),
        "parts": (LayerParts,),
        "temperature_tuning": (TemperatureTuning,),
        "weights": (Weights,),
        "quantization": (Quantization,),
        "cross": (Cross,),
    }

    def __post_init__(self) -> None:
        for group, kinds in self.GROUPS.items():
            value = getattr(self, group)
            if value is not None and not isinstance(value, kinds):
                expected = " or ".join(kind.__name__ for kind in kinds)
                raise TypeError(
                    f"ModelFacts {self.name!r}: expected {group} to be {expected} or None, "
                    f"got {type(value).__name__}"
                )
        if self.head_dim is None:
            if self.latent is not None:  # latent attention: a query's or key's size
                head_dim = self.latent.qk_nope_head_dim + self.latent.qk_rope_head_dim
            else:
                head_dim = self.hidden_size // self.num_heads
            object.__setattr__(self, "head_dim", head_dim)
        owner = f"ModelFacts {self.name!r}"
        for name in ("layers", "hidden_size", "num_heads", "num_kv_heads", "head_dim"):
            _checks.positive_int(owner, name, getattr(self, name))
        if self.value_head_dim is not None:
            _checks.positive_int(owner, "value_head_dim", self.value_head_dim)
        _checks.flag(owner, "attention_bias", self.attention_bias, "a bias on the projections")
        if self.context_claim not in CONTEXT_CLAIMS:
            raise ValueError(
                f"{owner}: expected context_claim to be one of {', '.join(CONTEXT_CLAIMS)}, "
                f"got {self.context_claim!r}"
            )
        if self.rms_norm_eps is not None:
            _checks.positive_number(owner, "rms_norm_eps", self.rms_norm_eps)
        self._check_across_groups()

    @property
    def context_label(self) -> str:
        """The context as the site names it, from ``context_claim``.

        One of ``"trained context"``, ``"supported context"`` and ``"configured
        context"``.

        >>> from attention import MODELS
        >>> MODELS["Llama 3 8B"].context_label, MODELS["DeepSeek-V4-Flash"].context_label
        ('trained context', 'supported context')
        """
        return f"{self.context_claim} context"

    def _check_across_groups(self) -> None:
        """What no group can check alone: how it fits the model's layers and the other
        groups."""
        owner = f"ModelFacts {self.name!r}"
        if not 0 <= self.num_kv_shared_layers < self.layers:
            raise ValueError(
                f"{owner}: expected 0 <= num_kv_shared_layers < layers, "
                f"got {self.num_kv_shared_layers} of {self.layers}"
            )
        schemes = {
            "RoPE": self.rope is not None,
            "learned positions": self.learned_positions,
            "sinusoidal positions": self.sinusoidal_positions,
            "ALiBi": self.alibi,
        }
        if sum(schemes.values()) > 1:
            given = " and ".join(name for name, on in schemes.items() if on)
            raise ValueError(
                f"{owner}: expected one of RoPE, learned or sinusoidal positions or ALiBi, "
                f"got {given}"
            )
        # A model with no attention layer (Mamba-2 alone, whose pattern says so) has no
        # positions to limit.
        pattern = self.layer_pattern
        attends = pattern is None or any(kind not in (MAMBA, NO_MIXER, CONV) for kind in pattern)
        if self.max_position_embeddings is None and not self.alibi and attends:
            raise ValueError(
                f"{owner}: expected max_position_embeddings, the positions the config "
                f"allows (only ALiBi, or a model without attention, needs no limit), got None"
            )
        listed = (self.local.full_attention_layers if self.local is not None else None) or ()
        if listed and listed[-1] >= self.layers:
            raise ValueError(
                f"{owner}: expected full_attention_layers from 0 to {self.layers - 1}, got {listed}"
            )
        wide = self.global_layers.head_dim if self.global_layers is not None else None
        if self.value_head_dim is not None and (self.latent is not None or wide is not None):
            raise ValueError(
                f"{owner}: expected value_head_dim without a latent (latent.v_head_dim) "
                f"or full layers' own head size (global_layers.head_dim), got "
                f"value_head_dim={self.value_head_dim}, latent={self.latent}, "
                f"global_layers={self.global_layers}"
            )
        tokens = self.indexer is not None and self.indexer.selects == "tokens"
        if tokens and self.latent is None and self.compressed is None:
            raise ValueError(
                f"{owner}: expected a latent with an indexer of single keys, which selects "
                f"keys for latent attention, got latent=None"
            )
        self._check_pattern(owner)
        self._check_encoder_and_cross(owner)
        nope_every = self.rope.nope_every if self.rope is not None else None
        if self.temperature_tuning is not None and nope_every is None:
            raise ValueError(
                f"{owner}: expected NoPE layers (rope.nope_every) with temperature_tuning, "
                f"which scales their queries, got nope_every=None"
            )
        groups = [getattr(self, group) for group in self.GROUPS]
        unknown = [
            name
            for name in self.class_defaults
            if not hasattr(self, name) and not any(hasattr(group, name) for group in groups)
        ]
        if unknown:
            raise ValueError(
                f"{owner}: expected class_defaults to name attributes or the fields of "
                f"its groups, got {unknown}"
            )

    def _check_pattern(self, owner: str) -> None:
        """A ``layer_pattern`` names a known kind for each layer, and each kind it names
        has the group it needs."""
        pattern = self.layer_pattern
        if pattern is None:
            return
        if not isinstance(pattern, tuple):
            raise TypeError(
                f"{owner}: expected layer_pattern to be a tuple of str, got "
                f"{type(pattern).__name__}"
            )
        unknown = sorted(set(pattern) - set(KINDS))
        if unknown or len(pattern) != self.layers:
            raise ValueError(
                f"{owner}: expected layer_pattern to give one of {KINDS} for each of "
                f"{self.layers} layers, got {len(pattern)} layers, unknown kinds {unknown}"
            )
        needs = {  # a CSA layer's indexer reads compressed indexer keys
            MAMBA: ("mamba",),
            HYBRID: ("mamba",),
            CONV: ("short_conv",),
            # each compressed layer keeps a window too: the model's one (V4-Pro has no
            # sliding-only layer to require it)
            CSA: ("compressed", "indexer", "local"),
            HCA: ("compressed", "local"),
            LINEAR: ("local",),
            INDEXED: ("indexer",),
            SLIDING: ("local",),
            CHUNKED: ("local",),
            CROSS: ("cross",),
        }
        for kind in sorted(set(pattern)):
            for group in needs.get(kind, ()):
                if getattr(self, group) is None:
                    raise ValueError(f"{owner}: expected the {group} group for {kind!r} layers")

    def _check_encoder_and_cross(self, owner: str) -> None:
        """An encoder attends both ways and caches nothing; cross-attention layers are a
        decoder's, listed within the model's layers."""
        _checks.flag(owner, "bidirectional", self.bidirectional, "an encoder, no causal mask")
        if self.bidirectional and (self.cross is not None or self.layer_pattern is not None):
            raise ValueError(
                f"{owner}: expected an encoder (bidirectional=True) without cross or "
                f"layer_pattern, got cross={self.cross}, layer_pattern={self.layer_pattern}"
            )
        if self.bidirectional and not isinstance(self.local, Sliding | None):
            raise ValueError(
                f"{owner}: expected an encoder's local layers to be Sliding, got "
                f"{type(self.local).__name__}"
            )
        layers = self.cross.layers if self.cross is not None else None
        if layers is not None and (layers[-1] >= self.layers or self.layer_pattern is not None):
            raise ValueError(
                f"{owner}: expected cross.layers from 0 to {self.layers - 1} and no "
                f"layer_pattern, got {layers} and layer_pattern={self.layer_pattern}"
            )

    # -- the config's own names, read-only views of the groups -------------------------

    @property
    def rope_theta(self) -> float | None:
        """``rope_theta``: ``rope.theta``; ``None`` without RoPE."""
        return self.rope.theta if self.rope is not None else None

    @property
    def rope_scaling(self) -> dict | None:
        """``rope_scaling`` (``rope_parameters`` in ``transformers`` 5): ``rope.scaling``."""
        return self.rope.scaling if self.rope is not None else None

    @property
    def local_rope_theta(self) -> float | None:
        """``local_rope_theta`` (ModernBERT's name): ``rope.local_theta``."""
        return self.rope.local_theta if self.rope is not None else None

    @property
    def partial_rotary_factor(self) -> float:
        """``partial_rotary_factor``: ``rope.partial_rotary_factor``; 1.0 without RoPE."""
        return self.rope.partial_rotary_factor if self.rope is not None else 1.0

    @property
    def sliding_window(self) -> int | None:
        """``sliding_window``: ``local.window``, where the local layers slide."""
        return self.local.window if isinstance(self.local, Sliding) else None

    @property
    def attention_chunk_size(self) -> int | None:
        """``attention_chunk_size``: ``local.size``, where the local layers are chunked."""
        return self.local.size if isinstance(self.local, Chunked) else None

    @property
    def _linear(self) -> LinearAttention | None:
        """``local``, where its layers are linear attention."""
        return self.local if isinstance(self.local, LinearAttention) else None

    @property
    def linear_num_key_heads(self) -> int | None:
        """``linear_num_key_heads``: ``local.num_key_heads`` of linear attention."""
        return self._linear.num_key_heads if self._linear is not None else None

    @property
    def linear_num_value_heads(self) -> int | None:
        """``linear_num_value_heads``: ``local.num_value_heads`` of linear attention."""
        return self._linear.num_value_heads if self._linear is not None else None

    @property
    def linear_key_head_dim(self) -> int | None:
        """``linear_key_head_dim``: ``local.key_head_dim`` of linear attention."""
        return self._linear.key_head_dim if self._linear is not None else None

    @property
    def linear_value_head_dim(self) -> int | None:
        """``linear_value_head_dim``: ``local.value_head_dim`` of linear attention."""
        return self._linear.value_head_dim if self._linear is not None else None

    @property
    def linear_conv_kernel_dim(self) -> int | None:
        """``linear_conv_kernel_dim``: ``local.conv_kernel_dim`` of linear attention."""
        return self._linear.conv_kernel_dim if self._linear is not None else None

    @property
    def kv_lora_rank(self) -> int | None:
        """``kv_lora_rank``: ``latent.kv_lora_rank``."""
        return self.latent.kv_lora_rank if self.latent is not None else None

    @property
    def q_lora_rank(self) -> int | None:
        """``q_lora_rank``: ``latent.q_lora_rank``."""
        return self.latent.q_lora_rank if self.latent is not None else None

    @property
    def qk_nope_head_dim(self) -> int | None:
        """``qk_nope_head_dim``: ``latent.qk_nope_head_dim``."""
        return self.latent.qk_nope_head_dim if self.latent is not None else None

    @property
    def qk_rope_head_dim(self) -> int | None:
        """``qk_rope_head_dim``: ``latent.qk_rope_head_dim``."""
        return self.latent.qk_rope_head_dim if self.latent is not None else None

    @property
    def v_head_dim(self) -> int | None:
        """``v_head_dim``: ``latent.v_head_dim``."""
        return self.latent.v_head_dim if self.latent is not None else None

    @property
    def index_n_heads(self) -> int | None:
        """``index_n_heads``: ``indexer.num_heads``."""
        return self.indexer.num_heads if self.indexer is not None else None

    @property
    def index_head_dim(self) -> int | None:
        """``index_head_dim``: ``indexer.head_dim``."""
        return self.indexer.head_dim if self.indexer is not None else None

    @property
    def index_topk(self) -> int | None:
        """``index_topk``: ``indexer.top_k``."""
        return self.indexer.top_k if self.indexer is not None else None

    @property
    def compress_rope_theta(self) -> float | None:
        """``compress_rope_theta``: ``compressed.rope_theta``."""
        return self.compressed.rope_theta if self.compressed is not None else None

    @property
    def global_head_dim(self) -> int | None:
        """``global_head_dim``: ``global_layers.head_dim``."""
        return self.global_layers.head_dim if self.global_layers is not None else None

    @property
    def attention_k_eq_v(self) -> bool:
        """``attention_k_eq_v``: ``global_layers.k_eq_v``; ``False`` without the group."""
        return self.global_layers is not None and self.global_layers.k_eq_v

    @property
    def query_pre_attn_scalar(self) -> int | None:
        """``query_pre_attn_scalar``: ``scores.query_pre_attn_scalar``."""
        return self.scores.query_pre_attn_scalar if self.scores is not None else None

    @property
    def attn_logit_softcapping(self) -> float | None:
        """``attn_logit_softcapping``: ``scores.softcap``."""
        return self.scores.softcap if self.scores is not None else None

    @property
    def floor_scale(self) -> int | None:
        """``floor_scale``: ``temperature_tuning.floor_scale``."""
        tuning = self.temperature_tuning
        return tuning.floor_scale if tuning is not None else None

    @property
    def attn_scale(self) -> float | None:
        """``attn_scale``: ``temperature_tuning.attn_scale``."""
        tuning = self.temperature_tuning
        return tuning.attn_scale if tuning is not None else None

    @property
    def cross_attention_layers(self) -> tuple[int, ...] | None:
        """``cross_attention_layers`` (Llama 3.2 Vision): ``cross.layers``."""
        return self.cross.layers if self.cross is not None else None

    @property
    def max_source_positions(self) -> int | None:
        """``max_source_positions`` (Whisper): ``cross.context_tokens``."""
        return self.cross.context_tokens if self.cross is not None else None

    @property
    def attn_temperature_tuning(self) -> bool:
        """Whether the model tunes its NoPE layers' query temperature (Llama 4)."""
        return self.temperature_tuning is not None

    @property
    def positions(self) -> str:
        """``"rope"``, ``"learned"`` (a position embedding table), ``"sinusoidal"`` (a
        fixed table of sinusoids), ``"alibi"`` (a bias on the scores, BLOOM) or
        ``"none"``: no layer encodes positions, the order comes from the recurrent
        layers (Kimi Linear, whose MLA layers are NoPE, ``mla_use_nope``)."""
        if self.rope is not None:
            return "rope"
        if self.alibi:
            return "alibi"
        if self.sinusoidal_positions:
            return "sinusoidal"
        return "learned" if self.learned_positions else "none"

    # -- what the facts imply ---------------------------------------------------------

    @property
    def attention(self) -> str:
        """``"MLA"``, ``"MHA"`` (a key/value head per query head), ``"MQA"`` or ``"GQA"``."""
        if self.latent is not None:
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
        ``"indexed_attention"`` (DeepSeek Sparse Attention, in place of full attention),
        ``"cross_attention"`` (the layers ``cross.layers`` lists); or any kind of
        ``KINDS`` where the model gives a ``layer_pattern``."""
        if self.layer_pattern is not None:
            return self.layer_pattern
        full = INDEXED if self.indexer is not None else FULL
        kinds = [full] * self.layers
        if self.local is not None:
            kinds = [full if self.local.is_full(i) else self.local.kind for i in range(self.layers)]
        if self.cross is not None:
            for i in self.cross.layers or ():
                kinds[i] = CROSS
        return tuple(kinds)

    @property
    def uses_rope(self) -> tuple[bool, ...]:
        """For each layer, whether it rotates its queries and keys (False on NoPE layers)."""
        if self.rope is None:
            return (False,) * self.layers
        if self.rope.nope_every is None:
            return (True,) * self.layers
        return tuple((i + 1) % self.rope.nope_every != 0 for i in range(self.layers))

    @property
    def nope_layers(self) -> tuple[int, ...]:
        """The attention layers that rotate nothing (NoPE), in a model whose positions are
        RoPE or none: not the layers of a learned table or ALiBi, nor the layers that
        attend to nothing (a state, an MLP), which have no positions to lose.

        >>> from attention.models import MODELS
        >>> MODELS["Llama 4 Scout"].nope_layers[:3], MODELS["Llama 3 8B"].nope_layers
        ((3, 7, 11), ())
        """
        if self.positions in ("learned", "sinusoidal", "alibi"):
            return ()
        attends = (FULL, SLIDING, CHUNKED, INDEXED, HYBRID, CSA, HCA)
        return tuple(
            i
            for i, (kind, rope) in enumerate(zip(self.layer_types, self.uses_rope, strict=True))
            if not rope and kind in attends
        )

    @property
    def kv_shared(self) -> tuple[bool, ...]:
        """For each layer, whether it reuses an earlier layer's keys and values."""
        first_shared = self.layers - self.num_kv_shared_layers
        return tuple(i >= first_shared for i in range(self.layers))

    @property
    def _head_dim(self) -> int:
        """``head_dim``, which ``__post_init__`` fills in where the entry leaves it out."""
        assert self.head_dim is not None
        return self.head_dim

    @property
    def layer_kv_shapes(self) -> tuple[tuple[int, int], ...]:
        """``(key/value heads, head_dim)`` of each layer's attention.

        The full-attention layers take ``num_global_kv_heads`` and ``global_head_dim``
        where the model gives them (Gemma 4), the sliding ones ``local.num_kv_heads``
        (MiMo-V2-Flash); a linear-attention layer has the shape of the others, though
        it does not use it. ``head_dim`` is the keys'; the values' may differ
        (``value_head_dim``).
        """
        local = (self.num_kv_heads, self._head_dim)
        wide = self.global_layers
        full = (wide.num_kv_heads or local[0], wide.head_dim or local[1]) if wide else local
        own = self.local.num_kv_heads if isinstance(self.local, Sliding) else None
        sliding = (own or local[0], local[1])
        shapes = {FULL: full, SLIDING: sliding}
        return tuple(shapes.get(kind, local) for kind in self.layer_types)

    @property
    def receptive_field(self) -> int | None:
        """Positions back the last layer can draw on, if every layer slides; else ``None``.

        Each sliding layer reaches ``sliding_window - 1`` positions further back.
        """
        if not isinstance(self.local, Sliding) or set(self.layer_types) != {SLIDING}:
            return None
        return self.layers * (self.local.window - 1)
