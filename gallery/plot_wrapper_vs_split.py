"""
Stacked heads or one split projection: the same thing
=====================================================

``MultiHeadAttentionWrapper`` runs separate heads, each with its own small
projections; ``MultiHeadAttention`` runs one large projection and splits its output
into heads. Stacking the heads' weight matrices turns the first into the second, with
exactly the same outputs.
"""

# %%
# Two heads, each a ``CausalAttention`` with ``d_out = 2``, on a batch of two copies
# of "Your journey starts with one step". The wrapper concatenates the heads'
# outputs, so each token gets ``2 * 2 = 4`` features.

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import Rectangle

from attention import INPUTS, MultiHeadAttention, MultiHeadAttentionWrapper
from attention.figures import heatmap

torch.manual_seed(123)
torch.set_printoptions(precision=4, sci_mode=False)

batch = torch.stack((INPUTS, INPUTS))  # (2, 6, 3)
wrapper = MultiHeadAttentionWrapper(3, 2, context_length=6, dropout=0.0, num_heads=2)
with torch.no_grad():
    stacked_out = wrapper(batch)  # (2, 6, 4)
print(stacked_out[0, 0])
# Expected output:
# tensor([-0.4519,  0.2216,  0.4772,  0.1063])

# %%
# ``MultiHeadAttention`` projects the input once with a ``(4, 3)`` matrix and reads
# output features 0-1 as head 1 and features 2-3 as head 2 (that is what its
# ``view(batch, num_tokens, num_heads, head_dim)`` does). So the fused weight matrix
# is the heads' ``(2, 3)`` matrices stacked on top of each other, and the output
# projection that mixes the heads becomes the identity, since the wrapper only
# concatenates them. ``MultiHeadAttention.from_wrapper`` builds exactly that.

split = MultiHeadAttention.from_wrapper(wrapper)
for name in ("W_query", "W_key", "W_value"):
    stacked = torch.cat([getattr(head, name).weight for head in wrapper.heads])
    assert torch.equal(getattr(split, name).weight, stacked)
print(split.W_query.weight.shape, split.num_heads, split.head_dim)
# Expected output:
# torch.Size([4, 3]) 2 2
assert split.W_query.weight.shape == (4, 3)
assert (split.num_heads, split.head_dim) == (2, 2)

# %%
# The two modules give the same output, and the same attention weights head by head.

with torch.no_grad():
    split_out = split(batch)
print(split_out[0, 0])
# Expected output:
# tensor([-0.4519,  0.2216,  0.4772,  0.1063])
torch.testing.assert_close(split_out, stacked_out)
with torch.no_grad():
    torch.testing.assert_close(split.attention_weights(batch), wrapper.attention_weights(batch))

# %%
# The picture: the two heads' query weights on the left, the fused ``W_query`` on
# the right, with each head's rows outlined in the head's colour. Rows are output
# features, columns the three input features. Nothing is added or changed: the
# fused matrix *is* the two small ones, one above the other.

head_colours = ("#1b9e77", "#7570b3")  # one colour per head, distinct from the cmap
head_weights = [head.W_query.weight.detach() for head in wrapper.heads]
fused = split.W_query.weight.detach()
limit = fused.abs().max().item()  # one symmetric colour scale for every panel
shared = dict(vmin=-limit, vmax=limit, cmap="RdBu_r", colorbar=False, fmt="{:+.2f}")
inputs = ["1", "2", "3"]  # the three input features (columns)

fig = plt.figure(figsize=(9, 4.6), layout="constrained")
grid = fig.add_gridspec(2, 3, width_ratios=[1.0, 0.3, 1.3])
for h, weight in enumerate(head_weights):
    ax = fig.add_subplot(grid[h, 0])
    xlabel = "input feature" if h == 1 else None
    heatmap(weight, ["out 1", "out 2"], inputs, ax=ax, xlabel=xlabel, ylabel=None, **shared)
    ax.set_title(f"head {h + 1}: W_query (2, 3)", color=head_colours[h], fontweight="bold")
    ax.tick_params(pad=6)  # room for the outline
    ax.add_patch(
        Rectangle((-0.5, -0.5), 3, 2, fill=False, edgecolor=head_colours[h], lw=4, clip_on=False)
    )

arrow_ax = fig.add_subplot(grid[:, 1])
arrow_ax.axis("off")
arrow_ax.annotate(
    "", xy=(1.0, 0.5), xytext=(0.0, 0.5), arrowprops=dict(arrowstyle="-|>", lw=2, color="0.3")
)
arrow_ax.text(0.5, 0.56, "torch.cat", ha="center", va="bottom", family="monospace")

fused_ax = fig.add_subplot(grid[:, 2])
rows = ["head 1, out 1", "head 1, out 2", "head 2, out 1", "head 2, out 2"]
heatmap(fused, rows, inputs, ax=fused_ax, xlabel="input feature", ylabel=None, **shared)
fused_ax.set_title("MultiHeadAttention: W_query (4, 3)", fontweight="bold")
fused_ax.tick_params(pad=6)
for h in range(2):
    fused_ax.add_patch(
        Rectangle(
            (-0.5, 2 * h - 0.5), 3, 2, fill=False, edgecolor=head_colours[h], lw=4, clip_on=False
        )
    )
fig.colorbar(fused_ax.images[0], ax=fused_ax, shrink=0.8, label="weight")
fig.suptitle(
    "The fused query projection of MultiHeadAttention is the two heads' query projections stacked"
)
plt.show()

# %%
# Computing both heads with one ``(4, 3)`` matrix product instead of two ``(2, 3)``
# ones is why real models use the split form: one large product keeps a GPU busy,
# many small ones leave it idle between launches. The trained
# ``MultiHeadAttention`` is more general, though: its learned ``out_proj`` mixes
# the heads' outputs, where the wrapper can only concatenate them.
