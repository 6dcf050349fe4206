"""Part IV's costs: decode steps against context length, and the recurrences' prefill.

Five measurements, each in paired alternating rounds (``benchmarks/harness.py``),
float32, on 2 threads by default.

**(a) Per-token decode latency** at 1k, 4k, 16k and 64k tokens of context
(``--contexts``) for one layer of each kind, at Qwen3-Next 80B-A3B's sizes
(``attention.MODELS["Qwen3-Next 80B-A3B"]``: ``hidden_size`` 2048, 16 query heads,
2 key/value heads, ``head_dim`` 256, RoPE base 1e7 on a quarter of each head, QK-norm
and the output gate):

* ``full``: :class:`~attention.GroupedQueryAttention` with a :class:`~attention.KVCache`
  holding all ``N`` tokens (cropped back to ``N`` after each step);
* ``window``: the same layer and weights with a sliding window of ``--window`` tokens
  (1024 by default: Gemma 3's ``sliding_window``, ``MODELS["Gemma 3 27B"]``; Qwen3-Next
  has no windowed layers), its cache rolling at ``window - 1`` tokens;
* ``deltanet``: :class:`~attention.GatedDeltaNet` with its
  :class:`~attention.GatedDeltaNetCache`, at Qwen3-Next's linear-attention sizes from
  the same ``MODELS`` entry (16 key heads, 32 value heads, 128 and 128 dimensions, 4
  convolution taps). Its state does not depend on ``N``: each
  step gets a cache holding the same states (``GatedDeltaNetCache.update``), so every
  step starts alike;
* ``mamba2``: :class:`~attention.Mamba2` with its :class:`~attention.Mamba2Cache`, at
  Nemotron 3 Nano 30B's Mamba-2 sizes (``attention.MODELS["Nemotron 3 Nano 30B"]``: 64
  heads of 64, a state of 128, 8 groups, 4 convolution taps), on the same ``d_in``.
  Its two states do not depend on ``N`` either, and each step gets a cache holding the
  same states;
* ``sparse``: the full layer's projections and cache, a
  :class:`~attention.LightningIndexer` with DeepSeek-V3.2's indexer sizes (64 heads of
  128, RoPE on 64; ``MODELS["DeepSeek-V3.2"]``) scoring every cached key from its
  own key cache, then :func:`~attention.topk_sparse_attention` over the ``--top-k``
  best keys (2048, DeepSeek-V3.2's ``index_topk``), the output gate and ``out_proj``.
  Qwen3-Next has no query latent, so the indexer reads its queries from the layer's
  input (``q_lora_rank = hidden_size``). One query gathers its ``top_k`` keys and
  attends to them alone (O(top_k)), but the indexer still scores all ``N`` keys and
  picks the best (O(N)), so this step grows, more slowly than the full one where the
  indexer is small. Left out, with a note, where the package has no
  ``topk_sparse_attention``;
* ``csa`` and ``hca``: DeepSeek-V4-Flash's compressed layers
  (``attention.layer_for(MODELS["DeepSeek-V4-Flash"], i)``, a
  :class:`~attention.CompressedAttention` each, at the model's own sizes unless the
  ``--v4-*`` options change them: ``hidden_size`` 4096, 64 query heads of 512 over one
  key/value vector per token, a query latent of 1024, 8 output groups of 1024, a
  window of 128, RoPE on 64 numbers). ``csa`` makes one entry per 4 tokens, over
  overlapping groups, and its indexer (64 heads of 128) picks 512 of them for each
  query; ``hca`` makes one entry per 128 tokens and reads them all. Their caches hold
  the window's 127 keys, the entries and the waiting tokens: built with
  :meth:`~attention.CompressedCache.holding` from random tensors of the shapes a
  prefill of ``N`` tokens leaves (a prefill at 64k tokens through these layers is too
  slow to repeat), a fresh cache for every step, over the same tensors. ``N`` being a
  multiple of both rates, the timed step completes no entry: the step of three tokens
  in four (CSA) and of 127 in 128 (HCA).

The caches are filled with random keys and values (``KVCache.update`` under
``torch.no_grad``), the Gated DeltaNet cache with random states, not by a prefill
through the layers: what a step costs depends on the sizes, not on the numbers.
Each round times one step of every (context, layer) pair, the order reversed every
other round; the first ``--warmup`` rounds are dropped. The growth of a layer's step is
taken round by round, its step at the longest context over its step at the shortest,
and each run's median reported. **Target:** every run's median growth of the Gated
DeltaNet step and of the Mamba-2 step at most 1.2 (flat), and of the full-attention
step above 1.2 (it grows).
Untimed checks: each cache's bytes equal their formula (the compressed layers': the
window's keys, and the rest as ``attention.models.layer_cache_bytes`` counts it); the
windowed step on its rolled cache equals the same step on an unrolled copy of the full
cache (masked), and the full step where the window covers the context; the sparse
step with ``top_k`` above the context equals the full step; two compressed steps on two
fresh caches are equal (every step starts alike, the tensors given are not written
into).

**(b) Prefill** of ``--prefill-tokens`` (4096) tokens through the delta rule alone at
Gated DeltaNet's sizes: our chunked :func:`~attention.gated_delta_rule` against
``transformers``' ``torch_chunk_gated_delta_rule`` (chunk 64 both, q and k
L2-normalised in the kernel, the final state returned). Both get the same tensors,
the queries and keys already repeated to the 32 value heads, as
``Qwen3NextGatedDeltaNet`` passes them. Each of ``--prefill-rounds`` (21) rounds times
one call of each, back to back, the order reversed every other round, and takes the
ratio ours / transformers' of that round: a busy machine slows both calls of a round
alike, and the median over the rounds leaves out the rounds where it did not.
**Target:** every run's median ratio at most 1.0. Checked, untimed: the outputs agree
(1e-4).

**(c) Chunked against recurrent**: the same chunked call against ``chunk_size=None``
(token by token), in ``--recurrent-rounds`` (5) rounds of their own, paired and
alternated as in (b). **Target:** every run's median ratio chunked / recurrent below
1.0. The recurrence's output is checked from its first timed call; an untimed call of
each chunked form (whose outputs are checked) warms them up before the rounds.

**(d) Mamba-2's prefill** of the same ``--prefill-tokens`` through the SSD alone, at
the ``mamba2`` row's sizes: our chunked :func:`~attention.mamba2_ssd` against
``transformers``' ``mamba2_chunk_scan`` (``Mamba2Mixer``'s pure-PyTorch path; chunk
``--mamba-chunk-size``, 128 as Nemotron 3 Nano's ``chunk_size``, both; the skip ``D``
and the final state included), paired as in (b). **Target:** every run's median ratio
at most 1.0. **(e)** The same chunked call against the scan (``chunk_size=None``), as
(c). **Target:** below 1.0. Both checked against ``transformers``' output (1e-4,
relative to its largest entry: the SSD's outputs are sums of thousands of terms).

The decode measurement (fresh caches) is repeated ``--repeats`` times (3 by default, 1
with ``--quick``), the prefill ones ``--prefill-repeats`` times (1). ``--parts`` runs
some of the five measurements (``--parts b c d e``: the prefill alone). A default run
takes about 5 minutes on 2 cores. Timings on a shared machine are noisy: report the
machine (the JSON has the CPU's model name, torch's and transformers' versions, and
the load average before and after the run) and repeat the command.
A missed target is reported, not an error: this is a measurement.

Usage::

    python benchmarks/part4.py                  # the full run, JSON on stdout
    python benchmarks/part4.py --quick          # fewer rounds, one repeat
    python benchmarks/part4.py --parts b c      # the delta rule's prefill alone
    python benchmarks/part4.py --parts d e      # Mamba-2's SSD prefill alone
    python benchmarks/part4.py --contexts 1024 4096 --prefill-tokens 1024
    python benchmarks/part4.py --out part4.json
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import statistics
from pathlib import Path

import harness
import torch
import transformers
from harness import pooled, quartiles, ratios, say
from torch.nn import functional as F
from transformers.models.mamba2.modeling_mamba2 import mamba2_chunk_scan
from transformers.models.qwen3_next.modeling_qwen3_next import torch_chunk_gated_delta_rule

import attention
from attention import (
    MODELS,
    CompressedCache,
    CompressorState,
    GatedDeltaNet,
    GatedDeltaNetCache,
    KVCache,
    Mamba2,
    Mamba2Cache,
    Rotary,
    gated_delta_rule,
    kv_cache_bytes_per_token,
    mamba2_ssd,
)
from attention.models import Sizes
from attention.models.facts import Mamba

MODEL = MODELS["Qwen3-Next 80B-A3B"]
WINDOW_MODEL = MODELS["Gemma 3 27B"]
INDEXER_MODEL = MODELS["DeepSeek-V3.2"]
MAMBA_MODEL = MODELS["Nemotron 3 Nano 30B"]
COMPRESSED_MODEL = MODELS["DeepSeek-V4-Flash"]
#: The compressed rows, and the kind of DeepSeek-V4-Flash's layer each one times.
COMPRESSED_KINDS = {"csa": "compressed_sparse_attention", "hca": "heavily_compressed_attention"}
#: The decode rows' layers; ``sparse`` only where the package has topk_sparse_attention.
SIDES = ("full", "window", "deltanet", "mamba2", "sparse", *COMPRESSED_KINDS)
#: The measurements: (a) decode steps, (b) the delta rule's prefill against
#: transformers, (c) its chunked form against its recurrence, (d) and (e) the same for
#: Mamba-2's SSD.
PARTS = ("a", "b", "c", "d", "e")
#: A step is flat when its growth (longest context / shortest) is at most this.
FLAT = 1.2
SPARSE_MISSING = (
    "not yet: attention.topk_sparse_attention is not in this checkout, so the top-k sparse "
    "row is left out"
)


def has_sparse() -> bool:
    """Whether the package has the sparse attention pieces the ``sparse`` row needs."""
    return hasattr(attention, "topk_sparse_attention") and hasattr(attention, "LightningIndexer")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    linear, indexer = MODEL.local, INDEXER_MODEL.indexer
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a short run: 6 decode rounds, 2 warm-up, 1 repeat; 5 and 2 prefill rounds",
    )
    parser.add_argument(
        "--parts",
        nargs="+",
        choices=PARTS,
        default=list(PARTS),
        help="which measurements: a (decode), b (prefill against transformers), "
        "c (chunked against recurrent), d and e (the same for Mamba-2's SSD); default all",
    )
    parser.add_argument(
        "--contexts", type=int, nargs="+", default=[1024, 4096, 16384, 65536], help="tokens"
    )
    parser.add_argument("--rounds", type=int, default=30, help="timed decode rounds per run")
    parser.add_argument("--warmup", type=int, default=3, help="rounds dropped before timing")
    parser.add_argument(
        "--repeats", type=int, help="runs of every measurement (default 3; quick: 1)"
    )
    parser.add_argument("--prefill-tokens", type=int, default=4096)
    parser.add_argument("--prefill-rounds", type=int, default=21, help="timed rounds of (b)")
    parser.add_argument("--recurrent-rounds", type=int, default=5, help="timed rounds of (c)")
    parser.add_argument("--prefill-repeats", type=int, default=1, help="runs of (b) and (c)")
    parser.add_argument("--chunk-size", type=int, default=64, help="the chunked forms' chunk")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument(
        "--window", type=int, default=WINDOW_MODEL.local.window, help="the window row's window"
    )
    parser.add_argument("--top-k", type=int, default=indexer.top_k, help="sparse row's k")
    parser.add_argument("--d-in", type=int, default=MODEL.hidden_size)
    parser.add_argument("--num-heads", type=int, default=MODEL.num_heads)
    parser.add_argument("--num-kv-heads", type=int, default=MODEL.num_kv_heads)
    parser.add_argument("--head-dim", type=int, default=MODEL.head_dim)
    parser.add_argument("--linear-key-heads", type=int, default=linear.num_key_heads)
    parser.add_argument("--linear-value-heads", type=int, default=linear.num_value_heads)
    parser.add_argument("--linear-key-dim", type=int, default=linear.key_head_dim)
    parser.add_argument("--linear-value-dim", type=int, default=linear.value_head_dim)
    parser.add_argument("--conv-size", type=int, default=linear.conv_kernel_dim)
    mamba = MAMBA_MODEL.mamba
    assert mamba is not None and mamba.num_heads is not None  # a Mamba-2 entry
    parser.add_argument("--mamba-heads", type=int, default=mamba.num_heads)
    parser.add_argument("--mamba-head-dim", type=int, default=mamba.inner_size // mamba.num_heads)
    parser.add_argument("--mamba-state", type=int, default=mamba.state_size)
    parser.add_argument("--mamba-groups", type=int, default=mamba.n_groups)
    parser.add_argument("--mamba-conv", type=int, default=mamba.conv_kernel_dim)
    parser.add_argument("--mamba-chunk-size", type=int, default=mamba.chunk_size)
    parser.add_argument("--index-heads", type=int, default=indexer.num_heads)
    parser.add_argument("--index-dim", type=int, default=indexer.head_dim)
    parser.add_argument("--index-rope-dim", type=int, default=INDEXER_MODEL.latent.qk_rope_head_dim)
    v4, compressed = COMPRESSED_MODEL, COMPRESSED_MODEL.compressed
    assert compressed is not None and v4.indexer is not None and v4.rope is not None
    assert v4.head_dim is not None and isinstance(v4.local, attention.models.Sliding)
    v4_sizes = {
        "--v4-d-in": v4.hidden_size,
        "--v4-heads": v4.num_heads,
        "--v4-head-dim": v4.head_dim,
        "--v4-rope-dim": int(v4.head_dim * v4.rope.partial_rotary_factor),
        "--v4-q-rank": compressed.q_lora_rank,
        "--v4-o-groups": compressed.o_groups,
        "--v4-o-rank": compressed.o_lora_rank,
        "--v4-window": v4.local.window,
        "--v4-index-heads": v4.indexer.num_heads,
        "--v4-index-dim": v4.indexer.head_dim,
        "--v4-top-k": v4.indexer.top_k,
        "--csa-rate": compressed.csa_rate,
        "--hca-rate": compressed.hca_rate,
    }
    for option, default in v4_sizes.items():
        parser.add_argument(
            option, type=int, default=default, help=f"the csa and hca rows (V4-Flash: {default})"
        )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="also write the JSON results here")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.warmup = 6, 2
        args.prefill_rounds, args.recurrent_rounds = 5, 2
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    counts = (args.repeats, args.rounds, args.prefill_rounds, args.recurrent_rounds)
    if min(*counts, args.prefill_repeats) < 1:
        parser.error(
            "--repeats, --rounds, --prefill-rounds, --recurrent-rounds, --prefill-repeats "
            "must be >= 1"
        )
    if args.warmup < 0:
        parser.error("--warmup must be at least 0")
    if min(*args.contexts, args.window, args.top_k, args.prefill_tokens, args.chunk_size) < 1:
        parser.error("every context, --window, --top-k, --prefill-tokens, --chunk-size >= 1")
    mamba_sizes = (args.mamba_heads, args.mamba_head_dim, args.mamba_state, args.mamba_groups)
    if min(*mamba_sizes, args.mamba_conv, args.mamba_chunk_size) < 1:
        parser.error("every --mamba-* size must be >= 1")
    if args.mamba_heads % args.mamba_groups:
        parser.error("--mamba-heads must be a multiple of --mamba-groups")
    if min(getattr(args, option[2:].replace("-", "_")) for option in v4_sizes) < 1:
        parser.error("every --v4-* size, --csa-rate and --hca-rate must be >= 1")
    args.contexts = sorted(set(args.contexts))
    args.parts = sorted(set(args.parts))
    return args


# ---------------------------------------------------------------------------------------
# (a) Decode steps
# ---------------------------------------------------------------------------------------


def build_layers(args: argparse.Namespace) -> dict[str, torch.nn.Module]:
    """Every decode row's layers, float32, eval mode; ``full`` and ``window`` share weights."""
    torch.manual_seed(args.seed)
    steps = args.warmup + args.rounds + 2  # a window's positions go on counting
    # The model's full-attention layer (QK-norm, gate, partial RoPE) at the sizes asked;
    # its output is d_in wide, as the model's (hidden_size)
    sizes = Sizes(
        hidden_size=args.d_in,
        num_heads=args.num_heads,
        num_kv_heads=args.num_kv_heads,
        head_dim=args.head_dim,
        max_position_embeddings=max(args.contexts) + steps,
    )
    full_index = MODEL.layer_types.index("full_attention")
    full = attention.layer_for(MODEL, full_index, sizes=sizes).eval()
    window = copy.deepcopy(full)  # the same layer, sliding: the window is its own
    window.window = args.window
    window.load_state_dict(full.state_dict())
    layers = {
        "full": full,
        "window": window,
        "deltanet": GatedDeltaNet(
            args.d_in,
            args.linear_key_heads,
            args.linear_value_heads,
            args.linear_key_dim,
            args.linear_value_dim,
            conv_size=args.conv_size,
            chunk_size=args.chunk_size,
        ).eval(),
        "mamba2": Mamba2(
            args.d_in,
            args.mamba_heads,
            args.mamba_head_dim,
            args.mamba_state,
            n_groups=args.mamba_groups,
            conv_size=args.mamba_conv,
            chunk_size=args.mamba_chunk_size,
        ).eval(),
    }
    layers |= compressed_layers(args)
    if has_sparse():
        layers["indexer"] = attention.LightningIndexer(
            args.d_in,
            args.d_in,  # Qwen3-Next has no query latent: the indexer reads the input
            num_heads=args.index_heads,
            head_dim=args.index_dim,
            qk_rope_head_dim=args.index_rope_dim,
            rotary=Rotary(args.index_rope_dim, MODEL.rope.theta),
        ).eval()
    return layers


