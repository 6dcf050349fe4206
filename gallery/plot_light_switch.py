"""
Another sentence: I can't find the light switch
===============================================

The same simple self-attention, on a second sentence with its own made-up
embeddings. Comparing the two sentences shows that a token does not always attend
most to itself: a dot product rewards long embeddings as well as similar ones.
"""

# %%
# Each token of "I can't find the light switch" is its own query, key and value.
# The scores of the query "light" (row 4) are its dot products with the six
# embeddings; a softmax turns them into weights, and the weighted sum of the
# embeddings is its context vector.

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import Rectangle

from attention import (
    INPUTS,
    SWITCH_INPUTS,
    SWITCH_TOKENS,
    TOKENS,
    attention_weights,
    scores_for_all,
)
from attention.figures import heatmap

torch.manual_seed(123)
torch.set_printoptions(precision=4, sci_mode=False)

scores = scores_for_all(SWITCH_INPUTS)  # (6, 6)
weights = attention_weights(scores)  # (6, 6), rows sum to 1
context = weights @ SWITCH_INPUTS  # (6, 3)

print("scores of light: ", scores[4])
# Expected output:
# scores of light:  tensor([0.9046, 0.5701, 0.6006, 0.7121, 0.7818, 0.5065])
print("weights of light:", weights[4])
# Expected output:
# weights of light: tensor([0.2068, 0.1480, 0.1526, 0.1706, 0.1829, 0.1389])
print("context of light:", context[4])
# Expected output:
# context of light: tensor([0.3039, 0.5600, 0.5155])

# %%
# "light" gives its largest weight to "I" (0.2068), not to itself (0.1829). By
# angle alone, measured by the cosine similarity, "light" is closest to itself,
# as every vector is; but the dot product also grows with length, and the
# embedding of "I" is longer than that of "light".

print("cosine with light:", torch.cosine_similarity(SWITCH_INPUTS[4], SWITCH_INPUTS, dim=-1))
# Expected output:
# cosine with light: tensor([0.9785, 0.7679, 0.7794, 0.7698, 1.0000, 0.7118])
print("lengths:", SWITCH_INPUTS.norm(dim=-1))
# Expected output:
# lengths: tensor([1.0455, 0.8396, 0.8715, 1.0462, 0.8842, 0.8048])

# %%
# Which token does each word attend to most, in both sentences? In "Your
# journey starts with one step" the long embedding of "journey" draws three
# other words; in the light-switch sentence "I" draws "can't" and "light", and
# "the" draws "switch".

journey_weights = attention_weights(scores_for_all(INPUTS))
journey_top = journey_weights.argmax(dim=-1)
switch_top = weights.argmax(dim=-1)
for tokens, top in ((TOKENS, journey_top), (SWITCH_TOKENS, switch_top)):
    print(
        ", ".join(
            f"{query} -> {tokens[key]}" for query, key in zip(tokens, top.tolist(), strict=True)
        )
    )
# Expected output:
# Your -> Your, journey -> journey, starts -> journey, with -> journey, one -> starts, step -> journey
# I -> I, can't -> I, find -> find, the -> the, light -> I, switch -> the
assert journey_top.tolist() == [0, 1, 1, 1, 2, 1]
assert switch_top.tolist() == [0, 0, 2, 3, 0, 3]

# %%
# Both weight matrices side by side, on one colour scale, with each row's
# largest weight outlined. A token attends most to itself only where the outline
# sits on the diagonal.

fig, axes = plt.subplots(1, 2, figsize=(10, 5.5), layout="constrained")
vmax = max(journey_weights.max().item(), weights.max().item())
panels = (
    (axes[0], journey_weights, TOKENS, journey_top, "Your journey starts with one step"),
    (axes[1], weights, SWITCH_TOKENS, switch_top, "I can't find the light switch"),
)
for ax, w, tokens, top, title in panels:
    heatmap(w, tokens, tokens, ax=ax, vmax=vmax, title=title)
    for row, col in enumerate(top.tolist()):
        ax.add_patch(
            Rectangle(
                (col - 0.5, row - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2.5, zorder=3
            )
        )
axes[1].set_ylabel(None)
fig.suptitle(
    "Attention weights of the two sentences, each row's largest weight outlined in red;\n"
    # Typographic quotes: sphinx-gallery copies the title into the image's alt
    # attribute unescaped, where a straight quote would end the attribute.
    "outlines on the diagonal (“Your”, “journey”; “I”, “find”, “the”) mark tokens "
    "that attend most to themselves."
)
plt.show()
