"""
What a streaming cache keeps, and where it puts it
==================================================

``StreamingCache(num_sinks, recent)`` keeps the first ``num_sinks`` tokens of a
stream and its last ``recent`` ones (StreamingLLM). It also gives them new
positions: the kept tokens sit at ``0, 1, ..., len(cache) - 1``, so a rotary model
never sees a position past the cache's size, however long the stream. Left, which
tokens a cache of 4 sinks and the 12 most recent tokens holds after each step of a
40-token stream; right, the position each kept token gets at the last step.
"""

# %%
import matplotlib.pyplot as plt
import torch

from attention import GroupedQueryAttention, Rotary, StreamingCache
from attention.figures import heatmap

torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

steps = 40
rotary = Rotary(4, 10000.0)  # each head's 4 numbers turn, base 10,000
layer = GroupedQueryAttention(8, 8, 16, num_heads=2, num_kv_heads=1, rotary=rotary)
cache = StreamingCache(num_sinks=4, recent=12)
x = torch.randn(1, steps, 8)
held = torch.zeros(steps, steps)
with torch.no_grad():
    for t in range(steps):
        last = layer(x[:, t : t + 1], cache=cache)  # one token at a time
        held[t, cache.positions] = 1
    # the same as the layer alone on the kept tokens, at positions 0 ... 15
    alone = layer(x[:, cache.positions])[:, -1:]
print("tokens seen:", cache.seen_tokens, "held:", len(cache))
# Expected output:
# tokens seen: 40 held: 16
print("their places in the text:", cache.positions)
# Expected output:
# their places in the text: [0, 1, 2, 3, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39]
print("the last step = the kept tokens alone:", torch.allclose(last, alone, atol=1e-6))
# Expected output:
# the last step = the kept tokens alone: True

# %%
# The module was built with a ``context_length`` of 16, the cache's size: a stream of
# 40 tokens never needs more.

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2), layout="constrained")
every_8th = [str(i) if i % 8 == 0 else "" for i in range(steps)]
heatmap(
    held,
    every_8th,
    every_8th,
    ax=left,
    allowed=held.bool(),
    annotate=False,
    colorbar=False,
    xlabel="token position in the text (coloured: held)",
    ylabel="decoding step",
    title="held by StreamingCache(4, 12)",
)
right.plot(cache.positions, range(len(cache)), "o")
right.set(
    xlabel="token position in the text",
    ylabel="position inside the cache",
    title="re-indexed positions at the last step",
    xlim=(-1, steps),
)
plt.show()