def compressed_layers(args: argparse.Namespace) -> dict[str, torch.nn.Module]:
    """DeepSeek-V4-Flash's CSA and HCA layers (``layer_for``), at the ``--v4-*`` sizes."""
    model = COMPRESSED_MODEL
    assert model.compressed is not None  # a DeepSeek-V4 entry
    rates = {"csa_rate": args.csa_rate, "hca_rate": args.hca_rate}
    model = dataclasses.replace(model, compressed=dataclasses.replace(model.compressed, **rates))
    sizes = Sizes(
        hidden_size=args.v4_d_in,
        num_heads=args.v4_heads,
        head_dim=args.v4_head_dim,
        qk_rope_head_dim=args.v4_rope_dim,
        q_lora_rank=args.v4_q_rank,
        o_groups=args.v4_o_groups,
        o_lora_rank=args.v4_o_rank,
        sliding_window=args.v4_window,
        index_n_heads=args.v4_index_heads,
        index_head_dim=args.v4_index_dim,
        index_topk=args.v4_top_k,
    )
    return {
        side: attention.layer_for(model, model.layer_types.index(kind), sizes=sizes).eval()
        for side, kind in COMPRESSED_KINDS.items()
    }


def compressed_numbers(args: argparse.Namespace, side: str, num_cached: int) -> int:
    """Numbers a compressed layer's cache holds after ``num_cached`` tokens: the window's
    keys (``window - 1``, one vector a token), and per compressor (the indexer's too in
    ``csa``) its entries, the waiting tokens' vectors and gates (twice as wide where
    groups overlap) and, once a group is complete, the overlap's vectors and gates."""
    csa = side == "csa"
    rate = args.csa_rate if csa else args.hca_rate
    widths = (args.v4_head_dim, args.v4_index_dim) if csa else (args.v4_head_dim,)
    entries, waiting = divmod(num_cached, rate)
    wide = 2 if csa else 1
    overlap = 2 * rate if csa and entries else 0
    window = min(num_cached, args.v4_window - 1) * args.v4_head_dim
    rest = sum(d * (entries + 2 * waiting * wide + overlap) for d in widths)
    return window + rest


