"""
How the decay makes the delta rule forget
=========================================

Gated DeltaNet multiplies its state by a decay ``alpha = exp(g)`` (``g <= 0``) before
every token writes. This example stores one key and its value, writes more and more
random pairs after it, and reads the first key back: how much of its value is left,
for several decays.
"""

# %%
# One head with Qwen3-Next's key size, from ``attention.MODELS``, and small values.
# The first token writes the pair we will ask for; every later token writes a random
# pair at full strength (``beta = 1``). The query of every token is the first key, so
# output ``t`` of :func:`~attention.gated_delta_rule` reads that key from the state
# after token ``t``: we get the whole history of one memory from a single call.

import math

import matplotlib.pyplot as plt
import torch

from attention import MODELS, gated_delta_rule

torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

dim_k = MODELS["Qwen3-Next 80B-A3B"].local.key_head_dim
dim_v, later, trials = 8, 300, 200  # value size, pairs after the first, repeats
shape = (trials, later + 1, 1)  # (batch, tokens, heads): one trial per sequence
keys = torch.randn(*shape, dim_k)
values = torch.randn(*shape, dim_v)
first_key = keys[:, :1].expand_as(keys)  # read the first key at every token
beta = torch.ones(shape)
print(f"key size {dim_k}, value size {dim_v}, {later} pairs after the first, {trials} trials")
# Expected output:
# key size 128, value size 8, 300 pairs after the first, 200 trials

# %%
# What comes back is ``S_tᵀ q``, with ``q`` the first key normalised and scaled by
# ``1/sqrt(dim_k)``, as the function does. Undoing that scale and projecting on the
# first value gives the fraction of that value still stored: 1 right after it was
# written. With no decay (``g = 0``), the later writes still wear it down, since each
# random key overlaps the first a little and the delta rule overwrites along it: by
# about ``1 - 1/dim_k`` per write, the last column. A decay multiplies that by
# ``alpha`` per token, ``exp(g * n)`` after ``n`` tokens. The other values, read back
# through the small overlaps of their keys, add noise; we average over the trials.

DECAYS = (0.0, -0.001, -0.01, -0.05)
first_value = values[:, :1, 0]  # (trials, 1, dim_v)
recall = {}
for g in DECAYS:
    out, _ = gated_delta_rule(first_key, keys, values, torch.full(shape, g), beta, chunk_size=64)
    read = out[:, :, 0] * math.sqrt(dim_k)  # (trials, tokens, dim_v)
    fraction = (read * first_value).sum(-1) / first_value.square().sum(-1)
    recall[g] = fraction.mean(0)  # the average over the trials
rows = [" tokens since " + "".join(f"{f'g = {g}':>12}" for g in DECAYS) + "  (1 - 1/dim_k)^n"]
for n in (0, 10, 100, 300):
    rows.append(
        f"{n:13} "
        + "".join(f"{recall[g][n].item():12.4f}" for g in DECAYS)
        + f"{(1 - 1 / dim_k) ** n:18.4f}"
    )
print("\n".join(rows))
# Expected output:
#  tokens since      g = 0.0  g = -0.001   g = -0.01   g = -0.05  (1 - 1/dim_k)^n
#             0       1.0000      1.0000      1.0000      1.0000            1.0000
#            10       0.9328      0.9236      0.8447      0.5686            0.9246
#           100       0.4426      0.3998      0.1593      0.0029            0.4564
#           300       0.1042      0.0759     -0.0026     -0.0046            0.0951

# %%
# The same, drawn, with the decay alone (``exp(g * n)``, dashed) for comparison: the
# decay sets how long a memory lasts, and the overlap of later keys erodes it on top.

fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
n = torch.arange(later + 1)
for g in DECAYS:
    (line,) = ax.plot(n, recall[g], lw=2, label=f"g = {g}")
    if g:
        ax.plot(n, torch.exp(g * n), ls="--", lw=1, color=line.get_color())
ax.set(
    xlabel="tokens written since the pair",
    ylabel="fraction of the value read back",
    ylim=(-0.05, 1.05),
    xlim=(0, later),
)
ax.set_title("Reading the first key back after more writes (dashed: the decay alone)")
ax.legend()
plt.show()

# %%
# Without a decay the memory still fades, at a rate set by the key size alone: a state
# of ``dim_k`` rows cannot keep many more than ``dim_k`` random keys apart. The decay
# is a second, learned rate on top: Gated DeltaNet computes ``g`` from each token, so
# a layer can hold on to a memory (``g`` near 0) or clear its state within a few tokens
# (a strongly negative ``g``), for instance where a new document begins.
