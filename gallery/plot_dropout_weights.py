"""
Dropout on attention weights
============================

While training, dropout zeroes each attention weight with probability :math:`p`
and multiplies the ones it keeps by :math:`1/(1-p)`. A single draw breaks the rule
that each row sums to 1; on average over many draws the weights come back. In
evaluation mode dropout does nothing.
"""

# %%
# We start from the causal attention weights of "Your journey starts with one
# step", computed with a :class:`~attention.SelfAttentionV2` built with seed 789
# (the same weights as in the causal mask example).

import matplotlib.pyplot as plt
import torch

from attention import INPUTS, TOKENS, SelfAttentionV2, scaled_dot_product_weights
from attention.figures import head_grid

torch.manual_seed(789)
torch.set_printoptions(precision=4, sci_mode=False)

sa_v2 = SelfAttentionV2(d_in=3, d_out=2)
future = torch.ones(6, 6, dtype=torch.bool).triu(diagonal=1)
with torch.no_grad():  # we only look at the numbers: no gradients needed
    queries, keys = sa_v2.W_query(INPUTS), sa_v2.W_key(INPUTS)
    weights = scaled_dot_product_weights(queries, keys, allowed=~future)  # the past and present
print(weights)
# Expected output:
# tensor([[1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
#         [0.5517, 0.4483, 0.0000, 0.0000, 0.0000, 0.0000],
#         [0.3800, 0.3097, 0.3103, 0.0000, 0.0000, 0.0000],
#         [0.2758, 0.2460, 0.2462, 0.2319, 0.0000, 0.0000],
#         [0.2175, 0.1983, 0.1984, 0.1888, 0.1971, 0.0000],
#         [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529]])

# %%
# One draw of ``torch.nn.Dropout(0.5)`` in training mode (a new module is in
# training mode). Which weights it drops comes from the random number generator,
# and the same seed can give a different pattern on another platform or PyTorch
# version, so the script does not hard-code the pattern. It checks what holds
# for every draw: each weight is either dropped to 0 or doubled, exactly.

dropout = torch.nn.Dropout(0.5)
torch.manual_seed(123)
dropped = dropout(weights)
kept = dropped != 0
assert torch.equal(dropped[kept], 2 * weights[kept])  # kept: scaled by 1 / (1 - 0.5)
assert torch.all((dropped == 0) | (dropped == 2 * weights))  # nothing in between
assert torch.equal(dropped[future], torch.zeros(15))  # the future stays hidden

# %%
# The rows of this draw no longer sum to 1: a row sums to 0 if every weight in it
# was dropped, and up to 2 if none was. (The sums you see depend on your
# machine's draw.)

# Unchecked output: the draw depends on the random generator's implementation.
print("row sums of one draw:", dropped.sum(dim=-1))

# %%
# Averaged over many draws, the doubled survivors make up for the dropped
# weights: the expected value of each weight is :math:`(1-p) \cdot w/(1-p) = w`.
# We apply dropout to 20000 copies of the matrix at once (each copy gets its own
# pattern) and compare the mean with the original weights.

draws = dropout(weights.expand(20000, 6, 6))  # (20000, 6, 6)
mean = draws.mean(dim=0)
mean_row_sums = draws.sum(dim=-1).mean(dim=0)
# Properties that hold for any draw of this size, not hard-coded values: the
# standard error of each mean is at most 1/sqrt(20000), about 0.007.
close = torch.allclose(mean, weights, atol=0.05, rtol=0)
print("mean of 20000 draws within 0.05 of the weights:", close)
# Expected output:
# mean of 20000 draws within 0.05 of the weights: True
assert close
close = torch.allclose(mean_row_sums, torch.ones(6), atol=0.05, rtol=0)
print("mean row sums within 0.05 of 1:", close)
# Expected output:
# mean row sums within 0.05 of 1: True
assert close

# %%
# In evaluation mode dropout passes the weights through unchanged, so a trained
# model gives the same answer every time.

dropout.eval()
print("unchanged in eval mode:", torch.equal(dropout(weights), weights))
# Expected output:
# unchanged in eval mode: True
assert torch.equal(dropout(weights), weights)

# %%
# The weights before dropout, one draw, and the mean of the 20000 draws, on one
# colour scale from 0 to 2. The draw's survivors are twice as bright as before;
# the mean looks like the original.

fig = head_grid(
    torch.stack((weights, dropped, mean)),
    TOKENS,
    TOKENS,
    titles=["before dropout", "one draw, p = 0.5", "mean of 20000 draws"],
    vmax=2.0,
    allowed="causal",
    figsize=(13, 5.4),
    suptitle=(
        "Causal attention weights before dropout, after one draw of dropout with p = 0.5\n"
        "(each weight zeroed or doubled), and averaged over 20000 draws (close to the original)."
    ),
)
plt.show()