def compressed_seed(
    args: argparse.Namespace, side: str, num_cached: int, generator: torch.Generator
) -> dict:
    """Random tensors of the shapes a prefill of ``num_cached`` tokens leaves in a
    compressed layer's cache: ``CompressedCache.holding``'s arguments, its states as
    dictionaries, so that every step makes states of its own over the same tensors."""
    csa = side == "csa"
    rate = args.csa_rate if csa else args.hca_rate
    entries, waiting = divmod(num_cached, rate)

    def state(dim: int) -> dict[str, torch.Tensor]:
        width = 2 * dim if csa else dim
        parts = {"entries": torch.randn(1, entries, dim, generator=generator)}
        parts["waiting_kv"] = torch.randn(1, waiting, width, generator=generator)
        parts["waiting_gate"] = torch.randn(1, waiting, width, generator=generator)
        if csa and entries:
            parts["overlap_kv"] = torch.randn(1, rate, dim, generator=generator)
            parts["overlap_gate"] = torch.randn(1, rate, dim, generator=generator)
        return parts

    held = min(num_cached, args.v4_window - 1)
    return {
        "window_keys": torch.randn(1, held, args.v4_head_dim, generator=generator),
        "window": args.v4_window,
        "seen_tokens": num_cached,
        "rate": rate,
        "compressor": state(args.v4_head_dim),
        "indexer": state(args.v4_index_dim) if csa else None,
    }


