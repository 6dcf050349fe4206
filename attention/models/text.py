"""A model's attention in words: its recipe, and its layers as a strip of letters.

:func:`.recipe` names each mechanism as the chapters name it and ends with what the
cache costs; :func:`.layer_strip` writes one letter per layer. Both read only the
:class:`~attention.models.ModelFacts`.
"""

from __future__ import annotations

from attention.models.costs import cache_profile, cross_cache_bytes
from attention.models.facts import (
    CHUNKED,
    CONV,
    CROSS,
    CSA,
    FULL,
    HCA,
    HYBRID,
    INDEXED,
    LINEAR,
    MAMBA,
    NO_MIXER,
    SLIDING,
    Chunked,
    Indexer,
    LinearAttention,
    ModelFacts,
    Sliding,
)

__all__ = ["STRIP_LETTERS", "format_bytes", "format_number", "kind_name", "layer_strip", "recipe"]


def format_number(value: float) -> str:
    """A number as the pages write it: thousands separated, a whole float without ``.0``.

    >>> format_number(4096), format_number(0.25), format_number(1e6)
    ('4,096', '0.25', '1,000,000')
    """
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def format_bytes(size: float) -> str:
    """Bytes in the largest binary unit that keeps them >= 1, three figures.

    >>> format_bytes(512), format_bytes(24 * 1024), format_bytes(3 * 2**20)
    ('512 bytes', '24 KiB', '3 MiB')
    """
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:,.0f} bytes" if unit == "bytes" else f"{size:.3g} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def kind_name(facts: ModelFacts, kind: str) -> str:
    """A layer kind as the recipe names it, with its window, chunk or rate.

    >>> from attention.models import MODELS, SLIDING
    >>> kind_name(MODELS["Mistral 7B"], SLIDING)
    'sliding (window 4,096)'
    >>> kind_name(MODELS["Mistral 7B"], "mamba")
    Traceback (most recent call last):
        ...
    ValueError: kind_name: expected a layer kind of 'Mistral 7B' (sliding_attention), got 'mamba'
    """
    if kind not in facts.layer_types:  # its window, rate or mixer would be missing
        kinds = ", ".join(dict.fromkeys(facts.layer_types))
        raise ValueError(
            f"kind_name: expected a layer kind of {facts.name!r} ({kinds}), got {kind!r}"
        )
    local = facts.local
    if kind == SLIDING:
        assert isinstance(local, Sliding)  # the groups give each kind its layers
        if facts.bidirectional:
            return f"local ({format_number(local.window)} positions each side)"
        return f"sliding (window {format_number(local.window)})"
    if kind == CROSS:
        return "cross-attention"
    if kind == CHUNKED:
        assert isinstance(local, Chunked)
        return f"chunked (chunk {format_number(local.size)})"
    if kind == LINEAR:
        assert isinstance(local, LinearAttention)
        return local.mixer
    top = f"top {format_number(facts.indexer.top_k)}" if facts.indexer is not None else ""
    if kind == INDEXED:
        assert facts.indexer is not None  # ModelFacts gives an indexed layer its indexer
        return _indexed_label(facts.indexer)
    if kind in (MAMBA, HYBRID):
        assert facts.mamba is not None  # a model with Mamba layers describes them
        return facts.mamba.mixer if kind == MAMBA else f"attention beside {facts.mamba.mixer}"
    if kind == NO_MIXER:
        return "MLP only"
    if kind == CONV:
        assert facts.short_conv is not None  # a model with conv layers describes them
        return f"gated short convolution ({facts.short_conv.conv_kernel_dim} taps)"
    if kind in (CSA, HCA):
        assert facts.compressed is not None  # a model with compressed layers describes them
        rate = facts.compressed.csa_rate if kind == CSA else facts.compressed.hca_rate
        label = "compressed sparse" if kind == CSA else "heavily compressed"
        top = f", {top}" if kind == CSA else ""
        # Each compressed layer also attends to the last tokens, uncompressed: say the
        # window here, since a model may have no sliding-only layer to say it (V4-Pro).
        window = f", window {format_number(local.window)}" if isinstance(local, Sliding) else ""
        return f"{label} (1 entry per {rate} tokens{top}{window})"
    return "full"


def _indexed_label(indexer: Indexer) -> str:
    """What an indexed layer reads: single keys (DSA), blocks, or QSA's budget."""
    if indexer.selects == "blocks":
        assert indexer.block_size is not None  # "blocks" says it is set
        blocks = f"top {format_number(indexer.top_k)} blocks of {indexer.block_size} keys"
        return f"block top-k ({blocks})"
    if indexer.selects == "compressed blocks":
        budget = format_number(indexer.top_k)
        return f"QSA (budget {budget} tokens, blocks of {indexer.compress_ratio})"
    return f"DeepSeek Sparse Attention (top {format_number(indexer.top_k)})"


