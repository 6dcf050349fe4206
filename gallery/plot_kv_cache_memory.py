"""
KV-cache memory of real models
==============================

A model that writes text keeps the keys and values of every token it has seen, in
every layer. How much memory that takes depends on four numbers from the model's
config. This example computes it for four published configs and draws it against
the length of the text.
"""

# %%
# The numbers come from ``attention.MODELS``, which copies each model's published
# ``config.json`` and names its checkpoint. Each model runs in bfloat16 numbers,
# 2 bytes each. ``kv_cache_bytes_per_token`` computes
# ``2 * layers * num_kv_heads * head_dim * bytes``: the 2 counts the key and the
# value. DeepSeek-V3 caches a latent instead,
# ``layers * (kv_lora_rank + qk_rope_head_dim) * bytes``.

import math

import matplotlib.pyplot as plt
import torch

from attention import MODELS
from attention.models import kv_cache_bytes, kv_cache_bytes_per_token

torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

NAMES = ("GPT-2", "Llama 3 8B", "Mistral 7B", "DeepSeek-V3")
WIDTH = max(map(len, NAMES))  # to align the columns
for name in NAMES:
    m = MODELS[name]
    print(f"{name:{WIDTH}} {m.attention}: {kv_cache_bytes_per_token(m):9,} bytes per token")
# Expected output:
# GPT-2       MHA:    36,864 bytes per token
# Llama 3 8B  GQA:   131,072 bytes per token
# Mistral 7B  GQA:   131,072 bytes per token
# DeepSeek-V3 MLA:    70,272 bytes per token

# %%
# Each line goes as far as the context its model was trained on, ``trained_context``.
# That is not always the positions its config allows, ``max_position_embeddings``:
# Mistral 7B v0.1 allows four times more than it was trained on. Its dashed line goes
# on to that limit, flat: its ``sliding_window`` caps the cache, since older keys are
# never looked at again, so they need not be kept.

GiB = 2**30

fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
for name in NAMES:
    m = MODELS[name]
    end = m.trained_context
    tokens = torch.logspace(0, math.log10(end), 200)
    tokens = tokens.round().long().tolist()
    (line,) = ax.plot(tokens, [kv_cache_bytes(m, t) / GiB for t in tokens], label=name, lw=2)
    note = ""
    if m.local is not None:  # a window: on to the positions its config allows
        allowed = m.max_position_embeddings
        more = torch.logspace(math.log10(end), math.log10(allowed), 50)
        more = more.round().long().tolist()
        sizes = [kv_cache_bytes(m, t) / GiB for t in more]
        ax.plot(more, sizes, "--", color=line.get_color(), lw=2)
        note = f" (window {m.local.window:,}; max_position_embeddings {allowed:,})"
    gib = kv_cache_bytes(m, end) / GiB
    print(f"{name:{WIDTH}} trained on {end:7,} tokens: {gib:5.2f} GiB{note}")
# Expected output:
# GPT-2       trained on   1,024 tokens:  0.04 GiB
# Llama 3 8B  trained on   8,192 tokens:  1.00 GiB
# Mistral 7B  trained on   8,192 tokens:  0.50 GiB (window 4,096; max_position_embeddings 32,768)
# DeepSeek-V3 trained on 131,072 tokens:  8.58 GiB
ax.set(xscale="log", yscale="log", xlabel="tokens of text", ylabel="KV cache of one sequence (GiB)")
ax.grid(True, which="both", alpha=0.3)
ax.legend()
fig.suptitle("KV-cache size against text length, from published configs (bfloat16)")
plt.show()

# %%
# Llama 3 8B and Mistral 7B keep the same bytes per token; Mistral's window stops its
# line at half a gibibyte. DeepSeek-V3, a far larger model, keeps about half as much
# per token thanks to its latent. The latent is not what lets it read long texts,
# though. Its RoPE was stretched with YaRN (``rope_scaling``: the factor below, over the
# positions it was pretrained on), and it was then trained on longer and longer texts,
# up to the context below. The latent only makes those long texts cheaper to keep.

ds = MODELS["DeepSeek-V3"]
yarn = ds.rope_scaling
print(
    f"DeepSeek-V3: {yarn['rope_type']} x{yarn['factor']:g} over "
    f"{yarn['original_max_position_embeddings']:,} positions, trained on "
    f"{ds.trained_context:,} tokens"
)
# Expected output:
# DeepSeek-V3: yarn x40 over 4,096 positions, trained on 131,072 tokens