def compressed_cache(seed: dict) -> CompressedCache:
    """A fresh cache over ``seed``'s tensors (not copied: a step never writes into them)."""
    states = {
        name: None if seed[name] is None else CompressorState(**seed[name])
        for name in ("compressor", "indexer")
    }
    return CompressedCache.holding(
        seed["window_keys"],
        window=seed["window"],
        seen_tokens=seed["seen_tokens"],
        rate=seed["rate"],
        **states,
    )


def sparse_step(full, indexer, x, cache, index_cache, top_k: int) -> torch.Tensor:
    """One token through the full layer's projections, the indexer and top-k attention."""
    queries, keys, values, _ = full._project(x, cache)  # appends to cache
    scores = indexer(x, x, cache=index_cache)  # (1, 1, num_keys), appends to index_cache
    context = attention.topk_sparse_attention(queries, keys, values, scores, top_k)
    context = context.transpose(1, 2).reshape(x.shape[0], 1, -1)  # heads * head_dim
    if full.W_gate is not None:
        context = context * torch.sigmoid(full.W_gate(x))
    return full.out_proj(context)


def decode_steps(args, layers, num_cached: int) -> dict:
    """One context length: each layer's step on caches that hold ``num_cached`` tokens."""
    generator = torch.Generator().manual_seed(args.seed + num_cached)
    full, window, deltanet = layers["full"], layers["window"], layers["deltanet"]
    shape = (1, args.num_kv_heads, num_cached, args.head_dim)
    keys, values = torch.randn(2, *shape, generator=generator)
    x = torch.randn(1, 1, args.d_in, generator=generator)  # the new token
    full_cache, rolling = KVCache(), KVCache(window=args.window)
    full_cache.update(keys, values)  # copies into its own storage
    rolling.update(keys, values)  # keeps the last window - 1

    def full_step() -> torch.Tensor:
        out = full(x, cache=full_cache)
        full_cache.crop(num_cached)
        return out

    def window_step() -> torch.Tensor:
        return window(x, cache=rolling)  # rolls: the cache stays at window - 1 tokens

    channels = deltanet.channels
    conv_state = torch.randn(1, channels, args.conv_size - 1, generator=generator)
    recurrent = 0.1 * torch.randn(
        1, args.linear_value_heads, args.linear_key_dim, args.linear_value_dim, generator=generator
    )

    def deltanet_cache() -> GatedDeltaNetCache:
        """A cache that has seen ``num_cached`` tokens: these two states."""
        cache = GatedDeltaNetCache()
        cache.update(conv_state, recurrent, num_cached)
        return cache

    def deltanet_step() -> torch.Tensor:
        return deltanet(x, deltanet_cache())

    mamba2 = layers["mamba2"]
    mamba_conv = torch.randn(1, mamba2.channels, args.mamba_conv, generator=generator)
    ssm = 0.1 * torch.randn(
        1, args.mamba_heads, args.mamba_head_dim, args.mamba_state, generator=generator
    )

    def mamba2_cache() -> Mamba2Cache:
        """A cache that has seen ``num_cached`` tokens: these two states."""
        cache = Mamba2Cache()
        cache.update(mamba_conv, ssm, num_cached)
        return cache

    def mamba2_step() -> torch.Tensor:
        return mamba2(x, mamba2_cache())

    steps = {
        "full": full_step,
        "window": window_step,
        "deltanet": deltanet_step,
        "mamba2": mamba2_step,
    }
    compressed_x = torch.randn(1, 1, args.v4_d_in, generator=generator)
    seeds = {side: compressed_seed(args, side, num_cached, generator) for side in COMPRESSED_KINDS}

    def compressed_step(side: str):
        layer, seed = layers[side], seeds[side]

        def step() -> torch.Tensor:  # the cache's making is timed too: a few hundred numbers
            return layer(compressed_x, cache=compressed_cache(seed))

        return step

    per_token = kv_cache_bytes_per_token(1, args.num_kv_heads, args.head_dim, torch.float32)
    state_bytes = 4 * (
        channels * (args.conv_size - 1)
        + args.linear_value_heads * args.linear_key_dim * args.linear_value_dim
    )
    state, mamba_state = deltanet_cache(), mamba2_cache()
    deltanet(x, state)  # a step, then the states' bytes against their formula
    mamba2(x, mamba_state)
    # Mamba-2's states as the atlas bills them (Mamba.state_numbers), in float32
    mamba_facts = Mamba(
        mixer="Mamba-2",
        inner_size=args.mamba_heads * args.mamba_head_dim,
        state_size=args.mamba_state,
        conv_kernel_dim=args.mamba_conv,
        num_heads=args.mamba_heads,
        n_groups=args.mamba_groups,
    )
    memory = {
        "full": {"bytes": full_cache.nbytes, "formula": per_token * num_cached},
        "window": {
            "bytes": rolling.nbytes,
            "formula": per_token * min(num_cached, args.window - 1),
        },
        "deltanet": {"bytes": state.nbytes, "formula": state_bytes},
        "mamba2": {"bytes": mamba_state.nbytes, "formula": 4 * sum(mamba_facts.state_numbers())},
    }
    with torch.no_grad():
        # One step of the rolled cache against the same step masked over the whole cache.
        rolled = window_step()
        checks = {
            "window_rolled_equals_masked": (rolled - window(x, cache=_copy(full_cache)))
            .abs()
            .max()
            .item()
        }
        if num_cached < args.window:  # the window covers the whole context: the same step
            checks["window_equals_full"] = (
                (window(x, cache=_copy(full_cache)) - full(x, cache=_copy(full_cache)))
                .abs()
                .max()
                .item()
            )
        if has_sparse():
            indexer, index_cache = layers["indexer"], KVCache()
            index_keys = torch.randn(1, num_cached, args.index_dim, generator=generator)
            index_cache.update(index_keys, index_keys[..., :0])

            def step() -> torch.Tensor:
                out = sparse_step(full, indexer, x, full_cache, index_cache, args.top_k)
                full_cache.crop(num_cached)
                index_cache.crop(num_cached)
                return out

            steps["sparse"] = step
            memory["sparse"] = {
                "bytes": full_cache.nbytes + index_cache.nbytes,
                "formula": (per_token + 4 * args.index_dim) * num_cached,
            }
            if args.top_k > num_cached:  # every key is picked: the full step
                sparse = sparse_step(full, indexer, x, full_cache, index_cache, args.top_k)
                full_cache.crop(num_cached)
                index_cache.crop(num_cached)
                checks["sparse_equals_full"] = (sparse - full_step()).abs().max().item()
        for side in COMPRESSED_KINDS:
            steps[side] = compressed_step(side)
            # Two steps on two fresh caches: every timed step starts alike
            first, second = steps[side](), steps[side]()
            checks[f"{side}_steps_alike"] = (first - second).abs().max().item()
            # The formula's bytes are float32 numbers
            memory[side] = {
                "bytes": compressed_cache(seeds[side]).nbytes,
                "formula": 4 * compressed_numbers(args, side, num_cached),
            }
    for entry in memory.values():
        entry["equal"] = entry["bytes"] == entry["formula"]
    return {"context": num_cached, "steps": steps, "memory": memory, "checks": checks}


