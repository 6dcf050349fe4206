"""
Query heads that share keys and values
======================================

Grouped-query attention gives several query heads one key/value head. The heads of a
group weigh the same keys and values, but with their own queries, so their
attention patterns still differ.
"""

# %%
# A ``GroupedQueryAttention`` with 4 query heads and 2 key/value heads on "Your
# journey starts with one step": ``W_key`` and ``W_value`` project to half as many
# features as ``W_query``.

import matplotlib.pyplot as plt
import torch

from attention import INPUTS, TOKENS, GroupedQueryAttention
from attention.figures import head_grid

torch.manual_seed(123)
torch.set_printoptions(precision=4, sci_mode=False)

gqa = GroupedQueryAttention(3, 8, context_length=6, num_heads=4, num_kv_heads=2)
print(gqa.W_query.weight.shape, gqa.W_key.weight.shape, gqa.W_value.weight.shape)
# Expected output:
# torch.Size([8, 3]) torch.Size([4, 3]) torch.Size([4, 3])

# %%
# Query head ``h`` reads key/value head ``h // 2``: heads 1 and 2 share the first,
# heads 3 and 4 the second. ``attention_weights`` returns every query head's weights.

with torch.no_grad():
    weights = gqa.attention_weights(INPUTS.unsqueeze(0))[0]  # (4, 6, 6)
print([h // 2 for h in range(4)])
# Expected output:
# [0, 0, 1, 1]
print(weights[:, -1])  # what "step" attends to, in each head
# Expected output:
# tensor([[0.1770, 0.1649, 0.1648, 0.1644, 0.1636, 0.1654],
#         [0.1808, 0.1668, 0.1671, 0.1593, 0.1682, 0.1578],
#         [0.1722, 0.1556, 0.1557, 0.1750, 0.1690, 0.1725],
#         [0.1534, 0.1824, 0.1822, 0.1579, 0.1625, 0.1617]])

# %%
# The four heads, on one colour scale. Sharing keys changes what each head can look
# at, not how it weighs it.

titles = [f"query head {h + 1}, kv head {h // 2 + 1}" for h in range(4)]
head_grid(
    weights,
    TOKENS,
    TOKENS,
    titles=titles,
    ncols=2,
    allowed="causal",
    suptitle="Grouped-query attention: 4 query heads, 2 key/value heads",
)
plt.show()
