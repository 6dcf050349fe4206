"""
Cross-attention weights: decoder tokens over encoder tokens
===========================================================

An encoder reads "Your journey starts with one step" both ways; a decoder has written
"I can't find the light switch" one token at a time. In each decoder layer, a
cross-attention lets every decoder token read the encoder's output: its queries come
from the decoder, its keys and values from the encoder. Its weights are a rectangle,
one row per decoder token and one column per encoder token, with no mask: the whole
source was there before the first word was written. Decoding with a
``CrossAttentionCache`` gives the same rows one at a time, from keys and values
computed once.
"""

# %%
# A toy encoder layer (a ``CrossAttention`` of the source with itself, both ways), a
# causal decoder layer and the cross-attention between them, untrained, two heads.

import matplotlib.pyplot as plt
import torch

from attention import (
    INPUTS,
    SWITCH_INPUTS,
    SWITCH_TOKENS,
    TOKENS,
    CrossAttention,
    CrossAttentionCache,
    GroupedQueryAttention,
)
from attention.figures import head_grid

torch.manual_seed(123)
torch.set_printoptions(precision=4, sci_mode=False)

source, target = INPUTS.unsqueeze(0), SWITCH_INPUTS.unsqueeze(0)  # (1, 6, 3) each
encoder_self = CrossAttention(3, 3, 8, num_heads=2)
decoder_self = GroupedQueryAttention(3, 8, 6, num_heads=2, num_kv_heads=2)
cross = CrossAttention(8, 8, 8, num_heads=2)

with torch.no_grad():
    encoded = encoder_self(source, source)  # (1, 6, 8): every token sees every token
    states = decoder_self(target)  # (1, 6, 8): causal
    weights = cross.attention_weights(states, encoded)  # (1, heads, decoder, encoder)
print("weights:", tuple(weights.shape))
print("each row sums to 1:", torch.allclose(weights.sum(-1), torch.ones(1, 2, 6)))
# Expected output:
# weights: (1, 2, 6, 6)
# each row sums to 1: True

# %%
# Decoding: the first call projects the encoder's output into keys and values and
# keeps them; each later call brings one decoder token and no context. The rows come
# out one by one, and the cache holds the same six tokens throughout.

cache = CrossAttentionCache()
rows = []
with torch.no_grad():
    for t in range(6):
        context = encoded if t == 0 else None
        step = cross.attention_weights(states[:, t : t + 1], context, cache=cache)
        rows.append(step)  # (1, heads, 1, encoder tokens)
print("row by row equals the full matrix:", torch.allclose(torch.cat(rows, 2), weights))
print(f"decoder tokens seen: {cache.seen_tokens}, context tokens held: {len(cache)}")
# Expected output:
# row by row equals the full matrix: True
# decoder tokens seen: 6, context tokens held: 6

# %%
# Each head's weights: rows are the decoder's tokens, columns the encoder's. Nothing is
# hatched, since no encoder token is hidden from any decoder token.

head_grid(
    weights[0],
    SWITCH_TOKENS,
    TOKENS,
    suptitle="Cross-attention weights of two heads: decoder tokens (rows) over "
    "encoder tokens (columns), no mask",
)
plt.show()
