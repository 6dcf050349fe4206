"""
Attention learns to look at the previous token
==============================================

Train one attention head, for a few seconds, to output at every position the token
*before* it. Its weights go from diffuse to a bright line just below the diagonal,
each token attending to its predecessor, but only if the model knows where each token
sits.
"""

# %%
# The task
# --------
# Sequences of 8 random tokens from a vocabulary of 16. The target at position
# :math:`t` is the token at position :math:`t - 1`; position 0 has no predecessor,
# so its target is ignored (``-100``, the ``ignore_index`` of ``cross_entropy``).

import math

import matplotlib.pyplot as plt
import torch
from torch import nn
from torch.nn import functional as F

from attention import Head
from attention.figures import head_grid

torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

VOCAB, T = 16, 8  # vocabulary size, tokens per sequence


def make_batch(batch_size):
    """Random sequences and their targets, the previous token (-100 at position 0)."""
    tokens = torch.randint(VOCAB, (batch_size, T))
    targets = tokens.roll(1, dims=1)  # targets[:, t] = tokens[:, t - 1]
    targets[:, 0] = -100
    return tokens, targets


tokens, targets = make_batch(2)
print(tokens[0])
# Expected output:
# tensor([12, 15,  5,  0,  3, 11,  3,  7])
print(targets[0])
# Expected output:
# tensor([-100,   12,   15,    5,    0,    3,   11,    3])
assert tokens[0].tolist() == [12, 15, 5, 0, 3, 11, 3, 7]
assert targets[0].tolist() == [-100, 12, 15, 5, 0, 3, 11, 3]

# %%
# The model
# ---------
# A token embedding, plus a learned position embedding, then one causal attention
# head (``attention.Head``, dropout 0), then a linear layer that turns the head's
# output into scores for the 16 possible tokens.
#
# Why the position embedding? Attention by itself is *permutation-equivariant*:
# weights come from dot products of contents, so shuffling the visible tokens
# shuffles the weights with them. A token's content says nothing about where it
# sits, so without positions the head cannot tell its predecessor from any other
# earlier token that looks the same to it. Adding a vector that depends on the
# position gives the queries and keys something to match on: "I am at position
# :math:`t`, I look for position :math:`t - 1`".


class PreviousTokenModel(nn.Module):
    def __init__(self, n_embd=32, head_size=16, positions=True):
        super().__init__()
        self.token_embedding = nn.Embedding(VOCAB, n_embd)
        self.position_embedding = nn.Embedding(T, n_embd) if positions else None
        self.head = Head(n_embd, head_size, block_size=T, dropout=0.0)
        self.to_logits = nn.Linear(head_size, VOCAB)

    def embed(self, tokens):  # (B, T) -> (B, T, n_embd)
        x = self.token_embedding(tokens)
        if self.position_embedding is not None:
            x = x + self.position_embedding(torch.arange(tokens.shape[1]))
        return x

    def attention_weights(self, tokens):  # (B, T) -> (B, T, T)
        return self.head.attention_weights(self.embed(tokens))

    def forward(self, tokens):  # (B, T) -> (B, T, VOCAB)
        return self.to_logits(self.head(self.embed(tokens)))


def previous_token_weight(weights):
    """Average weight that positions 1..T-1 put on the position just before them."""
    return weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean().item()


# %%
# One sequence to watch. It holds the token 7 twice in a row: a model that matched
# on content alone could not tell the two apart.

example = torch.tensor([[3, 14, 7, 7, 0, 11, 5, 9]])
labels = [str(token) for token in example[0].tolist()]
model = PreviousTokenModel()
with torch.no_grad():
    before = model.attention_weights(example)[0]  # (T, T)

# %%
# Training
# --------
# Adam, 100 steps of 64 sequences each. Every 5 steps, measure how much weight the
# head puts on the previous token, on a fixed batch of sequences it never trains on.

probe, _ = make_batch(256)


def train(model, steps=100, batch_size=64, lr=5e-3):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses, checkpoints = [], []
    for step in range(steps + 1):
        if step % 5 == 0:
            with torch.no_grad():
                checkpoints.append((step, previous_token_weight(model.attention_weights(probe))))
        if step == steps:
            break
        tokens, targets = make_batch(batch_size)
        logits = model(tokens)  # (B, T, VOCAB)
        loss = F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1), ignore_index=-100)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses, checkpoints


losses, checkpoints = train(model)

# %%
# The exact losses depend on the machine (floating-point rounding changes the
# trajectory a little), so the script checks what must hold instead of exact values.
# It starts near :math:`\ln 16 \approx 2.77`, the loss of a uniform guess among 16
# tokens, and ends near 0. On fresh sequences, the model names the previous token
# almost every time.

