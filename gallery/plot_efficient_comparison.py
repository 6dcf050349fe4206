"""
Efficient attention variants on your machine
============================================

Every class in ``attention.efficient`` computes the same function as the book's
``MultiHeadAttention``, only faster, or at least differently. This example checks
the first claim and measures the second on your own computer: one training step,
forward and backward, for each module.
"""

# %%
# The book's module at a small size: two sequences of 256 tokens, 128 features,
# 4 heads. ``variants_of`` builds each variant with the book's weights, so every
# module below computes the same function; the only difference is how.

import random
import statistics
import time

import matplotlib.pyplot as plt
import torch

from attention import MultiHeadAttention
from attention.efficient import variants_of

torch.manual_seed(123)
torch.set_printoptions(precision=4, sci_mode=False)

batch, num_tokens, d_model, num_heads = 2, 256, 128, 4
book = MultiHeadAttention(d_model, d_model, num_tokens, dropout=0.0, num_heads=num_heads)
modules = variants_of(book)  # the book's module, then each variant that runs here
print(", ".join(modules))
# Expected output:
# MultiHeadAttention, FusedQKVAttention, EinsumAttention, SDPAttention, TorchMHAAdapter, FastMultiHeadAttention
assert list(modules)[1:] == [
    "FusedQKVAttention",
    "EinsumAttention",
    "SDPAttention",
    "TorchMHAAdapter",
    "FastMultiHeadAttention",
]

# %%
# Same function
# -------------
# In float32 the modules add up the same numbers in different orders, so their
# outputs differ in the last few bits, by an amount that depends on your processor
# (around 1e-7 here). So we check only that the largest difference is tiny.

x = torch.randn(batch, num_tokens, d_model)
grad_output = torch.randn(batch, num_tokens, d_model)  # what a next layer would send back
with torch.no_grad():
    expected = book(x)
    for name, module in list(modules.items())[1:]:  # every variant against the book
        difference = (module(x) - expected).abs().max().item()
        print(f"{name:24} same output as MultiHeadAttention to 1e-5: {difference < 1e-5}")
        assert difference < 1e-5, name
# Expected output:
# FusedQKVAttention        same output as MultiHeadAttention to 1e-5: True
# EinsumAttention          same output as MultiHeadAttention to 1e-5: True
# SDPAttention             same output as MultiHeadAttention to 1e-5: True
# TorchMHAAdapter          same output as MultiHeadAttention to 1e-5: True
# FastMultiHeadAttention   same output as MultiHeadAttention to 1e-5: True

# %%
# Timing a training step
# -----------------------
# A training step runs the module forward, then backward. Each round times every
# module once, in a new random order, so that a slow moment of your machine (another
# program, a fan spinning up) does not always hit the same module; a first round
# warms up and is not counted. The median of the rest is robust to the odd slow
# round. Your numbers will differ from anyone else's, so the script checks only that
# they are positive.


def training_step(module):
    module.zero_grad(set_to_none=True)
    module(x).backward(grad_output)


rounds, times = 5, {name: [] for name in modules}
order = list(modules)
for round_number in range(1 + rounds):
    random.Random(round_number).shuffle(order)
    for name in order:
        start = time.perf_counter()
        training_step(modules[name])
        elapsed = time.perf_counter() - start
        if round_number > 0:  # round 0 is the warm-up
            times[name].append(elapsed)

assert all(t > 0 for per_module in times.values() for t in per_module)
medians = {name: statistics.median(per_module) for name, per_module in times.items()}
book_median = medians["MultiHeadAttention"]
# Unchecked output: timings differ from run to run and machine to machine.
print(f"{'module':24} {'median ms':>10} {'x book':>7}")
for name, median in medians.items():
    print(f"{name:24} {median * 1e3:10.2f} {median / book_median:7.2f}")

# %%
# The bars show each module's median time; the thin lines span the middle half of
# the rounds (from the first to the third quartile), a measure of how noisy the
# timing was. Expect ``FastMultiHeadAttention`` and ``SDPAttention`` to be among
# the shortest bars and ``EinsumAttention`` close to the book's module; with tiny
# tensors and a busy machine the order can change from run to run. Chapter 7 of the
# documentation explains each variant, and its page "Measuring attention" shows the
# full benchmark.

names = sorted(medians, key=medians.get, reverse=True)  # the fastest at the top
values = [medians[name] * 1e3 for name in names]
quartiles = {name: statistics.quantiles(times[name], n=4) for name in names}
low = [(medians[name] - quartiles[name][0]) * 1e3 for name in names]
high = [(quartiles[name][2] - medians[name]) * 1e3 for name in names]
highlight = {"FastMultiHeadAttention": "tab:blue", "MultiHeadAttention": "tab:red"}
colors = [highlight.get(name, "tab:gray") for name in names]

fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
ax.barh(names, values, xerr=[low, high], color=colors, error_kw={"elinewidth": 1})
for y, (value, extra) in enumerate(zip(values, high, strict=True)):
    ax.text(value + extra, y, f"  {value:.1f} ms", va="center", fontsize="small")
ax.margins(x=0.15)  # room for the labels
ax.set_xlabel("milliseconds per training step (median)")
ax.grid(True, axis="x", alpha=0.3)
ax.set_axisbelow(True)
fig.suptitle(
    "How long one training step (forward and backward) of each attention module\n"
    f"takes on this machine, for {batch} x {num_tokens} tokens with {d_model} features."
)
plt.show()