def _copy(cache: KVCache) -> KVCache:
    clone = KVCache()
    clone.update(cache.keys.clone(), cache.values.clone())
    return clone


def measure_decode(args, layers) -> dict:
    """One run: rounds that time every (context, layer) step, the order reversed every
    other round, so that the machine's drift hits every context and layer alike."""
    with torch.no_grad():
        rows = [decode_steps(args, layers, n) for n in args.contexts]
        sides = list(rows[0]["steps"])
        steps = {(row["context"], side): row["steps"][side] for row in rows for side in sides}
        times = harness.paired_rounds(steps, args.rounds, warmup=args.warmup).times
    shortest, longest = args.contexts[0], args.contexts[-1]
    growth = {side: ratios(times[longest, side], times[shortest, side]) for side in sides}
    for row in rows:
        del row["steps"]
        row["times_s"] = {side: times[row["context"], side] for side in sides}
    return {"rows": rows, "growth": growth}


def summarize_decode(runs: list[dict]) -> tuple[list[dict], dict]:
    """One row per context (pooled times, each run's median per layer) and the target."""
    rows = []
    for per_context in zip(*(run["rows"] for run in runs), strict=True):
        first = per_context[0]
        sides = list(first["times_s"])
        times = pooled(per_context)
        checks = {name: max(row["checks"][name] for row in per_context) for name in first["checks"]}
        rows.append(
            {
                "context": first["context"],
                "memory": {
                    side: entry | {"equal": all(r["memory"][side]["equal"] for r in per_context)}
                    for side, entry in first["memory"].items()
                },
                "max_abs_difference": checks,
                "outputs_agree": all(value <= 1e-4 for value in checks.values()),
                "ms_per_token": harness.ms(times),
                "median_ms_per_run": {
                    side: [statistics.median(row["times_s"][side]) * 1e3 for row in per_context]
                    for side in sides
                },
                "times_s": times,
            }
        )
    growth = {
        side: [statistics.median(run["growth"][side]) for run in runs] for side in runs[0]["growth"]
    }
    return rows, decode_target(growth, rows[0]["context"], rows[-1]["context"])


