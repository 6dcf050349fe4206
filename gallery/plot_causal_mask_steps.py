"""
The causal mask, step by step
=============================

A causal mask lets each token attend only to itself and the tokens before it.
Three matrices show how: the raw scores, the scores with the future set to
:math:`-\\infty`, and the softmax of those, where the future gets exactly zero
weight and each row still sums to 1.
"""

# %%
# A :class:`~attention.SelfAttentionV2` with seed 789 projects the six tokens of
# "Your journey starts with one step" to queries and keys of size
# :math:`d_\text{out} = 2`. Their dot products are the raw scores: every query
# against every key, the future included.

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import Patch

from attention import INPUTS, TOKENS, SelfAttentionV2, scaled_dot_product_weights
from attention.figures import MASKED_COLOR, MASKED_HATCH, MASKED_HATCH_COLOR, heatmap

torch.manual_seed(789)
torch.set_printoptions(precision=4, sci_mode=False)

sa_v2 = SelfAttentionV2(d_in=3, d_out=2)
with torch.no_grad():  # we only look at the numbers: no gradients needed
    queries = sa_v2.W_query(INPUTS)  # (6, 2)
    keys = sa_v2.W_key(INPUTS)  # (6, 2)
scores = queries @ keys.T  # (6, 6)
print(scores)
# Expected output:
# tensor([[ 0.2899,  0.0716,  0.0760, -0.0138,  0.1344, -0.0511],
#         [ 0.4656,  0.1723,  0.1751,  0.0259,  0.1771,  0.0085],
#         [ 0.4594,  0.1703,  0.1731,  0.0259,  0.1745,  0.0090],
#         [ 0.2642,  0.1024,  0.1036,  0.0186,  0.0973,  0.0122],
#         [ 0.2183,  0.0874,  0.0882,  0.0177,  0.0786,  0.0144],
#         [ 0.3408,  0.1270,  0.1290,  0.0198,  0.1290,  0.0078]])

# %%
# The mask is ``True`` above the diagonal, where key :math:`j` comes after query
# :math:`i`. ``masked_fill`` writes :math:`-\infty` there: :math:`e^{-\infty} = 0`,
# so after the softmax those keys get no weight at all (a score of 0 would still
# get a share :math:`e^0 = 1`).

future = torch.ones(6, 6, dtype=torch.bool).triu(diagonal=1)
masked = scores.masked_fill(future, float("-inf"))
print(masked)
# Expected output:
# tensor([[0.2899,   -inf,   -inf,   -inf,   -inf,   -inf],
#         [0.4656, 0.1723,   -inf,   -inf,   -inf,   -inf],
#         [0.4594, 0.1703, 0.1731,   -inf,   -inf,   -inf],
#         [0.2642, 0.1024, 0.1036, 0.0186,   -inf,   -inf],
#         [0.2183, 0.0874, 0.0882, 0.0177, 0.0786,   -inf],
#         [0.3408, 0.1270, 0.1290, 0.0198, 0.1290, 0.0078]])
assert torch.equal(masked.isinf(), future)
assert torch.equal(masked[~future], scores[~future])  # the past and present are untouched

# %%
# The softmax of each row, after dividing by :math:`\sqrt{d_\text{out}} = \sqrt{2}`
# as scaled dot-product attention does. The first token sees only itself, so it
# gives itself all its attention; the last sees all six.

weights = torch.softmax(masked / keys.shape[-1] ** 0.5, dim=-1)
print(weights)
# Expected output:
# tensor([[1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
#         [0.5517, 0.4483, 0.0000, 0.0000, 0.0000, 0.0000],
#         [0.3800, 0.3097, 0.3103, 0.0000, 0.0000, 0.0000],
#         [0.2758, 0.2460, 0.2462, 0.2319, 0.0000, 0.0000],
#         [0.2175, 0.1983, 0.1984, 0.1888, 0.1971, 0.0000],
#         [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529]])
assert torch.equal(weights[future], torch.zeros(15))  # exactly 0, not merely small
torch.testing.assert_close(weights.sum(dim=-1), torch.ones(6))
# The package's function does the same three steps. It takes where a query may
# attend, the opposite of ``future``: ``allowed=~future``.
package_weights = scaled_dot_product_weights(queries, keys, allowed=~future)
torch.testing.assert_close(package_weights, weights)

# %%
# The three steps side by side. The two panels of scores share one colour scale, so
# the scores that survive the mask keep their colour; the hatched cells are the
# :math:`-\infty` entries. In the weights, the same cells are exact zeros, drawn
# hatched too (``allowed="causal"``) so that "not allowed to look" does not read as
# "a small weight".

fig, axes = plt.subplots(1, 3, figsize=(13, 4.8), layout="constrained")
low, high = scores.min().item(), scores.max().item()
heatmap(scores, TOKENS, TOKENS, ax=axes[0], vmin=low, vmax=high, cmap="magma", title="1. scores")
heatmap(
    masked,
    TOKENS,
    TOKENS,
    ax=axes[1],
    vmin=low,
    vmax=high,
    cmap="magma",
    title="2. future set to −∞",
)
heatmap(weights, TOKENS, TOKENS, ax=axes[2], allowed="causal", title="3. softmax(scores / √2)")
for ax in axes[1:]:
    ax.set_ylabel(None)
key = Patch(
    facecolor=MASKED_COLOR, edgecolor=MASKED_HATCH_COLOR, hatch=MASKED_HATCH, label="masked"
)
fig.legend(handles=[key], loc="outside lower right", frameon=False)
fig.suptitle(
    "Causal attention in three steps: the raw scores, the scores with the future masked\n"
    "(hatched), and the softmax weights, which are exactly zero above the diagonal."
)
plt.show()

# %%
# The same weights come out of a longer route: take the softmax over all six
# keys, multiply by a lower-triangular matrix of ones to zero the future, and
# divide each row by its new sum. Renormalising removes the weight the future
# had, and a softmax of the scores that remain gives exactly that.

all_weights = torch.softmax(scores / keys.shape[-1] ** 0.5, dim=-1)  # no mask
print(all_weights[0])
# Expected output:
# tensor([0.1921, 0.1646, 0.1652, 0.1550, 0.1721, 0.1510])
tril = torch.tril(torch.ones(6, 6))
zeroed = all_weights * tril
renormalised = zeroed / zeroed.sum(dim=-1, keepdim=True)
print(renormalised[1])
# Expected output:
# tensor([0.5517, 0.4483, 0.0000, 0.0000, 0.0000, 0.0000])
print("same as the -inf mask:", torch.allclose(renormalised, weights))
# Expected output:
# same as the -inf mask: True
torch.testing.assert_close(renormalised, weights)
