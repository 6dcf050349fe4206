"""Tests of attention.figures.flash: the backward pass's blocks, one merge, a ring.

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
    TOKENS,
    merge_attention_states,
)
from attention.figures import (  # noqa: E402
    CURRENT,
    backward_blocks,
    merge_picture,
    ring_steps,
)
from attention.ring import ring_positions, ring_work  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize(
    ("num_tokens", "block_size", "causal"), [(12, 3, True), (8, 2, False), (7, 3, True)]
)
def test_backward_blocks_skip_and_mask_the_blocks_the_backward_pass_does(
    num_tokens, block_size, causal
):
    ax = backward_blocks(num_tokens, block_size, causal=causal, key_block=1)
    drawn(ax.figure)
    cells = {p.get_gid(): p for p in ax.patches if (p.get_gid() or "").startswith("block ")}
    labels = {t.get_gid(): t.get_text() for t in ax.texts if t.get_gid()}
    starts = range(0, num_tokens, block_size)
    assert len(cells) == len(starts) ** 2
    # The loops of tiled_attention_backward: key blocks outside, then the query blocks
    # from `first` on; the scores are masked where the block straddles the diagonal.
    for j, k_start in enumerate(starts):
        k_end = min(k_start + block_size, num_tokens)
        first = (k_start // block_size) * block_size if causal else 0
        for i, q_start in enumerate(starts):
            computed = q_start >= first
            masked = computed and causal and k_end > q_start + 1
            cell, label = cells[f"block {i} {j}"], labels[f"label {i} {j}"]
            assert (cell.get_hatch() is None) == computed
            assert (label == "skipped") == (not computed)
            assert (label == "masked") == masked
            current = computed and j == 1  # key_block, the outer loop's step
            assert (to_rgba(cell.get_facecolor()) == to_rgba(CURRENT)) == current
    with pytest.raises(ValueError, match=r"backward_blocks: expected at most 8 blocks"):
        backward_blocks(18, 2)
    with pytest.raises(ValueError, match=r"backward_blocks: expected key_block in \[0, 3\]"):
        backward_blocks(8, 2, key_block=4)


def test_merge_picture_bars_are_the_parts_softmaxes_and_their_merge():
    scores = torch.tensor([0.1, 0.5, -0.2, 0.9, 1.3, -1.0], dtype=torch.float64)
    split = 2
    fig = merge_picture(scores, split, TOKENS)
    drawn(fig)
    heights = [[p.get_height() for p in ax.patches] for ax in fig.axes]
    parts = (scores[:split], scores[split:])
    alone = [torch.softmax(part, dim=0) for part in parts]
    assert heights[0] == pytest.approx(alone[0].tolist())
    assert heights[1] == pytest.approx(alone[1].tolist())
    # With one-hot values a part's output is its weights: merged, the weights of all keys.
    eye = torch.eye(6, dtype=torch.float64)
    outs = [alone[0][None] @ eye[:split], alone[1][None] @ eye[split:]]
    lses = [part.logsumexp(dim=0)[None] for part in parts]
    merged, lse = merge_attention_states(outs, lses)
    assert heights[2][:6] == pytest.approx(merged[0].tolist())  # the scaled parts' bars
    assert heights[2][6:] == pytest.approx(torch.softmax(scores, dim=0).tolist())  # outlines
    assert fig.axes[2].get_title().endswith(f"lse = {lse.item():.4f}")
    assert fig.axes[0].get_title().endswith(f"lse = {lses[0].item():.4f}")
    assert [t.get_text() for t in fig.axes[2].get_xticklabels()] == list(TOKENS)


@pytest.mark.parametrize("zigzag", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_ring_steps_show_the_blocks_ring_work_counts(causal, zigzag):
    world = 4
    chunks = 2 * world if zigzag else world  # one token a chunk
    work = ring_work(chunks, world, causal=causal, zigzag=zigzag)
    held = ring_positions(chunks, world, zigzag=zigzag)
    fig = ring_steps(world, causal=causal, zigzag=zigzag)
    drawn(fig)
    assert [ax.get_title() for ax in fig.axes] == [f"step {s}" for s in range(world)]
    for step, ax in enumerate(fig.axes):
        for r in range(world):
            gid = f"step {step} P{r}"
            (box,) = [p for p in ax.patches if p.get_gid() == gid]
            (label,) = [t for t in ax.texts if t.get_gid() == gid]
            blocks = int(work[r, step])
            kv = ",".join(map(str, held[(r - step) % world].tolist()))
            assert label.get_text() == f"P{r}\nK,V {kv}\n{blocks} block{'s' * (blocks != 1)}"
            assert bool(box.get_hatch()) == (blocks == 0)


def test_merge_picture_rejects_what_is_not_one_querys_scores():
    with pytest.raises(TypeError, match=r"merge_picture: scores must be a torch.Tensor"):
        merge_picture([0.1, 0.5], 1)
    with pytest.raises(ValueError, match=r"merge_picture: scores must be a 1-D tensor"):
        merge_picture(torch.zeros(2, 2), 1)