def _layer_mix(facts: ModelFacts) -> str:
    kinds = facts.layer_types
    counts = {kind: kinds.count(kind) for kind in dict.fromkeys(kinds)}
    if len(counts) == 1:
        return f"all {kind_name(facts, kinds[0])}"
    parts = [f"{count} {kind_name(facts, kind)}" for kind, count in counts.items()]
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def _heads(facts: ModelFacts) -> str:
    if facts.latent is not None:
        lat = facts.latent
        return (
            f"MLA, {facts.num_heads} heads; each token caches a latent of "
            f"{lat.kv_lora_rank} and a rotary key of {lat.qk_rope_head_dim}"
        )
    if facts.attention == "MHA":
        text = f"MHA, {facts.num_heads} heads of {facts.head_dim}"
    else:
        text = (
            f"{facts.attention}, {facts.num_heads} query heads and {facts.num_kv_heads} "
            f"key/value head{'s' if facts.num_kv_heads > 1 else ''} of {facts.head_dim}"
        )
    if facts.value_head_dim is not None:
        text += f" (values of {facts.value_head_dim})"
    own = facts.local.num_kv_heads if isinstance(facts.local, Sliding) else None
    if own is not None:
        text += f"; sliding layers: {own} key/value heads"
    if facts.compressed is not None:
        text += ", the key serving as the value"
    wide = facts.global_layers
    if wide is not None:
        extra = []
        if wide.num_kv_heads:
            extra.append(f"{wide.num_kv_heads} key/value heads")
        if wide.head_dim:
            extra.append(f"heads of {wide.head_dim}")
        if wide.k_eq_v:
            extra.append("keys as values")
        text += "; full layers: " + ", ".join(extra)
    if facts.num_kv_shared_layers:
        text += (
            f"; the last {facts.num_kv_shared_layers} layers reuse earlier layers' keys and values"
        )
    return text


def _positions(facts: ModelFacts) -> str:
    if facts.positions == "learned":
        return "learned positions"
    if facts.positions == "sinusoidal":
        return "sinusoidal positions (a fixed table added to the embeddings)"
    if facts.positions == "alibi":
        return "ALiBi (a bias on the scores, no position embedding)"
    if facts.positions == "none":
        return "no position encoding (NoPE)"
    rope = facts.rope
    assert rope is not None  # positions == "rope"
    text = f"RoPE (base {format_number(rope.theta)}"
    if rope.local_theta is not None and rope.local_theta != rope.theta:
        local = "local" if facts.bidirectional else "sliding"
        text += f"; {format_number(rope.local_theta)} on {local} layers"
    text += ")"
    if rope.partial_rotary_factor != 1.0:
        text += f" on {rope.partial_rotary_factor * 100:g}% of each head"  # 12.5%, not 12%
    scaling = rope.scaling or {}
    kind = scaling.get("rope_type")
    names = {
        "yarn": "YaRN",
        "llama3": "Llama 3 scaling",
        "linear": "linear scaling",
        "dynamic": "dynamic NTK",
        "longrope": "LongRoPE",
    }
    if kind in names:
        text += f", {names[kind]} ×{format_number(scaling['factor'])}"
        original = scaling.get("original_max_position_embeddings")
        if original:
            text += f" from {format_number(original)}"
        if rope.local_theta is not None:  # the sliding layers keep a plain RoPE
            text += " on full layers"
    if kind == "proportional":
        share = scaling.get("partial_rotary_factor", 1.0)
        text += f", proportional on full layers ({share:.0%} of the pairs turn)"
    if rope.nope_every is not None:
        text += f"; no RoPE every {rope.nope_every}th layer (NoPE)"
    compressed = facts.compressed
    if compressed is not None and compressed.rope_theta is not None:
        # DeepSeek-V4: all its CSA and HCA layers rotate (queries, window, entries)
        text += f" in sliding-only layers, base {format_number(compressed.rope_theta)}"
        own = compressed.rope_scaling or {}
        if own.get("rope_type") in names:
            text += f" with {names[own['rope_type']]} ×{format_number(own['factor'])}"
            original = own.get("original_max_position_embeddings")
            if original:
                text += f" from {format_number(original)}"
        text += " in compressed layers"
    return text


