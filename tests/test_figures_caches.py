"""Tests of attention.figures.caches: growing, paged, latent and packed caches.

matplotlib, on the Agg backend.
"""

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")  # no display: render off-screen, before pyplot is imported

import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from figure_helpers import (  # noqa: E402
    drawn,
)
from matplotlib.colors import to_rgba  # noqa: E402

from attention import (  # noqa: E402
    MODELS,
    TOKENS,
    KVCache,
    PagedKVCache,
)
from attention.figures import (  # noqa: E402
    FACECOLOR,
    kv_cache_growth,
    labelled_texts,
    latent_flow,
    packing_diagram,
    paged_blocks,
)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize(("prefill", "tokens"), [(3, 6), (1, 4), (5, 5)])
def test_kv_cache_growth_rows_are_a_kv_caches_lengths(prefill, tokens):
    fig = kv_cache_growth(prefill, tokens, TOKENS[:tokens] if tokens <= 6 else None)
    drawn(fig)
    patches = fig.axes[0].patches
    cache = KVCache()
    steps = [prefill] + [1] * (tokens - prefill)
    for s, n in enumerate(steps):
        cache.update(torch.zeros(1, 1, n, 4), torch.zeros(1, 1, n, 4))
        row = [p for p in patches if p.get_gid() == f"cache {s}"]
        assert len(row) == len(cache)
        assert [p.get_label() for p in row] == ["cached"] * (len(cache) - n) + ["new"] * n
        assert sum(p.get_gid() == f"query {s}" for p in patches) == n
    with pytest.raises(ValueError, match=r"kv_cache_growth: expected prefill from 1 to 4"):
        kv_cache_growth(5, 4)
    with pytest.raises(TypeError, match=r"kv_cache_growth: expected num_tokens as an int"):
        kv_cache_growth(1, "4")


@pytest.mark.parametrize("absorbed", [False, True])
def test_latent_flow_caches_what_the_latent_cache_counts(absorbed):
    from attention import latent_cache_bytes_per_token

    m = MODELS["DeepSeek-V3"]
    fig = latent_flow(m, absorbed=absorbed)
    drawn(fig)
    texts = labelled_texts(fig)
    lat = m.latent
    assert texts["latent"] == f"latent c\n{lat.kv_lora_rank}"
    assert texts["rope key"] == f"rotated key\n{lat.qk_rope_head_dim}, all heads"
    cached = latent_cache_bytes_per_token(1, lat.kv_lora_rank, lat.qk_rope_head_dim, torch.int8)
    if absorbed:
        assert "keys" not in texts and "values" not in texts
        assert f"{m.num_heads} heads\n× ({lat.kv_lora_rank} latent" in texts["queries"]
    else:
        assert texts["keys"] == f"keys: {m.num_heads} heads × {lat.qk_nope_head_dim}"
        assert texts["values"] == f"values: {m.num_heads} heads × {lat.v_head_dim}"
        assert f"= {cached} numbers" in texts["note"]


def test_latent_flow_needs_a_model_with_latent_attention():
    with pytest.raises(ValueError, match=r"latent_flow: expected a model with latent"):
        latent_flow("Llama 3 8B")
    with pytest.raises(TypeError, match=r"latent_flow: absorbed must be True or False"):
        latent_flow(absorbed="yes")


def test_paged_blocks_fill_the_slots_each_block_table_points_at():
    cache = PagedKVCache(num_blocks=8, block_size=2, num_kv_heads=1, head_dim=1)
    words = {0: list(TOKENS[:3]), 1: [*TOKENS[:3], "and", "then"], 2: ["one"]}
    cache.add(0)
    cache.update(0, torch.zeros(3, 1, 1), torch.zeros(3, 1, 1))
    cache.fork(0, 1)  # shares 0's blocks; its partly filled last block is copied on write
    cache.update(1, torch.zeros(2, 1, 1), torch.zeros(2, 1, 1))
    cache.add(2)
    cache.update(2, torch.zeros(1, 1, 1), torch.zeros(1, 1, 1))
    ax = paged_blocks(cache, words)
    drawn(ax.figure)
    # Token t of a sequence sits in slot t % block_size of block table[t // block_size].
    expected, readers = {}, {}
    for seq_id in cache.seq_ids:
        table = cache.block_table(seq_id)
        for block in table:
            readers.setdefault(block, []).append(seq_id)
        for t in range(cache.num_tokens(seq_id)):
            expected.setdefault(f"block {table[t // 2]} slot {t % 2}", words[seq_id][t])
    cells = {p.get_gid(): p for p in ax.patches if (p.get_gid() or "").startswith("block ")}
    assert len(cells) == cache.num_blocks * cache.block_size
    filled = {gid for gid, p in cells.items() if to_rgba(p.get_facecolor()) != to_rgba(FACECOLOR)}
    assert filled == set(expected)
    assert {t.get_gid(): t.get_text() for t in ax.texts if t.get_gid()} == expected
    shared = {b for b, seqs in readers.items() if len(seqs) > 1}
    assert shared  # the fork's first block
    hatched = {int(gid.split()[1]) for gid, p in cells.items() if p.get_hatch()}
    assert hatched == shared
    texts = [t.get_text() for t in ax.texts]
    for block in shared:
        assert "shared: " + ", ".join(map(str, readers[block])) in texts
    for seq_id in cache.seq_ids:
        assert f"seq {seq_id}: {cache.block_table(seq_id)}" in texts
    with pytest.raises(TypeError, match=r"paged_blocks: cache must be a PagedKVCache"):
        paged_blocks({0: [0, 1]})


