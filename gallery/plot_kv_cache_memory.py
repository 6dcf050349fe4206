"""
KV-cache memory of real models
==============================

A model that writes text keeps the keys and values of every token it has seen, in
every layer. How much memory that takes depends on four numbers from the model's
config. This example computes it for four published configs and draws it against
the length of the text.
"""

# %%
# The numbers below are copied from each model's ``config.json``; the comments name
# the fields. Each model runs in 16-bit numbers, 2 bytes each.
# ``kv_cache_bytes_per_token`` computes ``2 * layers * kv_heads * head_dim * bytes``:
# the 2 counts the key and the value. DeepSeek-V3 caches a latent instead,
# ``layers * (kv_lora_rank + qk_rope_head_dim) * bytes``.

import matplotlib.pyplot as plt
import torch

from attention import kv_cache_bytes_per_token, latent_cache_bytes_per_token

torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

per_token = {
    # n_layer, n_head, n_embd / n_head
    "GPT-2": kv_cache_bytes_per_token(12, 12, 768 // 12, torch.bfloat16),
    # num_hidden_layers, num_key_value_heads, hidden_size / num_attention_heads
    "Llama 3 8B": kv_cache_bytes_per_token(32, 8, 4096 // 32, torch.bfloat16),
    "Mistral 7B": kv_cache_bytes_per_token(32, 8, 4096 // 32, torch.bfloat16),
    # num_hidden_layers, kv_lora_rank, qk_rope_head_dim
    "DeepSeek-V3": latent_cache_bytes_per_token(61, 512, 64, torch.bfloat16),
}
for name, size in per_token.items():
    print(f"{name:12} {size:8,} bytes per token")
# Expected output:
# GPT-2          36,864 bytes per token
# Llama 3 8B    131,072 bytes per token
# Mistral 7B    131,072 bytes per token
# DeepSeek-V3    70,272 bytes per token

# %%
# Each model's full context (``n_positions``, ``max_position_embeddings``) sets how
# far its line goes. Mistral 7B's ``sliding_window`` of 4096 tokens caps its cache:
# older keys are never looked at again, so they need not be kept.

context = {"GPT-2": 1024, "Llama 3 8B": 8192, "Mistral 7B": 32768, "DeepSeek-V3": 163840}
window = {"Mistral 7B": 4096}
GiB = 2**30

fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
for name, size in per_token.items():
    tokens = torch.logspace(0, torch.log10(torch.tensor(context[name])).item(), 200)
    kept = tokens.clamp(max=window.get(name, context[name]))
    ax.plot(tokens, kept * size / GiB, label=name, lw=2)
    full = min(context[name], window.get(name, context[name])) * size / GiB
    print(f"{name:12} full context {context[name]:7,} tokens: {full:6.2f} GiB")
# Expected output:
# GPT-2        full context   1,024 tokens:   0.04 GiB
# Llama 3 8B   full context   8,192 tokens:   1.00 GiB
# Mistral 7B   full context  32,768 tokens:   0.50 GiB
# DeepSeek-V3  full context 163,840 tokens:  10.72 GiB
ax.set(xscale="log", yscale="log", xlabel="tokens of text", ylabel="KV cache of one sequence (GiB)")
ax.grid(True, which="both", alpha=0.3)
ax.legend()
fig.suptitle("KV-cache size against text length, from published configs (bfloat16)")
plt.show()

# %%
# Llama 3 8B and Mistral 7B keep the same 128 KiB per token; Mistral's window stops
# its line at half a gibibyte. DeepSeek-V3, a far larger model, keeps about half as
# much per token thanks to its latent, which lets it serve texts twenty times longer.
