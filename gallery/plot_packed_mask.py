"""
Padded and packed masks
=======================

Four requests of 5, 2, 7 and 3 tokens, prefilled together. Padded, each becomes a
7 by 7 score matrix, and the padding's rows and columns are computed and then thrown
away. Packed, the 17 real tokens share one row, and the mask over them is
block-diagonal: one causal triangle per request, nothing between requests. This
example draws both, cell by cell, and counts the cells.
"""

# %%
# Each cell is a pair of a query (row) and a key (column). ``varlen_mask`` gives the
# packed mask from ``cu_seqlens``; the padded batch's mask is the causal mask and the
# padding mask, one square per request. The padded panel lays the four squares
# along the diagonal so the two compare side by side; the cells between them belong
# to no matrix at all.

import itertools

import matplotlib.pyplot as plt
import torch
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

from attention import causal_mask, padding_mask, varlen_mask

torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

lengths = [5, 2, 7, 3]
cu_seqlens = [0, *itertools.accumulate(lengths)]
longest = max(lengths)
print("cu_seqlens:", cu_seqlens)
# Expected output:
# cu_seqlens: [0, 5, 7, 14, 17]

ELSEWHERE, FUTURE, PADDING, ATTENDS = 0, 1, 2, 3  # what each cell is

# Packed: the block-diagonal mask over the 17 real tokens.
packed_mask = varlen_mask(cu_seqlens)
same_request = varlen_mask(cu_seqlens, causal=False)
packed = torch.full(packed_mask.shape, ELSEWHERE)
packed[same_request] = FUTURE
packed[packed_mask] = ATTENDS

# Padded: one longest-by-longest square per request, along the diagonal.
real = padding_mask(lengths, longest)  # (requests, longest)
padded = torch.full((len(lengths) * longest,) * 2, ELSEWHERE)
for row, is_real in enumerate(real):
    both_real = is_real[:, None] & is_real[None, :]  # a real query and a real key
    square = torch.full((longest, longest), FUTURE)
    square[~both_real] = PADDING
    square[causal_mask(longest) & both_real] = ATTENDS
    at = slice(row * longest, (row + 1) * longest)
    padded[at, at] = square

for name, cells in (("padded", padded), ("packed", packed)):
    print(
        f"{name}: {cells.shape[0]} token slots, {int((cells != ELSEWHERE).sum())} score "
        f"cells, {int((cells == ATTENDS).sum())} of them needed"
    )
# Expected output:
# padded: 28 token slots, 196 score cells, 52 of them needed
# packed: 17 token slots, 87 score cells, 52 of them needed

# %%
# Both compute the 52 cells that matter, a causal triangle per request. The padded
# batch adds the padding (orange) to each square; packing removes it, and a kernel
# that attends request by request, as FlashAttention's varlen kernel does, never
# touches the white cells between requests.

colors = ListedColormap(["white", "#d9d9d9", "#f4a259", "#3b6ea8"])
fig, axes = plt.subplots(1, 2, figsize=(9, 4.6), layout="constrained")
for ax, cells, title in (
    (axes[0], padded, f"padded: {len(lengths)} squares of {longest} by {longest}"),
    (axes[1], packed, f"packed: {packed.shape[0]} tokens, block-diagonal"),
):
    ax.imshow(cells, cmap=colors, vmin=0, vmax=3)
    ax.set_title(title)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.set_xticks([])
    ax.set_yticks([])
legend = [
    Patch(color=colors(ATTENDS), label="attends: the causal triangle of its request"),
    Patch(color=colors(FUTURE), label="hidden: the future"),
    Patch(color=colors(PADDING), label="padding: computed, thrown away"),
    Patch(facecolor="white", edgecolor="black", label="another request"),
]
fig.legend(handles=legend, loc="outside lower center", ncols=2, frameon=False)
plt.show()
