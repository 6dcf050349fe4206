"""
A draft tree and its attention mask
===================================

In speculative decoding a small draft model guesses several continuations at once,
as a tree, and the target model checks the whole tree in one call. Each guess may
look at the cache, at its ancestors and at itself, never at a sibling branch. This
example draws a small draft tree after "Your journey starts" beside its mask.
"""

# %%
# ``parents[i]`` is the index of node ``i``'s parent, or ``-1`` for a guess that
# follows the last accepted token. Two guesses for the fourth token, "with" and "at";
# two after "with"; one after "at"; and "step" after "with one".
# :func:`~attention.serving.tree.tree_attention_mask` gives the mask, and
# :func:`~attention.serving.tree.tree_positions` each guess's position: its depth after the
# three cached tokens. Siblings share a position, as they would in their own branches.

import matplotlib.pyplot as plt
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

from attention.figures.style import CURRENT, INK, MASKED_COLOR
from attention.serving import tree_attention_mask, tree_positions

cached = ["Your", "journey", "starts"]
words = ["with", "at", "one", "a", "home", "step"]
parents = [-1, -1, 0, 0, 1, 2]
mask = tree_attention_mask(parents)
positions = tree_positions(parents, cache_length=len(cached))
print(mask.int())
# Expected output:
# tensor([[1, 0, 0, 0, 0, 0],
#         [0, 1, 0, 0, 0, 0],
#         [1, 0, 1, 0, 0, 0],
#         [1, 0, 0, 1, 0, 0],
#         [0, 1, 0, 0, 1, 0],
#         [1, 0, 1, 0, 0, 1]], dtype=torch.int32)
print("positions:", positions.tolist())
# Expected output:
# positions: [3, 3, 4, 4, 4, 5]

# %%
# Left, the tree: each guess one column to the right of its parent, at its position.
# Right, the mask over the tree's six guesses: a row is a query, a column a key. Row
# "step" sees "with", "one" and itself, the branch "with one step", and nothing of
# "at home". Every guess also sees the three cached tokens, left out here.

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2), layout="constrained")
rows = {0: 3.0, 1: 0.5, 2: 3.5, 3: 2.5, 4: 0.5, 5: 3.5}  # height of each guess
left.text(2, 2.0, "starts", ha="center", va="center", color=INK, fontsize=11)
for node, word in enumerate(words):
    x, y = int(positions[node]), rows[node]
    parent = parents[node]
    start = (2, 2.0) if parent == -1 else (int(positions[parent]), rows[parent])
    left.annotate(
        "",
        xy=(x - 0.28, y),
        xytext=(start[0] + 0.28, start[1]),
        arrowprops={"arrowstyle": "->", "color": INK},
    )
    left.text(
        x,
        y,
        word,
        ha="center",
        va="center",
        color="white",
        fontsize=11,
        bbox={"boxstyle": "round", "facecolor": CURRENT, "edgecolor": CURRENT},
    )
left.set(xlim=(1.5, 5.6), ylim=(-0.2, 4.2), xlabel="position", yticks=[])
left.set_xticks([2, 3, 4, 5])
left.set_title('the draft tree after "starts"')
for side in ("top", "right", "left"):
    left.spines[side].set_visible(False)

right.imshow(mask.int(), cmap=ListedColormap([MASKED_COLOR, CURRENT]), vmin=0, vmax=1)
right.set_xticks(range(len(words)), words)
right.set_yticks(range(len(words)), words)
right.set(xlabel="key (guess)", ylabel="query (guess)")
right.set_title("tree_attention_mask(parents)")
fig.legend(
    handles=[
        Patch(color=CURRENT, label="attends: itself and its ancestors"),
        Patch(color=MASKED_COLOR, label="hidden: another branch"),
    ],
    loc="outside lower center",
    ncols=2,
    frameon=False,
)
fig.suptitle("A draft tree of six guesses and the mask that keeps its branches apart")
plt.show()
