"""
Agreement with PyTorch's own attention
======================================

PyTorch ships attention too: the function ``scaled_dot_product_attention`` and the
module ``torch.nn.MultiheadAttention``. Given the same weights, they compute what
``CausalAttention`` and ``MultiHeadAttention`` compute, to the last few bits of a
float64, for every shape tried here.
"""

# %%
# The shapes are drawn at random from a seeded generator: a batch size, a number of
# heads, a head size and a number of tokens, sometimes fewer than the module's
# ``context_length`` (so the causal mask is cropped), sometimes with a bias in the
# query, key and value projections. Everything runs in float64, so that the only
# differences left are rounding, near float64's machine epsilon of
# :math:`2.2 \times 10^{-16}`.

import matplotlib.pyplot as plt
import torch
from torch import nn
from torch.nn import functional as F

from attention import CausalAttention, MultiHeadAttention

torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=False)

TOLERANCE = 1e-12


def random_case():
    """A random (batch, num_tokens, context_length, num_heads, head_dim, qkv_bias)."""
    batch = int(torch.randint(1, 5, ()))
    num_heads = int(torch.randint(1, 5, ()))
    head_dim = int(torch.randint(1, 9, ()))
    context_length = int(torch.randint(4, 17, ()))
    num_tokens = int(torch.randint(context_length // 2, context_length + 1, ()))
    qkv_bias = bool(torch.randint(0, 2, ()))
    return batch, num_tokens, context_length, num_heads, head_dim, qkv_bias


cases = [random_case() for _ in range(6)]
for number, (batch, num_tokens, context_length, num_heads, head_dim, qkv_bias) in enumerate(
    cases, start=1
):
    print(
        f"case {number}: B={batch} T={num_tokens} context_length={context_length} "
        f"num_heads={num_heads} head_dim={head_dim} qkv_bias={qkv_bias}"
    )
# Expected output:
# case 1: B=1 T=6 context_length=7 num_heads=4 head_dim=6 qkv_bias=True
# case 2: B=4 T=5 context_length=8 num_heads=4 head_dim=2 qkv_bias=False
# case 3: B=1 T=2 context_length=4 num_heads=4 head_dim=7 qkv_bias=False
# case 4: B=3 T=6 context_length=6 num_heads=2 head_dim=7 qkv_bias=False
# case 5: B=1 T=4 context_length=6 num_heads=2 head_dim=6 qkv_bias=False
# case 6: B=2 T=4 context_length=8 num_heads=1 head_dim=4 qkv_bias=True
assert cases == [
    (1, 6, 7, 4, 6, True),
    (4, 5, 8, 4, 2, False),
    (1, 2, 4, 4, 7, False),
    (3, 6, 6, 2, 7, False),
    (1, 4, 6, 2, 6, False),
    (2, 4, 8, 1, 4, True),
]

# %%
# ``CausalAttention`` against ``scaled_dot_product_attention``
# -------------------------------------------------------------
# The function takes queries, keys and values, so give it the module's own
# projections. ``is_causal=True`` applies the same mask as the module.
#
# Mind the polarity if you pass a boolean mask instead. The module's ``mask`` is
# ``True`` where a position is *hidden*, as in ``Tensor.masked_fill``; the boolean
# ``attn_mask`` of ``scaled_dot_product_attention`` is ``True`` where a position may
# be *attended to*. Hence ``attn_mask=~mask``.

single_head = []  # (ours, PyTorch's, largest difference) per case
for number, (batch, num_tokens, context_length, _, head_dim, qkv_bias) in enumerate(cases, 1):
    module = CausalAttention(head_dim, head_dim, context_length, 0.0, qkv_bias)
    module = module.double().eval()
    x = torch.randn(batch, num_tokens, head_dim, dtype=torch.float64)
    with torch.no_grad():
        ours = module(x)
        q, k, v = module.W_query(x), module.W_key(x), module.W_value(x)
        theirs = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        keep = ~module.mask[:num_tokens, :num_tokens]  # True = may attend
        with_mask = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    torch.testing.assert_close(with_mask, theirs, atol=TOLERANCE, rtol=0)
    difference = (ours - theirs).abs().max().item()
    single_head.append((ours, theirs, difference))
    print(f"case {number}: max |difference| < 1e-12: {difference < TOLERANCE}")
    assert difference < TOLERANCE
# Expected output:
# case 1: max |difference| < 1e-12: True
# case 2: max |difference| < 1e-12: True
# case 3: max |difference| < 1e-12: True
# case 4: max |difference| < 1e-12: True
# case 5: max |difference| < 1e-12: True
# case 6: max |difference| < 1e-12: True

# %%
# ``MultiHeadAttention`` against ``torch.nn.MultiheadAttention``
# ---------------------------------------------------------------
# ``nn.MultiheadAttention`` keeps the query, key and value weights in one
# ``in_proj_weight``, stacked in that order, and their biases in ``in_proj_bias``
# (zeros here when ``qkv_bias=False``); its ``out_proj`` is a ``Linear`` like ours,
# so its weight and bias are copied over. It needs the input and output sizes to be
# equal, ``d_in == d_out``. Its boolean ``attn_mask`` is ``True`` where a position is
# *not* allowed, like ours, so our mask goes in unchanged. ``batch_first=True``
# matches our ``(batch, num_tokens, d)`` layout, and ``need_weights=False`` asks for
# the output alone.

multi_head = []
for number, (batch, num_tokens, context_length, num_heads, head_dim, qkv_bias) in enumerate(
    cases, start=1
):
    d = num_heads * head_dim
    ours_module = MultiHeadAttention(d, d, context_length, 0.0, num_heads, qkv_bias)
    ours_module = ours_module.double().eval()
    reference = nn.MultiheadAttention(d, num_heads, batch_first=True, dtype=torch.float64)
    reference = reference.eval()
    with torch.no_grad():
        projections = (ours_module.W_query, ours_module.W_key, ours_module.W_value)
        reference.in_proj_weight.copy_(torch.cat([p.weight for p in projections]))
        if qkv_bias:
            reference.in_proj_bias.copy_(torch.cat([p.bias for p in projections]))
        else:
            reference.in_proj_bias.zero_()
        reference.out_proj.weight.copy_(ours_module.out_proj.weight)
        reference.out_proj.bias.copy_(ours_module.out_proj.bias)

        x = torch.randn(batch, num_tokens, d, dtype=torch.float64)
        ours = ours_module(x)
        hidden = ours_module.mask[:num_tokens, :num_tokens]  # True = hidden, as ours
        theirs, _ = reference(x, x, x, attn_mask=hidden, need_weights=False)
    difference = (ours - theirs).abs().max().item()
    multi_head.append((ours, theirs, difference))
    print(f"case {number}: max |difference| < 1e-12: {difference < TOLERANCE}")
    assert difference < TOLERANCE
# Expected output:
# case 1: max |difference| < 1e-12: True
# case 2: max |difference| < 1e-12: True
# case 3: max |difference| < 1e-12: True
# case 4: max |difference| < 1e-12: True
# case 5: max |difference| < 1e-12: True
# case 6: max |difference| < 1e-12: True

# %%
# Left, every output number of every case, ours against PyTorch's: all on the
# diagonal. Right, the largest difference in each case, on a logarithmic scale. The
# exact values depend on the machine (the order of floating-point additions), but
# they stay within a few machine epsilons, far below the :math:`10^{-12}` the
# checks above allow. A difference of exactly 0 is drawn at the bottom of the axis.

fig, (scatter_ax, bar_ax) = plt.subplots(
    1, 2, figsize=(10, 4.4), layout="constrained", width_ratios=[1, 1.5]
)
colours = {
    "CausalAttention vs SDPA": "#1b9e77",
    "MultiHeadAttention vs nn.MultiheadAttention": "#d95f02",
}
for (label, colour), results in zip(colours.items(), (single_head, multi_head), strict=True):
    ours = torch.cat([o.flatten() for o, _, _ in results])
    theirs = torch.cat([t.flatten() for _, t, _ in results])
    scatter_ax.scatter(theirs, ours, s=8, alpha=0.6, color=colour, label=label)
low, high = scatter_ax.get_xlim()
scatter_ax.plot([low, high], [low, high], color="0.4", linewidth=0.8, zorder=0)
scatter_ax.set_xlabel("PyTorch's output")
scatter_ax.set_ylabel("our output")
scatter_ax.set_aspect("equal")
scatter_ax.legend(fontsize=8, loc="lower right")
scatter_ax.set_title("every output number")

floor = 1e-18  # where a difference of exactly 0 is drawn
width = 0.38
positions = torch.arange(len(cases), dtype=torch.float64)
for offset, (label, colour), results in zip(
    (-width / 2, width / 2), colours.items(), (single_head, multi_head), strict=True
):
    heights = [max(difference, floor) for _, _, difference in results]
    bar_ax.bar(positions + offset, heights, width, color=colour, label=label)
    for position, (_, _, difference) in zip(positions, results, strict=True):
        if difference == 0:
            bar_ax.text(position + offset, floor * 2, "0", ha="center", va="bottom", color=colour)
bar_ax.set_yscale("log")
bar_ax.set_ylim(floor, 1e-10)
bar_ax.axhline(TOLERANCE, color="#c0392b", linestyle="--", linewidth=1.2)
bar_ax.text(-0.5, TOLERANCE * 1.6, "tolerance 1e-12", color="#c0392b", fontsize=9)
epsilon = torch.finfo(torch.float64).eps
bar_ax.axhline(epsilon, color="0.3", linestyle=":", linewidth=1.2)
bar_ax.text(-0.5, epsilon * 1.6, "float64 machine epsilon", color="0.3", fontsize=9)
bar_ax.set_xticks(positions, [f"case {number}" for number in range(1, len(cases) + 1)])
bar_ax.set_xlim(-0.6, len(cases) - 0.4)
bar_ax.set_ylabel("largest |our output - PyTorch's|")
bar_ax.set_title("largest difference per case (float64)")
fig.suptitle(
    "Our attention modules agree with PyTorch's scaled_dot_product_attention and\n"
    "nn.MultiheadAttention to float64 rounding, far below the 1e-12 tolerance"
)
plt.show()