def test_packing_diagram_pads_and_packs_the_requests_cu_seqlens_describes():
    from attention import TOKENS, padding_mask, varlen_mask

    lengths = [2, 3, 1]
    cu_seqlens = [0, 2, 5, 6]
    fig = packing_diagram(torch.tensor(cu_seqlens), TOKENS)
    drawn(fig)
    patches = fig.axes[0].patches
    real = padding_mask(lengths, max(lengths))
    assert sum(p.get_gid() == "pad" for p in patches) == int((~real).sum())
    for i, n in enumerate(lengths):
        assert sum(p.get_gid() == f"padded {i}" for p in patches) == n
        assert sum(p.get_gid() == f"packed {i}" for p in patches) == n
    # The packed cells of a request are the keys varlen_mask lets its last token see.
    allowed = varlen_mask(cu_seqlens)  # (6, 6), causal inside each block
    packed = sorted((p.get_x(), p.get_gid()) for p in patches if "packed" in (p.get_gid() or ""))
    for i, end in enumerate(cu_seqlens[1:]):
        cells = [slot for slot, (_, gid) in enumerate(packed) if gid == f"packed {i}"]
        assert cells == allowed[end - 1].nonzero().flatten().tolist()
    labels = [t.get_text() for t in fig.axes[0].texts if t.get_gid() == "cu_seqlens"]
    assert labels == [str(b) for b in cu_seqlens]
    words = [t.get_text() for t in fig.axes[0].texts if t.get_text() in TOKENS]
    assert words == [*TOKENS, *TOKENS]  # padded row by row, then packed


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        (([0, 2, 2],), ValueError, r"cu_seqlens must increase strictly"),
        (([0, 30],), ValueError, r"at most 24 tokens"),
        (([0, 2], ["a"]), ValueError, r"expected 2 labels"),
        (([0, 2], "ab"), TypeError, r"expected labels as a sequence of str"),
    ],
)
def test_packing_diagram_rejects_what_it_cannot_draw(args, error, message):
    with pytest.raises(error, match=rf"packing_diagram: .*{message}"):
        packing_diagram(*args)


def test_the_cache_against_context_is_the_bill_of_each_model() -> None:
    from attention.figures import cache_against_context
    from attention.models import MODELS, bill

    names = ["Llama 3.1 70B", "Qwen3-Next 80B-A3B", "Gemma 3 27B"]
    fig = cache_against_context(names)
    lines = {line.get_gid(): line for line in fig.axes[0].lines}
    for name in names:
        facts = MODELS[name]
        line = lines[f"{name} cache"]
        tokens = [int(t) for t in line.get_xdata()]
        assert tokens[0] == 1024 and facts.trained_context in tokens
        assert list(line.get_ydata()) == [bill(facts, t).cache / 2**30 for t in tokens]
        dot = lines[f"{name} trained"]
        assert list(dot.get_xdata()) == [facts.trained_context]
        assert dot.get_color() == line.get_color()
    assert [t.get_text() for t in fig.axes[0].get_legend().texts] == names
    plt.close(fig)


def test_the_cache_against_context_refuses_an_encoder() -> None:
    from attention.figures import cache_against_context

    with pytest.raises(ValueError, match="expected models that keep a cache, got encoders"):
        cache_against_context(["gpt-oss-20b", "BERT base"])
