"""
Quantization error per channel: keys per channel, not per token
===============================================================

Keys of trained models have *outlier channels*: a few of the ``head_dim`` numbers
are large for every token. Quantize the keys with one scale per token and that
scale must stretch over the outliers, so every other channel is rounded coarsely.
One scale per channel, over a group of tokens (KIVI), fits each channel's range.
Here on keys with two outlier channels, in 4 bits, groups of 32.
"""

# %%
import matplotlib.pyplot as plt
import torch

from attention import quantize_kv

torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

# 256 tokens of 32 channels; channels 5 and 20 are outliers, large and offset
keys = torch.randn(1, 1, 256, 32)
keys[..., [5, 20]] = keys[..., [5, 20]] * 4 + 12

# quantize_kv groups keys per channel and values per token: give it the keys twice
per_channel, per_token = quantize_kv(keys, keys, bits=4, group_size=32).dequantize()
error_channel = (per_channel - keys).abs().mean((0, 1, 2))  # (32,) one per channel
error_token = (per_token - keys).abs().mean((0, 1, 2))
print(f"mean error, per channel: {error_channel.mean():.4f}")
# Expected output:
# mean error, per channel: 0.0789
print(f"mean error, per token:   {error_token.mean():.4f}")
# Expected output:
# mean error, per token:   0.2612

# %%
# Per token, every channel pays for the outliers; per channel, only the outliers
# themselves have a wider step.

fig, ax = plt.subplots(figsize=(7, 3.4), layout="constrained")
channels = torch.arange(32)
ax.bar(channels - 0.2, error_token, width=0.4, label="one scale per token")
ax.bar(channels + 0.2, error_channel, width=0.4, label="one scale per channel")
ax.set(xlabel="channel", ylabel="mean |error|", title="int4 keys, groups of 32")
ax.legend()
plt.show()
