"""
What each head looks at
=======================

A multi-head attention module computes several attention patterns at once, one per
head, each with its own query and key projections. Drawing the heads side by side
on one colour scale shows what each head attends to, and how they differ.
"""

# %%
# ``MultiHeadAttention(3, 8, 6, 0.0, num_heads=4)`` projects the 3-D embeddings of
# "Your journey starts with one step" to ``d_out = 8`` features and splits them into
# four heads of ``head_dim = 2``. Its ``attention_weights`` method returns the
# weights of every head, shape ``(batch, num_heads, num_tokens, num_tokens)``.

import matplotlib.pyplot as plt
import torch

from attention import INPUTS, TOKENS, MultiHeadAttention
from attention.figures import head_grid

torch.manual_seed(123)
torch.set_printoptions(precision=4, sci_mode=False)

mha = MultiHeadAttention(3, 8, context_length=6, dropout=0.0, num_heads=4)
with torch.no_grad():
    weights = mha.attention_weights(INPUTS.unsqueeze(0))[0]  # (num_heads, 6, 6)
print(weights.shape)
# Expected output:
# torch.Size([4, 6, 6])
assert weights.shape == (4, 6, 6)

# %%
# Each head has its own pattern. Here is what the last token, "step", attends to in
# head 1: a weight for each of the six tokens, itself included.

print(weights[0, -1])
# Expected output:
# tensor([0.1770, 0.1649, 0.1648, 0.1644, 0.1636, 0.1654])

# %%
# Whatever the head, the softmax makes every row a probability distribution over
# the tokens the query may see: the weights of each row sum to 1.

row_sums = weights.sum(dim=-1)  # (num_heads, 6)
print(torch.allclose(row_sums, torch.ones(4, 6)))
# Expected output:
# True
assert torch.allclose(row_sums, torch.ones(4, 6))

# %%
# The average over heads summarises where the module looks as a whole. (It is only
# a summary: the heads' outputs are concatenated and mixed by ``out_proj``, not
# averaged.) The last row of the average:

average = weights.mean(dim=0)  # (6, 6)
print(average[-1])
# Expected output:
# tensor([0.1694, 0.1668, 0.1666, 0.1663, 0.1629, 0.1680])

# %%
# Draw the four heads and their average with ``head_grid``, which puts every panel
# on one colour scale, so the same colour is the same weight everywhere. The hatched
# cells above the diagonal are the future, hidden by the causal mask.

panels = torch.cat((weights, average.unsqueeze(0)))  # (5, 6, 6)
fig = head_grid(
    panels,
    TOKENS,
    TOKENS,
    titles=["head 1", "head 2", "head 3", "head 4", "average of the heads"],
    ncols=3,
    allowed="causal",
    suptitle="The causal attention weights of four heads on the running example,\n"
    "and their average, on one colour scale",
)
plt.show()

# %%
# With only three input dimensions, the heads cannot find very different patterns:
# each row is close to a uniform average of the visible tokens, :math:`1/(i+1)` for
# row :math:`i`. Subtracting that uniform baseline shows what each head prefers:
# red cells get more attention than a plain average would give, blue cells less.

visible = ~mha.mask[:6, :6]  # True on and below the diagonal
uniform = visible / visible.sum(dim=-1, keepdim=True)  # row i: 1/(i+1) for each visible token
preference = 100 * (panels - uniform)  # in percentage points
print(uniform[-1])
# Expected output:
# tensor([0.1667, 0.1667, 0.1667, 0.1667, 0.1667, 0.1667])
torch.testing.assert_close(uniform[-1], torch.full((6,), 1 / 6))

limit = preference.abs().max().item()
fig = head_grid(
    preference,
    TOKENS,
    TOKENS,
    titles=["head 1", "head 2", "head 3", "head 4", "average of the heads"],
    ncols=3,
    allowed="causal",
    vmin=-limit,
    vmax=limit,
    cmap="RdBu_r",
    suptitle="How each head's weights differ from a uniform average of the visible tokens\n"
    "(percentage points): red cells get more attention, blue cells less",
)
fig.axes[-1].set_ylabel("weight minus uniform weight (percentage points)")
plt.show()

# %%
# Head 1 leans towards "Your", head 2 towards "Your" and "with", heads 3 and 4
# towards "journey" and "starts"; the average blurs these preferences away. These
# weights are random, untrained projections. In a trained model, with far more
# dimensions per head, the heads differ much more: one may follow the previous
# token, another the subject of the sentence.
# :ref:`sphx_glr_auto_gallery_plot_train_previous_token.py` trains a head to do the
# first.
