"""
Scores versus attention weights
===============================

A softmax turns the raw dot-product scores of "Your journey starts with one step"
into attention weights. Side by side, the two matrices show what it changes: scores
are any real numbers in a symmetric matrix; weights are positive, each row sums to 1,
and the symmetry is gone.
"""

# %%
# Without trainable weights, each token is its own query and its own key, so the
# score of key :math:`j` for query :math:`i` is the dot product
# :math:`x^{(i)} \cdot x^{(j)}` and all of them together are ``INPUTS @ INPUTS.T``.
# A softmax over each row then turns a query's scores into its weights.

import matplotlib.pyplot as plt
import torch

from attention import INPUTS, TOKENS, attention_weights, scores_for_all
from attention.figures import heatmap

torch.manual_seed(123)
torch.set_printoptions(precision=4, sci_mode=False)

scores = scores_for_all(INPUTS)  # (6, 6): INPUTS @ INPUTS.T
weights = attention_weights(scores)  # (6, 6): a softmax over each row

# %%
# The row of the query "journey" (row 1), before and after the softmax. Its
# largest score, 1.4950, is its dot product with itself; "starts", whose embedding
# is almost the same, comes a close second.

print("scores of journey: ", scores[1])
# Expected output:
# scores of journey:  tensor([0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865])
print("weights of journey:", weights[1])
# Expected output:
# weights of journey: tensor([0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581])

# %%
# The two matrices side by side. The scores get their own colour scale, from their
# smallest to their largest value; the weights start at 0, the smallest weight
# there can be.

fig, (ax_scores, ax_weights) = plt.subplots(1, 2, figsize=(10, 5), layout="constrained")
heatmap(scores, TOKENS, TOKENS, ax=ax_scores, vmin=None, cmap="magma", title="scores")
heatmap(weights, TOKENS, TOKENS, ax=ax_weights, title="weights (softmax of each row)")
fig.suptitle(
    "Dot-product scores (left) form a symmetric matrix with values above 1;\n"
    "the softmax weights (right) are positive and each row sums to 1."
)
plt.show()

# %%
# Scores are not bounded: they grow with the length of the embeddings, and here
# several exceed 1. Because the score of :math:`i` for :math:`j` is the same dot
# product as the score of :math:`j` for :math:`i`, the score matrix equals its
# transpose.

print("largest score:", scores.max())
# Expected output:
# largest score: tensor(1.4950)
print("scores equal their transpose:", torch.allclose(scores, scores.T))
# Expected output:
# scores equal their transpose: True
assert torch.allclose(scores, scores.T)

# %%
# Weights are all positive and each row sums to 1: every query spreads one unit
# of attention over the six tokens.

print("smallest weight:", weights.min())
# Expected output:
# smallest weight: tensor(0.0988)
print("row sums:", weights.sum(dim=-1))
# Expected output:
# row sums: tensor([1.0000, 1.0000, 1.0000, 1.0000, 1.0000, 1.0000])
torch.testing.assert_close(weights.sum(dim=-1), torch.ones(6))

# %%
# The softmax normalises each row on its own, so the same score becomes different
# weights in different rows. "journey" and "one" share the score 0.7070, but
# "journey" gives "one" a weight of 0.1082 while "one" gives "journey" 0.1958:
# the weights of row 1 are no longer the weights of column 1.

print("score  journey -> one:", scores[1, 4], " one -> journey:", scores[4, 1])
# Expected output:
# score  journey -> one: tensor(0.7070)  one -> journey: tensor(0.7070)
torch.testing.assert_close(scores[1, 4], scores[4, 1])
print("weight journey -> one:", weights[1, 4], " one -> journey:", weights[4, 1])
# Expected output:
# weight journey -> one: tensor(0.1082)  one -> journey: tensor(0.1958)
print("weights equal their transpose:", torch.allclose(weights, weights.T))
# Expected output:
# weights equal their transpose: False
assert not torch.allclose(weights, weights.T)
