"""
Block tables filling up
=======================

A paged KV cache hands out fixed-size blocks from one pool as sequences grow. Three
sequences decode side by side in a pool of 12 blocks of 4 tokens; the figure shows the
pool after their prompts and after every four decode steps. Each sequence takes a
block only when its last one is full, so their blocks interleave in the pool, and the
block tables say which is whose.
"""

# %%
# The prompts have 5, 2 and 7 tokens; each decode step appends one token to every
# sequence that is still running. The second one stops after 6 steps and is freed:
# its blocks go back to the pool, and the next sequence that needs one gets one of
# them. One number per key and value is enough to follow the blocks.

import matplotlib.pyplot as plt
import torch

from attention import PagedKVCache
from attention.figures import paged_blocks

torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

cache = PagedKVCache(num_blocks=12, block_size=4, num_kv_heads=1, head_dim=1)
prompts = {0: 5, 1: 2, 2: 7}
stops = {1: 6}  # the second sequence's answer ends after 6 tokens


def append(seq_id, n):
    new = torch.zeros(n, 1, 1)
    cache.update(seq_id, new, new)


for seq_id, n in prompts.items():
    cache.add(seq_id)
    append(seq_id, n)

fig, axes = plt.subplots(1, 3, figsize=(13, 5.6), layout="constrained")
paged_blocks(cache, ax=axes[0], title="the prompts")
for step in range(1, 9):
    for seq_id in cache.seq_ids:
        append(seq_id, 1)
        if stops.get(seq_id) == step:
            cache.free(seq_id)
    if step in (4, 8):
        paged_blocks(cache, ax=axes[step // 4], title=f"after {step} decode steps")
fig.suptitle("Three sequences decoding in a pool of 12 blocks of 4 tokens")
for seq_id in cache.seq_ids:
    print(f"seq {seq_id}: {cache.num_tokens(seq_id)} tokens, blocks {cache.block_table(seq_id)}")
# Expected output:
# seq 0: 13 tokens, blocks [0, 1, 7, 2]
# seq 2: 15 tokens, blocks [3, 4, 5, 6]
print("free blocks:", cache.num_free_blocks)
# Expected output:
# free blocks: 4
plt.show()