print(f"loss: first step {losses[0]:.1f}, last step {losses[-1]:.1f}")
# Expected output:
# loss: first step 2.8, last step 0.0
assert abs(losses[0] - math.log(VOCAB)) < 0.3
assert losses[-1] < 0.2 * losses[0]

tokens, targets = make_batch(1000)
with torch.no_grad():
    predictions = model(tokens).argmax(dim=-1)  # (B, T)
accuracy = (predictions[:, 1:] == targets[:, 1:]).float().mean().item()
print(f"accuracy on fresh sequences > 0.95: {accuracy > 0.95}")
# Expected output:
# accuracy on fresh sequences > 0.95: True
assert accuracy > 0.95

# %%
# And the attention itself: before training, the weight on the previous token is
# about what spreading each row evenly would give,
# :math:`\frac{1}{7}\sum_{t=1}^{7} \frac{1}{t+1} \approx 0.25`. After training it is
# close to 1.

with torch.no_grad():
    after = model.attention_weights(example)[0]  # (T, T)
    on_previous = previous_token_weight(model.attention_weights(probe))
evenly = sum(1 / (t + 1) for t in range(1, T)) / (T - 1)  # every row spread evenly
untrained = checkpoints[0][1]
print(f"weight on the previous token before training: {untrained:.2f}, evenly: {evenly:.2f}")
# Expected output:
# weight on the previous token before training: 0.22, evenly: 0.25
print(f"weight on the previous token after training > 0.8: {on_previous > 0.8}")
# Expected output:
# weight on the previous token after training > 0.8: True
assert checkpoints[0][1] < 0.5
assert on_previous > 0.8

# %%
# Without position embeddings
# ---------------------------
# The same model and training, minus the position embedding. It can still learn
# something from content and the causal mask alone (at position 1 the previous
# token is simply "the one that is not me"), but it cannot find the predecessor in
# general.

torch.manual_seed(0)
no_positions = PreviousTokenModel(positions=False)
losses_no_positions, checkpoints_no_positions = train(no_positions)
with torch.no_grad():
    predictions = no_positions(tokens).argmax(dim=-1)
    without = no_positions.attention_weights(example)[0]  # (T, T)
accuracy_no_positions = (predictions[:, 1:] == targets[:, 1:]).float().mean().item()
print(f"accuracy without positions < 0.7: {accuracy_no_positions < 0.7}")
# Expected output:
# accuracy without positions < 0.7: True
assert accuracy_no_positions < 0.7

# %%
# The picture
# -----------
# Rows are the tokens of the example sequence as queries, columns the tokens they
# attend to. Trained with positions, the head draws the sub-diagonal: each token
# looks at the one just before it, including the second 7, which looks at the first.
# Without positions the weights stay spread out: nothing tells the head which of
# the earlier tokens is the previous one.

fig = head_grid(
    torch.stack((before, after, without)),
    labels,
    labels,
    titles=["before training", "after training", "trained without positions"],
    allowed="causal",
    suptitle="A head trained to output the previous token learns to attend to it "
    "(the bright sub-diagonal),\nbut only if the model has position embeddings",
)
plt.show()

# %%
# How the pattern appears during training: the loss, and the weight the head puts
# on the previous token, for the model with and without position embeddings. The
# dotted line is the weight of spreading each row evenly.

uniform = sum(1 / (t + 1) for t in range(1, T)) / (T - 1)
fig, (loss_ax, weight_ax) = plt.subplots(1, 2, figsize=(9, 3.8), layout="constrained")
runs = [
    ("with position embeddings", "#1b9e77", losses, checkpoints),
    ("without position embeddings", "#d95f02", losses_no_positions, checkpoints_no_positions),
]
for label, colour, run_losses, run_checkpoints in runs:
    loss_ax.plot(range(1, len(run_losses) + 1), run_losses, color=colour, label=label)
    steps, weights = zip(*run_checkpoints, strict=True)
    weight_ax.plot(steps, weights, color=colour, marker="o", markersize=3, label=label)
loss_ax.set_yscale("log")
loss_ax.set_xlabel("training step")
loss_ax.set_ylabel("cross-entropy loss")
loss_ax.legend(fontsize=9)
weight_ax.axhline(uniform, color="0.4", linestyle=":", linewidth=1.2)
weight_ax.text(100, uniform - 0.02, "spread evenly", ha="right", va="top", color="0.4")
weight_ax.set_ylim(0, 1.02)
weight_ax.set_xlabel("training step")
weight_ax.set_ylabel("weight on the previous token")
fig.suptitle(
    "With position embeddings the loss drops to near zero as the head learns to attend "
    "to the previous token;\nwithout them it stalls"
)
plt.show()

# sphinx_gallery_thumbnail_number = 1
