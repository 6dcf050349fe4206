"""
Attention logits grow; QK-norm holds them
=========================================

Train one attention head on the previous-token task, with and without QK-norm, and
watch the largest score a query gives a key, the largest logit of the softmax. Without
QK-norm it grows as long as training goes on, faster the higher the learning rate;
with it, it stays small.
"""

# %%
# The task and the model of the previous-token example: sequences of 8 random tokens
# from a vocabulary of 16, and at every position the target is the token before it.
# The head is a one-head ``GroupedQueryAttention``; QK-norm is two parts it can hold,
# ``q_norm`` and ``k_norm``: an RMS norm on every query and key before their dot product.

import matplotlib.pyplot as plt
import torch
from torch import nn
from torch.nn import functional as F

from attention import GroupedQueryAttention, RMSNorm, causal_mask

torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

VOCAB, T = 16, 8
ALLOWED = causal_mask(T)  # True where a query may attend


def make_batch(batch_size):
    tokens = torch.randint(VOCAB, (batch_size, T))
    targets = tokens.roll(1, dims=1)  # the previous token
    targets[:, 0] = -100  # position 0 has none; cross_entropy skips it
    return tokens, targets


class PreviousToken(nn.Module):
    def __init__(self, qk_norm):
        super().__init__()
        self.token_embedding = nn.Embedding(VOCAB, 32)
        self.position_embedding = nn.Embedding(T, 32)
        norms = {"q_norm": RMSNorm(16), "k_norm": RMSNorm(16)} if qk_norm else {}
        self.attn = GroupedQueryAttention(
            32, 16, context_length=T, num_heads=1, num_kv_heads=1, **norms
        )
        self.to_logits = nn.Linear(16, VOCAB)

    def embed(self, tokens):
        return self.token_embedding(tokens) + self.position_embedding(torch.arange(T))

    def forward(self, tokens):
        return self.to_logits(self.attn(self.embed(tokens)))


def largest_logit(attn, x):
    """The largest scaled score of the single head, over the keys a query may see."""
    q, k = attn.W_query(x), attn.W_key(x)
    if attn.q_norm is not None:
        q, k = attn.q_norm(q), attn.k_norm(k)
    scores = q @ k.transpose(1, 2) / attn.head_dim**0.5
    return scores.masked_fill(~ALLOWED, -torch.inf).max().item()


def train(qk_norm, lr, steps=100):
    torch.manual_seed(0)
    model = PreviousToken(qk_norm)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    largest = []
    for _ in range(steps):
        tokens, targets = make_batch(32)
        loss = F.cross_entropy(model(tokens).view(-1, VOCAB), targets.view(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            largest.append(largest_logit(model.attn, model.embed(tokens)))
    return largest


# %%
# Two learning rates: the previous-token example's 0.005, and ten times that. The
# exact logits depend on the machine's arithmetic, so the script prints what holds on
# every machine.

runs = {(lr, qk_norm): train(qk_norm, lr) for lr in (0.005, 0.05) for qk_norm in (False, True)}
for lr in (0.005, 0.05):
    plain, normed = max(runs[lr, False]), max(runs[lr, True])
    print(f"learning rate {lr}: plain's largest logit over 3 times QK-norm's:", plain > 3 * normed)
# Expected output:
# learning rate 0.005: plain's largest logit over 3 times QK-norm's: True
# learning rate 0.05: plain's largest logit over 3 times QK-norm's: True
print("QK-norm's largest logit below 30 at both rates:", max(runs[0.05, True]) < 30)
# Expected output:
# QK-norm's largest logit below 30 at both rates: True

# %%
# The largest logit at every step, on a logarithmic axis. A softmax over logits in
# the hundreds is one-hot, and its gradient is almost zero.

fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
colours = {False: "#d95f02", True: "#1b9e77"}
for (lr, qk_norm), largest in runs.items():
    ax.plot(
        range(1, len(largest) + 1),
        largest,
        color=colours[qk_norm],
        linestyle="-" if lr == 0.05 else "--",
        label=f"{'QK-norm' if qk_norm else 'plain'}, learning rate {lr}",
    )
ax.set_yscale("log")
ax.set_xlabel("training step")
ax.set_ylabel("largest attention logit")
ax.legend(fontsize=9)
ax.set_title("Without QK-norm the largest logit keeps growing; with it, it stays small")
plt.show()
