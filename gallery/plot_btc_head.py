"""
One head in (B, T, C) notation
==============================

The attention head of Karpathy's "Let's build GPT", step by step, with the shape of
every tensor: ``B`` sequences in a batch, ``T`` tokens ("time") per sequence, ``C``
features ("channels") per token. Every sequence of the batch gets its own pattern of
attention weights.
"""

# %%
# A batch of 4 random sequences of 8 tokens, 32 features each, as in the lecture.
# The input is drawn before the head is built, in the lecture's order, so the same
# seed gives the lecture's numbers.

import matplotlib.pyplot as plt
import torch
from torch.nn import functional as F

from attention import Head
from attention.figures import head_grid, heatmap

torch.manual_seed(1337)
torch.set_printoptions(precision=4, sci_mode=False)

B, T, C = 4, 8, 32  # batch, time, channels
x = torch.randn(B, T, C)
head = Head(n_embd=C, head_size=16, block_size=T)
print("x:", tuple(x.shape))
# Expected output:
# x: (4, 8, 32)
assert x.shape == (4, 8, 32)

# %%
# Every token emits a key ("what do I contain?") and a query ("what am I looking
# for?"), 16 numbers each: ``head_size = 16``.

with torch.no_grad():
    k = head.key(x)  # (B, T, 16)
    q = head.query(x)  # (B, T, 16)
print("k:", tuple(k.shape), " q:", tuple(q.shape))
# Expected output:
# k: (4, 8, 16)  q: (4, 8, 16)
assert k.shape == q.shape == (4, 8, 16)

# %%
# The affinities ``wei`` are the dot products of every query with every key, in
# each sequence separately: ``(B, T, 16) @ (B, 16, T) -> (B, T, T)``. They are scaled
# by :math:`1/\sqrt{16}`, the future is set to :math:`-\infty`, and a softmax turns
# each row into weights that sum to 1.

wei = q @ k.transpose(-2, -1) * head.head_size**-0.5  # (B, T, T)
wei = wei.masked_fill(~head.tril[:T, :T], float("-inf"))  # tril: True where a token may look
wei = F.softmax(wei, dim=-1)
print("wei:", tuple(wei.shape))
# Expected output:
# wei: (4, 8, 8)
assert wei.shape == (4, 8, 8)
print(wei[0, 1])
# Expected output:
# tensor([0.3966, 0.6034, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000])

# %%
# The same weights come out of ``Head.attention_weights``. The output aggregates the
# values, 16 numbers per token, with these weights: ``(B, T, T) @ (B, T, 16) ->
# (B, T, 16)``.

with torch.no_grad():
    torch.testing.assert_close(head.attention_weights(x), wei)
    v = head.value(x)  # (B, T, 16)
    out = wei @ v
    torch.testing.assert_close(head(x), out)
print("out:", tuple(out.shape))
# Expected output:
# out: (4, 8, 16)
assert out.shape == (4, 8, 16)

# %%
# The lecture's notebook computes ``wei`` at first without the scaling; dropping it
# here gives its numbers, for instance 0.1574 and 0.8426 in the second row. The
# unscaled affinities are :math:`\sqrt{16} = 4` times larger, so the softmax is
# sharper. (For queries and keys with unit variance, the dot product of two
# 16-dimensional vectors has variance 16; the scaling brings it back to 1, which
# keeps the softmax from turning into a one-hot choice as ``head_size`` grows.)

unscaled = (q @ k.transpose(-2, -1)).masked_fill(~head.tril, float("-inf")).softmax(dim=-1)
print(unscaled[0, 1, :2])
# Expected output:
# tensor([0.1574, 0.8426])

# %%
# One heatmap per sequence of the batch. The head's weights are the same for all
# four, but the tokens differ, so each sequence gets its own pattern: attention
# depends on the data.

positions = [str(t) for t in range(T)]
fig = head_grid(
    wei,
    positions,
    positions,
    titles=[f"batch {b}" for b in range(B)],
    ncols=2,
    allowed="causal",
    suptitle="The attention weights wei of one head for each of the 4 sequences in a batch\n"
    "(one heatmap per sequence, tokens numbered by position)",
)
plt.show()

# %%
# With all-zero affinities, the masked softmax spreads each row evenly over the
# visible tokens: 1, then 1/2 and 1/2, then 1/3 each, and so on. ``wei @ x`` is then
# the running average of the past, the lecture's first, "bag of words" way of letting
# tokens talk to each other. A trained head replaces the zeros with data-dependent
# affinities.

tril = torch.ones(T, T).tril()
flat = torch.zeros(T, T).masked_fill(tril == 0, float("-inf")).softmax(dim=-1)  # (T, T)
print(flat[3])
# Expected output:
# tensor([0.2500, 0.2500, 0.2500, 0.2500, 0.0000, 0.0000, 0.0000, 0.0000])
running_mean = x.cumsum(dim=1) / torch.arange(1, T + 1).view(1, T, 1)  # (B, T, C)
torch.testing.assert_close(flat @ x, running_mean)

ax = heatmap(flat, positions, positions, allowed="causal")
ax.figure.suptitle(
    "With all-zero affinities, token t gives each of the t + 1 visible tokens 1/(t + 1)"
)
plt.show()

# sphinx_gallery_thumbnail_number = 1
