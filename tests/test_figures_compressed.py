"""attention.figures.compressed: DeepSeek-V4's entries and cache, drawn from the package.

What each figure draws is read back from its patches' gids and labels and compared
with the package run directly: the tokens each entry reads against
``CompressedAttention``'s rule (a group, and with overlap the group before), and each
row of the cache figure against a ``CompressedCache`` decoding the same steps.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch
from helpers import expect

from attention import CompressedAttention, CompressedCache
from attention.figures import (
    compressed_cache_growth,
    compression_pipeline,
    entry_sources,
)


def labels(fig, gid: str) -> list[str]:
    return [p.get_label() for p in fig.axes[0].patches if p.get_gid() == gid]


@pytest.mark.parametrize(("rate", "num_tokens"), [(4, 12), (3, 10), (2, 5)])
@pytest.mark.parametrize("overlap", [True, False])
def test_each_entry_reads_its_group_and_with_overlap_the_one_before(rate, num_tokens, overlap):
    sources = entry_sources(rate, num_tokens, overlap=overlap)
    assert len(sources) == num_tokens // rate  # the last tokens wait: no entry yet
    for w, tokens in enumerate(sources):
        first = max(0, (w - 1) * rate) if overlap else w * rate
        assert tokens == list(range(first, (w + 1) * rate))


def test_the_pipeline_draws_the_sources_and_the_entries():
    fig = compression_pipeline(4, 14, overlap=False)
    assert [labels(fig, f"reads {w}") for w in range(3)] == [
        [str(t) for t in tokens] for tokens in entry_sources(4, 14, overlap=False)
    ]
    assert labels(fig, "entry 2") == ["position 8"]  # turned as its group's first token
    assert len([p for p in fig.axes[0].patches if p.get_gid() == "token 13"]) == 1
    plt.close(fig)


@pytest.mark.parametrize(("rate", "window", "prefill"), [(4, 4, 5), (2, 3, 1), (3, 6, 7)])
def test_each_row_is_what_the_cache_holds_after_that_step(rate, window, prefill):
    fig = compressed_cache_growth(rate, window, prefill, 12)
    layer = CompressedAttention(
        8, 8, 64, num_heads=2, head_dim=4, q_lora_rank=4, window=window, rope_dim=2,
        compress_rate=rate, index_top_k=2, index_num_heads=2, index_head_dim=4, o_groups=2,
        o_lora_rank=2,
    )  # fmt: skip
    cache, x = CompressedCache(window), torch.randn(1, 12, 8)
    steps = [(0, prefill), *((t, t + 1) for t in range(prefill, 12))]
    with torch.no_grad():
        for s, (start, stop) in enumerate(steps):
            layer(x[:, start:stop], cache=cache)
            held = len(labels(fig, f"window {s}"))
            waiting, entries = labels(fig, f"waiting {s}"), labels(fig, f"entries {s}")
            assert (held, len(waiting), len(entries)) == (
                len(cache),
                cache.num_waiting,
                cache.num_entries,
            )
            assert waiting == [str(t) for t in range(stop - stop % rate, stop)]
    plt.close(fig)


def test_bad_arguments_are_refused():
    with expect("compression_pipeline: expected rate as an int, got 2.0", TypeError):
        compression_pipeline(2.0)
    with expect("compressed_cache_growth: expected prefill from 1 to 12"):
        compressed_cache_growth(4, 4, 13, 12)
    with expect("entry_sources: overlap must be True or False", TypeError):
        entry_sources(4, 8, overlap=1)
