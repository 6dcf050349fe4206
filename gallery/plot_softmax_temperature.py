"""
Softmax temperature and saturation
==================================

Multiplying the scores by a factor before the softmax (or dividing them by a
temperature) changes how sharp the attention weights are. Small factors spread the
weight evenly; large ones pile it onto the largest score until the softmax is
almost one-hot. This is why attention divides its scores by :math:`\\sqrt{d_k}`.
"""

# %%
# We take the scores of the query "journey" against the six tokens of "Your
# journey starts with one step" and multiply them by a few factors before the
# softmax. Dividing by a temperature :math:`T` is the same as multiplying by
# :math:`1/T`.

import math

import matplotlib.pyplot as plt
import torch

from attention import INPUTS, TOKENS, scores_for_query

torch.manual_seed(123)
torch.set_printoptions(precision=4, sci_mode=False)

scores = scores_for_query(INPUTS[1], INPUTS)  # (6,): the scores of "journey"
print("scores of journey:", scores)
# Expected output:
# scores of journey: tensor([0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865])

factors = torch.tensor([0.25, 1.0, 4.0, 16.0, 64.0])
weights = torch.softmax(factors[:, None] * scores, dim=-1)  # (5, 6): one row per factor
print(weights)
# Expected output:
# tensor([[0.1605, 0.1837, 0.1828, 0.1561, 0.1509, 0.1659],
#         [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581],
#         [0.0489, 0.4253, 0.3932, 0.0314, 0.0182, 0.0830],
#         [0.0001, 0.5772, 0.4218, 0.0000, 0.0000, 0.0008],
#         [0.0000, 0.7781, 0.2219, 0.0000, 0.0000, 0.0000]])

# %%
# A factor of 4 is a temperature of 0.25: the same weights either way.

torch.testing.assert_close(torch.softmax(scores / 0.25, dim=-1), weights[2])

# %%
# One bar chart per factor. At 0.25 the weights are nearly uniform (1/6 each);
# at 4 "journey" and "starts", the two largest scores, take most of the weight; at
# 64 the softmax is well on its way to putting all of it on "journey".

fig, axes = plt.subplots(1, len(factors), figsize=(12, 3.4), sharey=True, layout="constrained")
for ax, factor, row in zip(axes, factors.tolist(), weights, strict=True):
    colors = ["tab:orange" if i == row.argmax() else "tab:blue" for i in range(len(TOKENS))]
    ax.bar(range(len(TOKENS)), row.tolist(), color=colors)
    ax.axhline(1 / len(TOKENS), color="grey", linestyle=":", linewidth=1)
    ax.set_xticks(range(len(TOKENS)), TOKENS, rotation=45, ha="right", rotation_mode="anchor")
    ax.set_title(f"scores × {factor:g}")
    ax.set_ylim(0, 1)
axes[0].set_ylabel("attention weight")
fig.suptitle(
    # Typographic quotes: sphinx-gallery copies the title into the image's alt
    # attribute unescaped, where a straight quote would end the attribute.
    "Weights of the query “journey” for growing score factors: "
    "from nearly uniform (dotted line, 1/6) to almost all on one token."
)
plt.show()

# %%
# The largest weight and the entropy :math:`-\sum_j w_j \log w_j` of each row
# measure the same thing from two sides: the largest weight climbs from 1/6
# towards 1, the entropy falls from :math:`\log 6 \approx 1.7918` (uniform) towards
# 0 (one-hot). ``torch.special.entr`` computes :math:`-w \log w`, and 0 for
# :math:`w = 0`, where the formula itself would give ``nan``.

largest = weights.max(dim=-1).values
print("largest weight:", largest)
# Expected output:
# largest weight: tensor([0.1837, 0.2379, 0.4253, 0.5772, 0.7781])
entropy = torch.special.entr(weights).sum(dim=-1)
print("entropy:", entropy)
# Expected output:
# entropy: tensor([1.7889, 1.7460, 1.2664, 0.6884, 0.5294])
print("entropy of uniform weights, log 6:", torch.tensor(6.0).log())
# Expected output:
# entropy of uniform weights, log 6: tensor(1.7918)

# %%
# The same two measures over a continuous range of factors, from 0.01 to 1000.
# The entropy lingers near :math:`\log 2` around a factor of 16: "journey"
# (1.4950) and "starts" (1.4754) score almost the same, so they split the weight
# between them until the factor is large enough to blow up their small
# difference of 0.0196.

sweep = torch.logspace(-2, 3, 201)
sweep_weights = torch.softmax(sweep[:, None] * scores, dim=-1)  # (201, 6)
sweep_largest = sweep_weights.max(dim=-1).values
sweep_entropy = torch.special.entr(sweep_weights).sum(dim=-1)
# matplotlib takes NumPy arrays; .numpy() hands them over without a copy.
sweep, sweep_largest, sweep_entropy = sweep.numpy(), sweep_largest.numpy(), sweep_entropy.numpy()

fig, (ax_max, ax_entropy) = plt.subplots(1, 2, figsize=(10, 4.3), layout="constrained")
ax_max.plot(sweep, sweep_largest, color="tab:orange")
ax_max.plot(factors.numpy(), largest.numpy(), "o", color="tab:orange")
ax_max.axhline(1 / len(TOKENS), color="grey", linestyle=":", linewidth=1)
ax_max.axhline(1.0, color="grey", linestyle="--", linewidth=1)
ax_max.set_ylabel("largest weight")
ax_max.set_ylim(0, 1.05)
ax_max.set_title("largest weight: 1/6 (uniform) to 1 (one-hot)")
ax_entropy.plot(sweep, sweep_entropy, color="tab:purple")
ax_entropy.plot(factors.numpy(), entropy.numpy(), "o", color="tab:purple")
ax_entropy.axhline(math.log(len(TOKENS)), color="grey", linestyle=":", linewidth=1)
ax_entropy.axhline(math.log(2), color="grey", linestyle="-.", linewidth=1)
ax_entropy.text(0.012, math.log(2) + 0.03, "log 2: a two-way split", color="dimgrey")
ax_entropy.set_ylabel("entropy (nats)")
ax_entropy.set_ylim(0, 1.95)
ax_entropy.set_title("entropy: log 6 (uniform) to 0 (one-hot)")
for ax in (ax_max, ax_entropy):
    ax.set_xscale("log")
    ax.set_xlabel("score factor (1 / temperature)")
    ax.grid(alpha=0.3)
fig.suptitle(
    "As the score factor grows, the softmax saturates:\n"
    "the largest weight of “journey” rises to 1 and the entropy falls to 0."  # alt: see above
)
plt.show()

# %%
# At the far end of the sweep the weights are one-hot to four decimals; at the
# near end each is within a thousandth of uniform, 1/6 = 0.1667.

print("factor 1000:", sweep_weights[-1])
# Expected output:
# factor 1000: tensor([0.0000, 1.0000, 0.0000, 0.0000, 0.0000, 0.0000])
print("factor 0.01:", sweep_weights[0])
# Expected output:
# factor 0.01: tensor([0.1664, 0.1673, 0.1673, 0.1662, 0.1660, 0.1667])
assert torch.allclose(sweep_weights[0], torch.full((6,), 1 / 6), atol=1e-3, rtol=0)

# %%
# Scaled dot-product attention divides its scores by :math:`\sqrt{d_k}`, a
# temperature that grows with the size of the keys. Without it, scores of
# high-dimensional vectors are large, the softmax sits at the saturated right end
# of these curves, and its gradients all but vanish.
#
# sphinx_gallery_thumbnail_number = 2
