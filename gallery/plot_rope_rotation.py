"""
The rotation of rotary embeddings
=================================

Rotary position embeddings (RoPE) turn each pair of a query's or key's features by an
angle proportional to the token's position. Pairs turn at different speeds, from one
radian per token down to a tiny fraction of one.
"""

# %%
# ``apply_rope`` rotates a vector at each position. The point (1, 0) in a head of
# size 2 turns by one radian per position, and keeps its length.

import matplotlib.pyplot as plt
import torch

from attention import apply_rope

torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

point = torch.tensor([1.0, 0.0]).expand(8, 2)  # the same point at positions 0..7
rotated = apply_rope(point)
print(rotated[:3])
# Expected output:
# tensor([[ 1.0000,  0.0000],
#         [ 0.5403,  0.8415],
#         [-0.4161,  0.9093]])
print(torch.allclose(rotated.norm(dim=-1), torch.ones(8)))
# Expected output:
# True

# %%
# In a head of size 8 there are four pairs, with speeds ``10000 ** (-2i / 8)``. The
# figure follows the first feature of each pair of a vector of ones over 40
# positions: the first pair spins, the last barely moves.

x = torch.ones(40, 8)
rotated = apply_rope(x)  # (40, 8), half-split layout: pair i is features i and i + 4
speeds = 10000.0 ** (-torch.arange(0, 8, 2) / 8)
print(speeds)
# Expected output:
# tensor([1.0000, 0.1000, 0.0100, 0.0010])

fig, ax = plt.subplots(figsize=(7, 3.5), layout="constrained")
for i in range(4):
    ax.plot(rotated[:, i], marker=".", label=f"pair {i + 1}: {speeds[i]:.3f} rad per token")
ax.set(xlabel="position", ylabel="first feature of the pair")
ax.grid(True, alpha=0.3)
ax.legend(loc="lower left", fontsize="small")
fig.suptitle("RoPE: each pair of features turns at its own speed")
plt.show()