def decode_target(growth: dict[str, list[float]], shortest: int, longest: int) -> dict:
    """(a)'s verdict from each run's median growth per layer (longest / shortest context)."""
    if shortest == longest:
        return {"what": "needs two context lengths or more", "growth_per_run": growth, "met": None}
    flat = max(growth["deltanet"])
    grows = min(growth["full"])
    target = {
        "what": (
            f"every run's median ratio, round by round, of the Gated DeltaNet step (and "
            f"the Mamba-2 step) at {longest} tokens of context to its step at {shortest} "
            f"<= {FLAT}, and of the full-attention step > {FLAT}"
        ),
        "growth_per_run": growth,
        "worst_deltanet_growth": flat,
        "least_full_growth": grows,
        "deltanet_flat": flat <= FLAT,
        "full_grows": grows > FLAT,
        "met": flat <= FLAT < grows,
    }
    if "mamba2" in growth:  # the SSM layer's step, flat as Gated DeltaNet's
        worst = max(growth["mamba2"])
        target |= {"worst_mamba2_growth": worst, "mamba2_flat": worst <= FLAT}
        target["met"] = target["met"] and worst <= FLAT
    return target


# ---------------------------------------------------------------------------------------
# (b) and (c): the delta rule's prefill
# ---------------------------------------------------------------------------------------


def prefill_inputs(args) -> tuple[torch.Tensor, ...]:
    """q, k (already repeated to the value heads), v, g, beta for ``--prefill-tokens``."""
    generator = torch.Generator().manual_seed(args.seed + 1)
    tokens, heads = args.prefill_tokens, args.linear_value_heads
    shape = (1, tokens, args.linear_key_heads, args.linear_key_dim)
    q, k = torch.randn(2, *shape, generator=generator)
    group = heads // args.linear_key_heads
    q, k = (x.repeat_interleave(group, dim=2) for x in (q, k))  # as Qwen3NextGatedDeltaNet
    v = torch.randn(1, tokens, heads, args.linear_value_dim, generator=generator)
    # The layer's gates: g = -A * softplus(a + dt_bias) <= 0, beta = sigmoid(b)
    g = -F.softplus(torch.randn(1, tokens, heads, generator=generator)) * 0.5
    beta = torch.sigmoid(torch.randn(1, tokens, heads, generator=generator))
    return q, k, v, g, beta


