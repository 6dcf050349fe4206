"""
Memory saved by a shared prefix
===============================

When every request to a service starts with the same system prompt, a paged KV cache
can store that prompt once: each request forks the prompt's sequence, sharing its full
blocks, and copies only the partly filled last one when it first writes. This example
counts the blocks a real ``PagedKVCache`` holds for 1 to 64 requests, with and without
sharing, and turns them into bytes with Llama 3 8B's key/value heads.
"""

# %%
# Each request has the shared system prompt, then 100 tokens of its own (question and
# answer), in blocks of 16 tokens. The pool holds one number per key and value: the
# block count is all that matters, and ``kv_cache_bytes_per_token`` gives the bytes per
# token of the real model, over all its layers, in bfloat16.

import math

import matplotlib.pyplot as plt
import torch

from attention import MODELS, PagedKVCache
from attention.models import kv_cache_bytes_per_token

torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

BLOCK, OWN = 16, 100
llama = MODELS["Llama 3 8B"]
per_block = BLOCK * kv_cache_bytes_per_token(llama, torch.bfloat16)
GiB = 2**30


def blocks_used(requests, prefix, share):
    enough = (requests + 1) * math.ceil((prefix + OWN) / BLOCK)  # never too few
    cache = PagedKVCache(enough, block_size=BLOCK, num_kv_heads=1, head_dim=1)
    one = torch.zeros(1, 1, 1)
    cache.add(-1)
    cache.update(-1, one.expand(prefix, 1, 1), one.expand(prefix, 1, 1))
    for r in range(requests):
        if share:
            cache.fork(-1, r)
            cache.update(r, one.expand(OWN, 1, 1), one.expand(OWN, 1, 1))
        else:
            cache.add(r)
            n = prefix + OWN
            cache.update(r, one.expand(n, 1, 1), one.expand(n, 1, 1))
    cache.free(-1)
    return cache.num_blocks - cache.num_free_blocks


# %%
# Two system prompts, of 200 and 1000 tokens. Without sharing, the memory grows by the
# whole prompt for each request; with sharing, by the request's own tokens and one
# copied block, so the saving grows with the number of requests and the prompt's
# length.

counts = [1, 2, 4, 8, 16, 32, 64]
fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
for prefix, colour in ((200, "tab:blue"), (1000, "tab:orange")):
    alone = [blocks_used(n, prefix, False) * per_block / GiB for n in counts]
    shared = [blocks_used(n, prefix, True) * per_block / GiB for n in counts]
    ax.plot(counts, alone, "o--", color=colour, label=f"{prefix}-token prompt, each its own")
    ax.plot(counts, shared, "o-", color=colour, label=f"{prefix}-token prompt, shared")
    print(
        f"{prefix}-token prompt, 64 requests: {alone[-1]:.2f} GiB alone, "
        f"{shared[-1]:.2f} GiB shared ({1 - shared[-1] / alone[-1]:.0%} saved)"
    )
# Expected output:
# 200-token prompt, 64 requests: 2.38 GiB alone, 0.90 GiB shared (62% saved)
# 1000-token prompt, 64 requests: 8.62 GiB alone, 1.00 GiB shared (88% saved)
ax.set_xscale("log", base=2)
ax.set_xticks(counts, [str(n) for n in counts])
ax.set_xlabel("requests sharing the system prompt")
ax.set_ylabel("KV cache, all layers (GiB)")
ax.set_title("Llama 3 8B's KV cache, a shared system prompt stored once")
ax.legend()
plt.show()
