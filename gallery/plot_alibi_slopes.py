"""
ALiBi's penalty per head, and T5's buckets
==========================================

ALiBi adds no position to the embeddings: each head subtracts
``slope * distance`` from its scores, with slopes fixed in advance, so that
some heads look at the last few tokens and others far back. T5 learns its
bias instead, one number per bucket of distances: the near distances one to a
bucket, the far ones in ever wider buckets.
"""

# %%
# Eight heads: the slopes halve from one head to the next, from a half down
# to two to the minus eight.
#
# A head count that is no power of two, such as BLOOM's, takes the slopes of
# the power of two below it, then the odd powers of the sequence for twice as
# many heads.

import matplotlib.pyplot as plt
import torch

from attention import (
    MODELS,
    alibi_bias,
    alibi_slopes,
    relative_position_bucket,
)

torch.set_printoptions(precision=4, sci_mode=False)

eight = alibi_slopes(8)
print(eight)
# Expected output:
# tensor([0.5000, 0.2500, 0.1250, 0.0625, 0.0312, 0.0156, 0.0078, 0.0039])
bloom = MODELS["BLOOM 176B"]
slopes = alibi_slopes(bloom.num_heads)
low, high = slopes.min(), slopes.max()
print(f"{bloom.name}: {bloom.num_heads} heads, slopes {low:.4f} to {high:.4f}")
# Expected output:
# BLOOM 176B: 112 heads, slopes 0.0039 to 0.9576

# %%
# Left, what each of eight heads subtracts from the score of a key ``d``
# tokens before the query: the last query of 65 tokens, its row of
# :func:`~attention.alibi_bias`. Right, the bucket of each distance in T5's
# decoder, with T5's defaults: one bucket per distance up to 15, then wider
# and wider ones up to ``max_distance``, and the last bucket for all beyond.

row = alibi_bias(8, 1, 65)[:, 0].flip(-1)  # (heads, distance 0..64)
max_distance = 128  # T5's relative_attention_max_distance; 32 buckets
distance = torch.arange(1001)
buckets = relative_position_bucket(
    -distance, bidirectional=False, num_buckets=32, max_distance=max_distance
)
some = [0, 15, 16, 127, 128, 1000]
print("distances:", some)
# Expected output:
# distances: [0, 15, 16, 127, 128, 1000]
print("buckets:  ", buckets[some].tolist())
# Expected output:
# buckets:   [0, 15, 16, 31, 31, 31]

fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained")
left, right = axes
colors = plt.cm.viridis(torch.linspace(0, 0.9, 8).tolist())
for head, color in enumerate(colors):
    label = f"head {head + 1}: slope 1/{1 / eight[head]:g}"
    left.plot(row[head], color=color, label=label)
left.set(xlabel="distance back (tokens)", ylabel="bias added to the score")
left.set_title("ALiBi, 8 heads")
left.legend(fontsize="x-small", ncol=2)
right.step(distance, buckets, where="post")
right.axvline(max_distance, color="grey", ls="--", lw=1)
right.set_xscale("symlog", linthresh=1)
right.set(xlim=(0, 1000), xlabel="distance back (tokens)", ylabel="bucket")
right.set_title("T5's decoder buckets (dashed: max_distance)")
for ax in (left, right):
    ax.grid(True, alpha=0.3)
fig.suptitle("ALiBi's fixed penalty per head, and T5's buckets of distances")
plt.show()
