"""
The keys DSA picks
==================

DeepSeek Sparse Attention lets each query attend only to the ``top_k`` keys its
lightning indexer scores highest. This example builds a
:class:`~attention.LightningIndexer` whose weights are set by hand (not trained, not
random) over 64 tokens, marks three of them, and draws which keys each query picks
with ``top_k = 8``: the marked tokens, however far back, and keys nearby.
"""

# %%
# One indexer head of size 16, its first 8 numbers rotated by RoPE. Its queries and
# keys are the inputs themselves (identity projections), and every head weight is 1,
# read from a constant feature. Ordinary tokens share one random vector ``c`` in the
# rotated numbers; three *marked* tokens hold another, ``m``, in the numbers that do
# not rotate. Every query's latent also carries ``m``: each query "looks for" the
# marked tokens, and otherwise matches ``c``, which RoPE turns with the distance.

import matplotlib.pyplot as plt
import torch

from attention import LightningIndexer, Rotary, topk_sparse_attention
from attention.figures import heatmap

torch.manual_seed(0)
tokens, dim, rotated, top_k = 64, 16, 8, 8
MARKED = [5, 20, 37]

c = torch.cat([torch.randn(rotated), torch.zeros(dim - rotated)])
m = torch.cat([torch.zeros(rotated), torch.randn(dim - rotated)])
content = c + 0.2 * torch.randn(tokens, dim)
content[MARKED] = m + 0.2 * torch.randn(len(MARKED), dim)
q_latent = content + 2.0 * m  # every query also looks for the marker
x = torch.cat([content, torch.ones(tokens, 1)], dim=1)  # a constant last feature

indexer = LightningIndexer(
    dim + 1,
    dim,
    num_heads=1,
    head_dim=dim,
    qk_rope_head_dim=rotated,
    rotary=Rotary(rotated, 100.0),
)
with torch.no_grad():
    indexer.W_query.weight.copy_(torch.eye(dim))
    indexer.W_key.weight.copy_(torch.eye(dim, dim + 1))  # drops the constant
    indexer.W_weights.weight.copy_(torch.eye(dim + 1)[-1:])  # reads it: weight 1
    scores = indexer(x[None], q_latent[None])[0]  # (queries, keys), -inf: future
print(f"scores {tuple(scores.shape)}, top_k = {top_k}")
# Expected output:
# scores (64, 64), top_k = 8

# %%
# Each query keeps its ``top_k`` best visible keys (all of them while it sees fewer),
# as :func:`~attention.topk_sparse_attention` does. How many of the queries that can
# see a marked token pick it:

picked = torch.zeros(tokens, tokens, dtype=torch.bool)
for s in range(tokens):
    best = scores[s, : s + 1].topk(min(top_k, s + 1)).indices
    picked[s, best] = True
for t in MARKED:
    print(f"token {t}: picked by {int(picked[t:, t].sum())} of {tokens - t} queries")
# Expected output:
# token 5: picked by 59 of 59 queries
# token 20: picked by 44 of 44 queries
# token 37: picked by 27 of 27 queries

# %%
# The attention reads only those keys. With the scores as given and one head, the
# last query's output over its picks equals plain attention over the same 8 keys:

qkv = x[None, None]  # (batch, heads, tokens, dim + 1)
out = topk_sparse_attention(qkv, qkv, qkv, scores[None], top_k)
keys = x[picked[-1]]
weights = torch.softmax(keys @ x[-1] / (dim + 1) ** 0.5, dim=-1)
print("last query reads", picked[-1].nonzero().flatten().tolist())
# Expected output:
# last query reads [0, 5, 6, 20, 37, 57, 62, 63]
print("same as attention over them:", torch.allclose(out[0, 0, -1], weights @ keys))
# Expected output:
# same as attention over them: True

# %%
# Queries down, keys across. The three columns of the marked tokens are picked by
# every later query; the rest of each row's picks are the query itself and the
# keys just before it, where RoPE has turned ``c`` least, and a few farther keys
# where its turns happen to bring ``c`` back into line.

fig, ax = plt.subplots(figsize=(6.4, 6.0), layout="constrained")
every_8th = [str(i) if i % 8 == 0 else "" for i in range(tokens)]
heatmap(
    picked.float(),
    every_8th,
    every_8th,
    ax=ax,
    allowed=picked,
    annotate=False,
    colorbar=False,
    xlabel="key (coloured: picked; hatched: not read)",
    ylabel="query",
)
for t in MARKED:
    ax.axvline(t, color="tab:red", lw=0.8, alpha=0.5)
ax.set_title(f"The {top_k} keys each query picks; red: the marked tokens")
plt.show()
