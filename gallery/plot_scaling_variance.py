"""
Why divide by sqrt(d_k)
=======================

The dot product of two random vectors with :math:`d_k` independent standard normal
entries has variance :math:`d_k`: the longer the keys, the larger the scores, and
the closer the softmax comes to one-hot. Dividing the scores by
:math:`\\sqrt{d_k}` brings their variance back to 1 whatever the size of the keys.
"""

# %%
# For each key size :math:`d_k` from 2 to 1024 we draw 500 random queries, each
# with 8 random keys, all with ``torch.randn`` entries, as freshly initialised
# queries and keys roughly are. That gives 4000 scores :math:`q \cdot k` per size,
# and 500 rows of 8 scores to put through a softmax.

import matplotlib.pyplot as plt
import torch

torch.manual_seed(123)
torch.set_printoptions(precision=4, sci_mode=False)

sizes = [2**i for i in range(1, 11)]  # d_k = 2, 4, ..., 1024
num_queries, num_keys = 500, 8

variance = {"unscaled": [], "scaled": []}
largest = {"unscaled": [], "scaled": []}
for d_k in sizes:
    queries = torch.randn(num_queries, 1, d_k)
    keys = torch.randn(num_queries, num_keys, d_k)
    scores = (queries * keys).sum(dim=-1)  # (500, 8): each query against its 8 keys
    for name, s in (("unscaled", scores), ("scaled", scores / d_k**0.5)):
        variance[name].append(s.var().item())
        # The average over the 500 rows of the largest of the 8 weights in a row.
        largest[name].append(torch.softmax(s, dim=-1).max(dim=-1).values.mean().item())

# %%
# The table, rounded. Which exact numbers come out depends on the random draw, so
# the script does not hard-code them; it checks what must hold for any draw of
# this size: the unscaled variance is within 15% of :math:`d_k`, the scaled one
# within 15% of 1, and without scaling the softmax is close to one-hot for large
# keys while with scaling it is not.

print(" d_k  var(q.k)  var(q.k/sqrt(d_k))  max weight  max weight (scaled)")
# Expected output:
#  d_k  var(q.k)  var(q.k/sqrt(d_k))  max weight  max weight (scaled)
for i, d_k in enumerate(sizes):
    print(
        f"{d_k:4d}  {variance['unscaled'][i]:8.1f}  {variance['scaled'][i]:18.2f}"
        f"  {largest['unscaled'][i]:10.2f}  {largest['scaled'][i]:19.2f}"
    )
# Expected output:
#    2       1.9                0.95        0.40                 0.32
#    4       4.0                1.00        0.54                 0.35
#    8       8.2                1.03        0.66                 0.36
#   16      15.4                0.96        0.75                 0.35
#   32      31.2                0.97        0.82                 0.36
#   64      63.5                0.99        0.87                 0.36
#  128     129.6                1.01        0.92                 0.36
#  256     256.5                1.00        0.95                 0.37
#  512     521.1                1.02        0.95                 0.36
# 1024    1057.8                1.03        0.97                 0.37

for i, d_k in enumerate(sizes):
    assert abs(variance["unscaled"][i] - d_k) < 0.15 * d_k, (d_k, variance["unscaled"][i])
    assert abs(variance["scaled"][i] - 1) < 0.15, (d_k, variance["scaled"][i])
# Without scaling, the largest weight climbs towards 1 as the keys grow...
assert largest["unscaled"][0] < 0.6 and largest["unscaled"][-1] > 0.9
assert all(u > s for u, s in zip(largest["unscaled"], largest["scaled"], strict=True))
# ...with scaling it stays put, well between uniform (1/8) and one-hot (1).
assert max(largest["scaled"]) - min(largest["scaled"]) < 0.1
assert all(0.2 < w < 0.5 for w in largest["scaled"])

# %%
# On the left, the variance of the scores on log-log axes: the unscaled points
# follow the line :math:`d_k`, the scaled ones stay on 1. On the right, what that
# does to the softmax over a row of 8 keys: without scaling, one key takes almost
# all the weight once :math:`d_k` reaches a few hundred; with scaling the rows
# look the same at every size.

fig, (ax_var, ax_max) = plt.subplots(1, 2, figsize=(10, 4.3), layout="constrained")
ax_var.plot(sizes, sizes, color="tab:red", linestyle="--", linewidth=1, label="$d_k$ (expected)")
ax_var.plot(sizes, variance["unscaled"], "o", color="tab:red", label=r"$q \cdot k$")
ax_var.axhline(1.0, color="tab:blue", linestyle="--", linewidth=1, label="1 (expected)")
ax_var.plot(sizes, variance["scaled"], "s", color="tab:blue", label=r"$q \cdot k\,/\,\sqrt{d_k}$")
ax_var.set_xscale("log", base=2)
ax_var.set_yscale("log", base=2)
ax_var.set_ylabel("variance of the scores")
ax_var.set_title("variance of 4000 random scores")
ax_var.legend(loc="upper left")

ax_max.plot(sizes, largest["unscaled"], "o-", color="tab:red", label="unscaled")
ax_max.plot(sizes, largest["scaled"], "s-", color="tab:blue", label=r"scaled by $1/\sqrt{d_k}$")
ax_max.axhline(1 / num_keys, color="grey", linestyle=":", linewidth=1)
ax_max.text(2, 1 / num_keys + 0.02, "uniform: 1/8", color="dimgrey")
ax_max.axhline(1.0, color="grey", linestyle=":", linewidth=1)
ax_max.set_xscale("log", base=2)
ax_max.set_ylim(0, 1.05)
ax_max.set_ylabel("largest softmax weight (mean of 500 rows)")
ax_max.set_title("softmax over rows of 8 keys")
ax_max.legend(loc="center right")
for ax in (ax_var, ax_max):
    ax.set_xlabel("key size $d_k$")
    ax.grid(alpha=0.3)
fig.suptitle(
    "Scores of random vectors have variance $d_k$ and saturate the softmax as $d_k$ grows;\n"
    r"dividing them by $\sqrt{d_k}$ keeps their variance at 1 and the softmax soft."
)
plt.show()

# %%
# This is why :func:`attention.scaled_dot_product_weights` divides by
# ``keys.shape[-1] ** 0.5`` before its softmax: at initialisation, a saturated
# softmax passes almost no gradient to the keys it ignores, and training stalls.