def ssd_inputs(args) -> tuple[torch.Tensor, ...]:
    """x, dt, A, B, C, D of the SSD for ``--prefill-tokens``, as Mamba2Mixer holds them."""
    generator = torch.Generator().manual_seed(args.seed + 2)
    tokens, heads = args.prefill_tokens, args.mamba_heads
    x = torch.randn(1, tokens, heads, args.mamba_head_dim, generator=generator)
    # dt = softplus(dt + dt_bias), A = -exp(A_log) with A in 1 .. heads (Mamba-2's start)
    dt = F.softplus(torch.randn(1, tokens, heads, generator=generator) - 2.0)
    A = -torch.arange(1, heads + 1, dtype=torch.float32) / heads
    groups = (1, tokens, args.mamba_groups, args.mamba_state)
    B, C = torch.randn(2, *groups, generator=generator)
    return x, dt, A, B, C, torch.ones(heads)


#: (b) to (e): each pair's name, and the two calls whose ratio it is (first / second).
PAIRS = {
    "b": ("ours_over_transformers", ("ours_chunked", "transformers_chunked")),
    "c": ("chunked_over_recurrent", ("ours_chunked", "ours_recurrent")),
    "d": ("ssd_ours_over_transformers", ("ssd_ours_chunked", "ssd_transformers_chunked")),
    "e": ("ssd_chunked_over_recurrent", ("ssd_ours_chunked", "ssd_ours_recurrent")),
}


def measure_prefill(args) -> dict:
    """One run of (b) and (c), whichever ``--parts`` asks for, each in paired
    alternating rounds of its own (``harness.paired_rounds``). An untimed call of every
    form measured first checks its output against ``transformers``' and warms it up."""
    q, k, v, g, beta = prefill_inputs(args)
    x, dt, A, B, C, D = ssd_inputs(args)
    chunk, ssd_chunk = args.chunk_size, args.mamba_chunk_size
    calls = {
        "ours_chunked": lambda: gated_delta_rule(q, k, v, g, beta, chunk_size=chunk),
        "transformers_chunked": lambda: torch_chunk_gated_delta_rule(
            q, k, v, g, beta, chunk, None, True, True
        ),
        "ours_recurrent": lambda: gated_delta_rule(q, k, v, g, beta, chunk_size=None),
        "ssd_ours_chunked": lambda: mamba2_ssd(x, dt, A, B, C, D=D, chunk_size=ssd_chunk),
        "ssd_transformers_chunked": lambda: mamba2_chunk_scan(
            x, dt, A, B, C, ssd_chunk, D=D, return_final_states=True
        ),
        "ssd_ours_recurrent": lambda: mamba2_ssd(x, dt, A, B, C, D=D),
    }
    rounds = {
        "b": args.prefill_rounds,
        "c": args.recurrent_rounds,
        "d": args.prefill_rounds,
        "e": args.recurrent_rounds,
    }
    parts = [part for part in rounds if part in args.parts]
    with torch.no_grad():
        checked = {}  # each form checked, against transformers' chunked form of its kind
        if {"b", "c"} & set(parts):
            reference = "transformers_chunked"
            checked["ours_chunked"] = reference
            if "c" in parts:
                checked["ours_recurrent"] = reference
        if {"d", "e"} & set(parts):
            reference = "ssd_transformers_chunked"
            checked["ssd_ours_chunked"] = reference
            if "e" in parts:
                checked["ssd_ours_recurrent"] = reference
        references = {name: calls[name]() for name in set(checked.values())}
        difference = {
            name: max(
                ((a - b).abs().max() / b.abs().max().clamp_min(1.0)).item()
                for a, b in zip(calls[name](), references[reference], strict=True)
            )
            for name, reference in checked.items()
        }
        times, per_round = {}, {}
        for part in parts:
            name, pair = PAIRS[part]
            two = {side: calls[side] for side in pair}
            times[name] = harness.paired_rounds(two, rounds[part]).times
            per_round[name] = ratios(*(times[name][side] for side in pair))
    return {"max_abs_difference": difference, "times_s": times, "ratios": per_round}


def summarize_prefill(runs: list[dict], tokens: int) -> dict:
    """Pooled times and ratios of each pair, each run's median ratio, and the targets.

    ``ms`` gives each call's median from the rounds of its first pair: the chunked
    and ``transformers``' calls from (b)'s when it ran, the recurrence from (c)'s.
    """
    names = list(runs[0]["ratios"])
    per_run = {name: [statistics.median(run["ratios"][name]) for run in runs] for name in names}
    difference = {
        name: max(run["max_abs_difference"][name] for run in runs)
        for name in runs[0]["max_abs_difference"]
    }
    times = {
        name: {
            side: [t for run in runs for t in run["times_s"][name][side]]
            for side in runs[0]["times_s"][name]
        }
        for name in names
    }
    ms = {}
    for pair in times.values():
        for side, seconds in pair.items():
            ms.setdefault(side, quartiles([t * 1e3 for t in seconds]))
    return {
        "tokens": tokens,
        "max_abs_difference": difference,
        "outputs_agree": all(value <= 1e-4 for value in difference.values()),
        "ms": ms,
        "ratio": {
            name: quartiles([r for run in runs for r in run["ratios"][name]]) for name in names
        },
        "median_ratio_per_run": per_run,
        "ratio_per_round": {
            name: [r for run in runs for r in run["ratios"][name]] for name in names
        },
        "targets": prefill_targets(per_run, tokens),
        "times_s": times,
    }


