"""
RoPE scaling: each pair's wavelength against the original context
=================================================================

A model first trained on a shorter context, then extended, slows its rotary
embeddings down. For every pair of a head, the figure shows its *wavelength*, the
positions it takes to turn once, divided by the model's original context: before the
scaling (dashed) and after (solid). Pairs far below 1 went round their circle many
times during training and keep their speed; pairs above it never completed a turn,
and are slowed by the whole factor, so that the longer context stays within the
angles they saw; the pairs between are blended. Three released models, each with its
own scaling, from the package's table of models.
"""

# %%
# :func:`~attention.rope_frequencies` takes a model's ``rope_scaling``, the
# ``rope_parameters`` dictionary of its ``config.json``, and returns each pair's
# speed with the scaling, and the attention factor that multiplies cosines and sines.
# DeepSeek-V3 rotates only the decoupled part of its keys and queries.

import math

import matplotlib.pyplot as plt
import torch

from attention import MODELS, rope_frequencies

torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

curves = {}
for name in ("gpt-oss-20b", "Llama 4 Scout", "DeepSeek-V3"):
    model = MODELS[name]
    scaling = model.rope_scaling
    rotary_dim = model.qk_rope_head_dim or model.head_dim
    original = scaling["original_max_position_embeddings"]
    plain, _ = rope_frequencies(rotary_dim, model.rope_theta)
    scaled, attention_factor = rope_frequencies(rotary_dim, model.rope_theta, scaling)
    slowed = (plain / scaled).float()  # 1: kept, the factor: fully interpolated
    kept = int(torch.isclose(slowed, torch.tensor(1.0)).sum())
    full = int(torch.isclose(slowed, torch.tensor(scaling["factor"])).sum())
    print(
        f"{name}: {scaling['rope_type']} x{scaling['factor']:g} over {original:,}; "
        f"{len(slowed)} pairs: {kept} kept, {full} slowed {scaling['factor']:g} times; "
        f"attention factor {attention_factor:.4f}"
    )
    curves[name] = (2 * math.pi / plain / original, 2 * math.pi / scaled / original)
# Expected output:
# gpt-oss-20b: yarn x32 over 4,096; 32 pairs: 9 kept, 14 slowed 32 times; attention factor 1.3466
# Llama 4 Scout: llama3 x8 over 8,192; 64 pairs: 29 kept, 29 slowed 8 times; attention factor 1.0000
# DeepSeek-V3: yarn x40 over 4,096; 32 pairs: 11 kept, 9 slowed 40 times; attention factor 1.0000

# %%
# The pairs of each head run from the fastest (left) to the slowest (right), spread
# over the same width whatever the head's size. The horizontal line is the original
# context: a pair above it never turned once in training. YaRN (gpt-oss, DeepSeek-V3)
# starts to blend at pairs that turn ``beta_fast`` times in the original context, far
# below the line; Llama 3.1's rule (Llama 4 Scout) at ``high_freq_factor`` turns.
# DeepSeek-V3's attention factor is 1: it puts YaRN's correction on the softmax scale
# instead, through ``mscale_all_dim``.

fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
for (name, (before, after)), color in zip(curves.items(), ["C0", "C1", "C2"], strict=True):
    where = torch.linspace(0, 1, len(before))
    ax.plot(where, before, color=color, lw=0.8, ls="--")
    ax.plot(where, after, color=color, lw=2.2, label=name)
ax.axhline(1.0, color="grey", lw=0.8)
ax.text(0.01, 1.3, "original context", color="grey")
ax.set(
    yscale="log",
    xlabel="pair, fastest to slowest (fraction of the head)",
    ylabel="wavelength / original context",
    title="RoPE scaling of three released models (dashed: before)",
)
ax.legend(loc="upper left")
plt.show()
