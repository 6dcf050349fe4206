"""
A state that does not grow
==========================

A softmax-attention layer keeps a key and a value for every token it has seen: its
KV cache grows with the text. A linear-attention layer folds the past into a state
of fixed size. Qwen3-Next has both kinds of layer, three Gated DeltaNet layers for
each full-attention layer. This example draws the memory of one layer of each kind,
for one sequence, against the length of the text, at the model's released layout.
"""

# %%
# The sizes come from ``attention.MODELS``, which copies the model's released
# ``config.json``. A full-attention layer caches ``2 * num_kv_heads * head_dim``
# numbers per token (keys and values, bfloat16). A Gated DeltaNet layer keeps one
# ``linear_key_head_dim`` by ``linear_value_head_dim`` matrix per value head (float32,
# as ``transformers`` keeps it) and the last inputs of its short convolution.

import math

import matplotlib.pyplot as plt
import torch

from attention import MODELS
from attention.models import layer_kv_cache_bytes_per_token, layer_state_bytes

torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)
MiB = 2**20

qwen = MODELS["Qwen3-Next 80B-A3B"]
full = qwen.layer_types.index("full_attention")
linear = qwen.layer_types.index("linear_attention")
per_token = layer_kv_cache_bytes_per_token(qwen)[full]
state = layer_state_bytes(qwen)[linear]
print(
    f"{qwen.name}: {qwen.layer_types.count('linear_attention')} Gated DeltaNet "
    f"and {qwen.layer_types.count('full_attention')} full-attention layers"
)
# Expected output:
# Qwen3-Next 80B-A3B: 36 Gated DeltaNet and 12 full-attention layers
print(f"full-attention layer: {per_token:,} bytes per token")
# Expected output:
# full-attention layer: 2,048 bytes per token
print(f"Gated DeltaNet layer: {state:,} bytes at any length")
# Expected output:
# Gated DeltaNet layer: 2,162,688 bytes at any length
print(f"the cache passes the state at {math.ceil(state / per_token):,} tokens")
# Expected output:
# the cache passes the state at 1,056 tokens

# %%
# Each line runs up to the context the model was trained on, ``trained_context``.
# The cache is a straight line on these log axes; the state is flat.

end = qwen.trained_context
tokens = torch.logspace(0, math.log10(end), 200).round().long().unique().tolist()
cache = [t * per_token / MiB for t in tokens]
fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
ax.plot(tokens, cache, lw=2, label="full attention: KV cache")
ax.plot(
    tokens,
    [state / MiB] * len(tokens),
    lw=2,
    label="Gated DeltaNet: state (delta rule + convolution)",
)
ax.set(
    xscale="log",
    yscale="log",
    xlabel="tokens of text",
    ylabel="memory of one layer, one sequence (MiB)",
)
ax.grid(True, which="both", alpha=0.3)
ax.legend()
ax.set_title(f"One layer of {qwen.name}, from its released config")
plt.show()
print(
    f"at {end:,} tokens: cache {cache[-1]:,.0f} MiB, "
    f"state {state / MiB:.2f} MiB, {end * per_token / state:.0f} times less"
)
# Expected output:
# at 262,144 tokens: cache 512 MiB, state 2.06 MiB, 248 times less

# %%
# Below about a thousand tokens the state is the larger of the two; past that, every
# token adds to the cache and nothing to the state. What the state gives up for its
# fixed size is recall: chapter 20 measures it, by storing key-value pairs and
# reading them back.