def prefill_targets(per_run: dict[str, list[float]], tokens: int) -> dict:
    """(b) and (d): every run's median ours / transformers <= 1.0; (c) and (e): chunked /
    recurrent < 1.0.

    A pair that was not measured (``--parts``) gets ``met: None``.
    """
    targets = {}
    versus = f"every run's median ratio ours / transformers' chunked <= 1.0 at {tokens}"
    recurrent = f"every run's median ratio ours chunked / ours recurrent < 1.0 at {tokens}"
    for part, what, meets in (
        ("b", versus, lambda worst: worst <= 1.0),
        ("c", recurrent, lambda worst: worst < 1.0),
        ("d", "Mamba-2's SSD: " + versus, lambda worst: worst <= 1.0),
        ("e", "Mamba-2's SSD: " + recurrent, lambda worst: worst < 1.0),
    ):
        ratios = per_run.get(PAIRS[part][0])
        worst = max(ratios) if ratios else None
        targets[part] = {
            "what": what,
            "worst_run_median_ratio": worst,
            "met": None if worst is None else meets(worst),
        }
    return targets


# ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    results = {
        **harness.header("part4", args, transformers, load_average_before=harness.load_average()),
        "layouts": {
            "attention": f"{MODEL.name} (attention.MODELS): hidden_size {args.d_in}, "
            f"{args.num_heads} query heads, {args.num_kv_heads} key/value heads, head_dim "
            f"{args.head_dim}",
            "window": f"{args.window} ({WINDOW_MODEL.name}'s sliding_window, attention.MODELS)",
            "deltanet": f"{MODEL.name}'s linear layers: {args.linear_key_heads} key "
            f"heads, {args.linear_value_heads} value heads, dims {args.linear_key_dim} and "
            f"{args.linear_value_dim}, conv {args.conv_size}",
            "mamba2": f"{MAMBA_MODEL.name}'s Mamba-2 layers: {args.mamba_heads} heads of "
            f"{args.mamba_head_dim}, state {args.mamba_state}, {args.mamba_groups} groups, "
            f"conv {args.mamba_conv}, chunk {args.mamba_chunk_size}",
            "sparse": (
                f"{INDEXER_MODEL.name}'s indexer: {args.index_heads} heads of "
                f"{args.index_dim}, top_k {args.top_k}"
                if has_sparse()
                else SPARSE_MISSING
            ),
            "compressed": f"{COMPRESSED_MODEL.name}'s CSA and HCA layers (attention.MODELS, "
            f"layer_for): hidden_size {args.v4_d_in}, {args.v4_heads} query heads of "
            f"{args.v4_head_dim} over one key/value vector, window {args.v4_window}, one entry "
            f"per {args.csa_rate} tokens (CSA; indexer {args.v4_index_heads} heads of "
            f"{args.v4_index_dim}, top_k {args.v4_top_k}) or per {args.hca_rate} (HCA)",
        },
    }
    if "a" in args.parts:
        layers = build_layers(args)
        decode_runs = [measure_decode(args, layers) for _ in range(args.repeats)]
        results["decode_rows"], results["decode_target"] = summarize_decode(decode_runs)
        del decode_runs, layers
    else:
        results["decode_rows"] = []
        results["decode_target"] = {"what": "not measured (--parts)", "met": None}
    if {"b", "c", "d", "e"} & set(args.parts):
        prefill_runs = [measure_prefill(args) for _ in range(args.prefill_repeats)]
        results["prefill"] = summarize_prefill(prefill_runs, args.prefill_tokens)
    else:
        results["prefill"] = None
    results["environment"]["load_average_after"] = harness.load_average()
    return harness.finish(results, args.out, report)


def verdict(met: bool | None) -> str:
    return {True: "met", False: "MISSED", None: "not measured"}[met]


def report(results: dict) -> None:
    """The table and the targets' verdicts, on stderr."""
    rows = results["decode_rows"]
    if rows:
        sides = list(rows[0]["ms_per_token"])
        say("(a) decode, median ms per token (median memory per sequence, MiB)")
        say(f"{'context':>8} " + " ".join(f"{side:>20}" for side in sides))
        for row in rows:
            cells = [
                f"{row['ms_per_token'][s]['median']:8.2f} "
                f"({row['memory'][s]['bytes'] / 2**20:7.2f})"
                for s in sides
            ]
            say(f"{row['context']:>8} " + " ".join(f"{cell:>20}" for cell in cells))
        target = results["decode_target"]
        for side, growth in target["growth_per_run"].items():
            say(f"  growth {side}: " + ", ".join(f"{g:.2f}" for g in growth) + " (per run)")
        if "sparse" not in sides:
            say(f"  sparse: {SPARSE_MISSING}")
        agree = all(row["outputs_agree"] for row in rows)
        memory = all(e["equal"] for row in rows for e in row["memory"].values())
        say(f"  checks: outputs agree {agree}; memory == formula {memory}")
        say(f"  target ({target['what']}): {verdict(target['met'])}")
    else:
        say("(a) decode: not measured (--parts)")
    prefill = results["prefill"]
    if prefill is None:
        say("(b-e) prefill: not measured (--parts)")
    else:
        medians = ", ".join(f"{name} {ms['median']:.1f}" for name, ms in prefill["ms"].items())
        say(
            f"(b-e) prefill {prefill['tokens']} tokens, median ms: {medians}; "
            f"outputs agree {prefill['outputs_agree']}"
        )
        for key, (name, _) in PAIRS.items():
            entry = prefill["targets"][key]
            if entry["met"] is None:
                say(f"  ({key}) {name}: not measured (--parts)")
                continue
            per_run = ", ".join(f"{r:.3f}" for r in prefill["median_ratio_per_run"][name])
            rounds = ", ".join(f"{r:.2f}" for r in prefill["ratio_per_round"][name])
            say(
                f"  ({key}) {name} per run: {per_run} (rounds: {rounds}); target "
                f"({entry['what']}): {verdict(entry['met'])}"
            )


if __name__ == "__main__":
    main()