def _parts(facts: ModelFacts) -> list[str]:
    notes = []
    norms = {
        "head": "QK-norm per head",
        "projection": "QK-norm over the projection",
        "l2": "QK-norm without scale, after RoPE",
        "head_after_rope": "QK-norm per head, after RoPE",
        "layer_norm": "QK-norm, a LayerNorm per head",
        "unscaled_query_head": "QK-norm per head without scale on the queries",
    }
    parts, scores = facts.parts, facts.scores
    if parts is not None:
        if parts.qk_norm:
            notes.append(norms[parts.qk_norm])
        if parts.value_norm:
            notes.append("value norm")
        if parts.output_gate:
            notes.append("output gate")
        if parts.head_gate:
            notes.append("an output gate per head")
        if parts.value_scale is not None:
            notes.append(f"values scaled by {format_number(parts.value_scale)}")
        if parts.clip_qkv is not None:
            notes.append(f"queries, keys and values clamped to ±{format_number(parts.clip_qkv)}")
    if isinstance(facts.local, Sliding) and facts.local.sinks:
        notes.append("sinks on sliding layers")
    if scores is not None:
        if scores.sinks:
            notes.append("sinks")
        if scores.query_pre_attn_scalar is not None:
            notes.append(f"scores scaled by {scores.query_pre_attn_scalar}^-0.5")
        if scores.scale is not None:
            notes.append(f"score scale {format_number(scores.scale)}")
        if scores.softcap is not None:
            notes.append(f"softcapping at {format_number(scores.softcap)}")
    if facts.temperature_tuning is not None:
        notes.append("temperature tuning on NoPE layers")
    return notes


def recipe(facts: ModelFacts) -> str:
    """A short summary of a model's attention, a mechanism to a clause, each named as
    the chapters name it, ending with what its cache costs (in 16-bit numbers, the
    states in float32).

    Examples
    --------
    >>> from attention import MODELS
    >>> print(recipe(MODELS["gpt-oss-20b"]))
    gpt-oss-20b: 24 layers, 12 sliding (window 128) and 12 full; GQA, 64 query heads and 8 key/value heads of 64; RoPE (base 150,000), YaRN ×32 from 4,096; sinks; cache per token: 24 KiB growing, 3 MiB capped
    """  # noqa: E501
    clauses = [f"{facts.name}: {facts.layers} layers, {_layer_mix(facts)}"]
    if set(facts.layer_types) == {MAMBA} and facts.mamba is not None:  # Mamba-2 alone
        mamba = facts.mamba
        clauses.append(
            f"no attention: the SSD's {mamba.num_heads} heads of "
            f"{mamba.inner_size // (mamba.num_heads or 1)}, B and C in {mamba.n_groups} groups"
        )
    else:
        clauses += [_heads(facts), _positions(facts)]
    parts = _parts(facts)
    if parts:
        clauses.append(", ".join(parts))
    if facts.bidirectional:
        clauses.append("an encoder: attends both ways, no cache")
        return "; ".join(clauses)
    if facts.cross is not None:
        clauses.append(_cross(facts))
    growing, capped, fixed = cache_profile(facts)
    cost = f"cache per token: {format_bytes(growing)} growing"
    if capped:
        cost += f", {format_bytes(capped)} capped"
    if fixed:
        cost += f", {format_bytes(fixed)} of fixed state"
    clauses.append(cost)
    return "; ".join(clauses)


def _cross(facts: ModelFacts) -> str:
    cross = facts.cross
    assert cross is not None  # called for a model with cross-attention
    where = "every layer" if cross.layers is None else f"{len(cross.layers)} layers"
    if cross.qk_norm == "head":
        where += " (QK-norm per head)"
    if cross.context_tokens is None:
        return f"cross-attention in {where}, to a context of the input's length"
    held = cross_cache_bytes(facts)
    assert held is not None  # None only without context_tokens, returned above
    size = format_bytes(held)
    return (
        f"cross-attention in {where} to {format_number(cross.context_tokens)} encoded tokens "
        f"({size} of their keys and values, cached once)"
    )


# -- the layer strip ---------------------------------------------------------------------

#: One letter per layer kind in :func:`.layer_strip`; lower case: a layer reusing another's
#: keys and values.
STRIP_LETTERS = {
    FULL: "F",
    SLIDING: "S",
    CHUNKED: "C",
    LINEAR: "L",
    INDEXED: "I",
    MAMBA: "M",
    HYBRID: "H",
    NO_MIXER: "-",
    CSA: "K",
    HCA: "X",
    CROSS: "E",
    CONV: "V",
}


def layer_strip(facts: ModelFacts, width: int = 64) -> str:
    """The layers as a strip of letters, ``width`` a line, then a legend.

    Examples
    --------
    >>> from attention import MODELS
    >>> print(layer_strip(MODELS["Gemma 4 E2B"]))
    SSSSFSSSSFSSSSFssssfssssfssssfssssf
    S sliding (window 512), F full; lower case: reuses earlier keys and values
    """
    letters = "".join(
        STRIP_LETTERS[kind].lower() if shared else STRIP_LETTERS[kind]
        for kind, shared in zip(facts.layer_types, facts.kv_shared, strict=True)
    )
    lines = [letters[i : i + width] for i in range(0, len(letters), width)]
    legend = ", ".join(
        f"{STRIP_LETTERS[kind]} {kind_name(facts, kind)}"
        for kind in dict.fromkeys(facts.layer_types)
    )
    if any(facts.kv_shared):
        legend += "; lower case: reuses earlier keys and values"
    return "\n".join([*lines, legend])
