"""
Scaled dot-product attention, drawn
===================================

"Attention Is All You Need" draws scaled dot-product attention as a chain of five
steps: MatMul, Scale, Mask, SoftMax, MatMul. The same computation is a handful of
matrix products. Both pictures below are drawn from the shapes of the running
example, and the shapes printed here come from a real attention module.
"""

# %%
# A causal attention head with the book's sizes: six tokens of
# "Your journey starts with one step", embeddings of :math:`d_\text{in} = 3`, and
# queries, keys and values of :math:`d_\text{out} = d_k = 2`. Each step of the chain,
# computed by hand:

import matplotlib.pyplot as plt
import torch

from attention import INPUTS, CausalAttention
from attention.figures import matrix_form, scaled_dot_product_diagram

torch.manual_seed(123)
torch.set_printoptions(precision=4, sci_mode=False)

head = CausalAttention(d_in=3, d_out=2, context_length=6, dropout=0.0)
with torch.no_grad():
    q, k, v = head.W_query(INPUTS), head.W_key(INPUTS), head.W_value(INPUTS)  # (6, 2) each
    scores = q @ k.T  # MatMul
    scaled = scores / k.shape[-1] ** 0.5  # Scale
    masked = scaled.masked_fill(head.mask[:6, :6], float("-inf"))  # Mask
    weights = torch.softmax(masked, dim=-1)  # SoftMax
    output = weights @ v  # MatMul
for name, tensor in [("Q", q), ("K", k), ("V", v), ("scores", scores), ("weights", weights)]:
    print(f"{name:8} {tuple(tensor.shape)}")
print(f"{'output':8} {tuple(output.shape)}")
# Expected output:
# Q        (6, 2)
# K        (6, 2)
# V        (6, 2)
# scores   (6, 6)
# weights  (6, 6)
# output   (6, 2)

# %%
# The five steps are exactly what the module computes in one call:

with torch.no_grad():
    print("same as the module:", torch.allclose(output, head(INPUTS.unsqueeze(0))[0]))
# Expected output:
# same as the module: True

# %%
# The paper's picture, read from the bottom up. Every arrow between the boxes
# carries one score per pair of tokens, a (6, 6) matrix; only the last product, with
# V, returns to one row of 2 numbers per token. The mask is optional: an encoder
# leaves it out.

scaled_dot_product_diagram(
    num_tokens=6,
    d_k=2,
    # A long title is wrapped to the figure's width; it is also the image's alt text.
    title="Scaled dot-product attention, bottom to top: MatMul, Scale, Mask (opt.), "
    "SoftMax, MatMul, with each arrow's shape for 6 tokens and d_k = 2",
)
plt.show()

# %%
# The same computation as matrix products, one cell per number: the inputs are
# projected to Q, K and V, Q meets K in the scores, the masked softmax turns each
# row into weights, and the weights average the rows of V.

matrix_form(
    num_tokens=6,
    d_in=3,
    d_out=2,
    causal=True,
    title="Causal self-attention as matrix products: X (6, 3) to Q, K, V (6, 2),\n"
    "scores and masked weights (6, 6), context vectors (6, 2)",
)
plt.show()
