"""
The cache of interleaved local and global layers
================================================

Many models of 2025 interleave *local* layers, which attend to a window or a chunk of
recent tokens, with *global* layers, which attend to the whole text. A local layer's
KV cache stops growing at its window; a global layer's grows with the text. This
example draws the cache of four released models against the length of the text,
next to the same models with every layer global.
"""

# %%
# The numbers come from ``attention.MODELS``, which copies each model's released
# ``config.json`` and names its checkpoint. ``layer_types`` gives each layer's kind,
# as in ``transformers``: ``sliding_attention`` (a window), ``chunked_attention``
# (Llama 4's chunks) or ``full_attention`` (global). ``kv_cache_bytes`` caps each
# local layer at its window or chunk; with every layer global, the cache is
# ``kv_cache_bytes_per_token()`` for every token. Every model keeps bfloat16 numbers,
# 2 bytes each.

import math

import matplotlib.pyplot as plt
import torch

from attention import MODELS
from attention.models import kv_cache_bytes, kv_cache_bytes_per_token

torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

NAMES = ("Gemma 2 9B", "Gemma 3 27B", "gpt-oss-120b", "Llama 4 Scout")
WIDTH = max(map(len, NAMES))  # to align the columns
for name in NAMES:
    m = MODELS[name]
    local = m.local.tokens_kept  # a window or a chunk
    glob = m.layer_types.count("full_attention")
    print(f"{name:{WIDTH}} {glob:2} of {m.layers} layers global, the others see {local:5,} tokens")
# Expected output:
# Gemma 2 9B    21 of 42 layers global, the others see 4,096 tokens
# Gemma 3 27B   10 of 62 layers global, the others see 1,024 tokens
# gpt-oss-120b  18 of 36 layers global, the others see   128 tokens
# Llama 4 Scout 12 of 48 layers global, the others see 8,192 tokens

# %%
# Each line ends at the context the model was trained on. The solid line is the
# model as released, the dashed one the same model with every layer global. Up to
# the window the two coincide; beyond it the local layers stop adding to the cache,
# and the right panel shows what is left: the share of the all-global cache that
# the model keeps, which falls towards its share of global layers (dotted).

GiB = 2**30

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2), layout="constrained")
for name in NAMES:
    m = MODELS[name]
    end = m.trained_context
    tokens = sorted(set(torch.logspace(0, math.log10(end), 200).round().long().tolist()))
    mixed = [kv_cache_bytes(m, t) for t in tokens]
    full = [t * kv_cache_bytes_per_token(m) for t in tokens]
    (line,) = left.plot(tokens, [b / GiB for b in mixed], lw=2, label=name)
    left.plot(tokens, [b / GiB for b in full], "--", color=line.get_color())
    kept = [a / b for a, b in zip(mixed, full, strict=True)]
    right.plot(tokens, kept, lw=2, color=line.get_color())
    share = m.layer_types.count("full_attention") / m.layers
    right.axhline(share, color=line.get_color(), lw=0.8, ls=":")
    print(
        f"{name:{WIDTH}} at {end:7,} tokens: {mixed[-1] / GiB:5.2f} GiB, all global "
        f"{full[-1] / GiB:6.2f} GiB: {mixed[-1] / full[-1]:.3f} (global share {share:.3f})"
    )
# Expected output:
# Gemma 2 9B    at   8,192 tokens:  1.97 GiB, all global   2.62 GiB: 0.750 (global share 0.500)
# Gemma 3 27B   at 131,072 tokens: 10.41 GiB, all global  62.00 GiB: 0.168 (global share 0.161)
# gpt-oss-120b  at 131,072 tokens:  4.50 GiB, all global   9.00 GiB: 0.500 (global share 0.500)
# Llama 4 Scout at 262,144 tokens: 13.12 GiB, all global  48.00 GiB: 0.273 (global share 0.250)
left.set(xscale="log", yscale="log", xlabel="tokens in the cache", ylabel="GiB, one sequence")
left.set_title("KV cache: as released (solid), all global (dashed)")
left.grid(True, which="both", alpha=0.3)
left.legend()
right.set(xscale="log", ylim=(0, 1.05), xlabel="tokens in the cache")
right.set_title("share of the all-global cache kept")
right.grid(True, which="both", alpha=0.3)
fig.suptitle("Interleaved local and global layers, from released configs (bfloat16)")
plt.show()

# %%
# Gemma 3 keeps the least: five of every six layers are local, with a small window.
# gpt-oss's window is so small that its local layers hardly count, and it keeps half.
# Gemma 2's context is only twice its window, so its local layers still hold half of
# what they would hold if global, and it keeps three quarters at its longest. Llama 4
# Scout's chunks are long, so its chunked layers still weigh at its trained context:
# it keeps a little more than its share of global layers.
