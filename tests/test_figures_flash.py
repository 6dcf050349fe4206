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
    INPUTS,
    TOKENS,
    merge_attention_states,
)
from attention.figures import (  # noqa: E402
    CURRENT,
    PHONE_WIDTH_INCHES,
    SMALLEST_TEXT_POINTS,
    backward_blocks,
    labelled_texts,
    merge_picture,
    ring_steps,
    running_max_and_sum,
    smallest_text_points,
    tiled_scores,
)
from attention.ring import ring_positions, ring_work  # noqa: E402
from attention.tiled import tiled_attention  # noqa: E402


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


# -- the online softmax's tiles (chapter 7) -------------------------------------------

SENTENCE = INPUTS.double()  # the chapter's queries, keys and values alike
SCORES = SENTENCE @ SENTENCE.T / 3**0.5


@pytest.mark.parametrize(("block_size", "causal"), [(2, True), (4, True), (3, False), (1, True)])
def test_the_running_max_and_sum_are_those_of_every_key_so_far(block_size, causal):
    """After key block b, m is the largest visible score of blocks 0..b and l the sum of
    exp(s - m) over them: the closed form the online softmax reaches without the row."""
    m, total, skipped = running_max_and_sum(SCORES, block_size, causal=causal)
    tokens = SCORES.shape[0]
    for i in range(tokens):
        for b in range(m.shape[1]):
            seen = SCORES[i, : (b + 1) * block_size]
            if causal:
                seen = seen[: i + 1]
            assert m[i, b] == seen.max()
            assert torch.allclose(total[i, b], torch.exp(seen - seen.max()).sum(), atol=1e-12)
    starts = range(0, tokens, block_size)
    expected = [[causal and k > min(q + block_size, tokens) - 1 for k in starts] for q in starts]
    assert skipped.tolist() == expected


def test_after_the_last_block_m_plus_log_l_is_the_lse_tiled_attention_returns():
    m, total, _ = running_max_and_sum(SCORES, 2)
    _, lse = tiled_attention(SENTENCE, SENTENCE, SENTENCE, causal=True, block_size=2,
                             return_lse=True)  # fmt: skip
    assert torch.allclose(m[:, -1] + torch.log(total[:, -1]), lse, atol=1e-12)


@pytest.mark.parametrize("layout", ["wide", "stacked"])
def test_tiled_scores_writes_each_rows_running_numbers_and_marks_the_skipped_tiles(layout):
    fig = tiled_scores(SCORES, 2, TOKENS, highlight=4, layout=layout)
    drawn(fig)
    texts = labelled_texts(fig)
    m, total, skipped = running_max_and_sum(SCORES, 2)
    for i in range(6):
        for b in range(3):
            assert texts[f"max {i} {b}"] == f"m {m[i, b]:.4f}"
            assert texts[f"sum {i} {b}"] == f"ℓ {total[i, b]:.4f}"
        for j in range(6):
            # The future is hatched, as every masked cell of the site; the rest has its score.
            assert (f"score {i} {j}" in texts) == (j <= i)
            if j <= i:
                assert texts[f"score {i} {j}"] == f"{SCORES[i, j]:.2f}"
    # Chapter 7's row of "one", worked by hand there: its three denominators.
    assert [texts[f"sum 4 {b}"] for b in range(3)] == ["ℓ 1.8659", "ℓ 3.6655", "ℓ 4.6370"]
    ax = fig.axes[0]
    assert sum(t.get_text() == "skipped" for t in ax.texts) == int(skipped.sum()) == 3
    framed = [p for p in ax.patches if p.get_edgecolor() == to_rgba(CURRENT)]
    assert len(framed) == 2  # the highlighted row, in the matrix and in the table


@pytest.mark.parametrize(
    ("draw", "name"),
    [
        (lambda layout: tiled_scores(SCORES, 2, TOKENS, layout=layout), "tiled_scores"),
        (lambda layout: ring_steps(4, zigzag=True, layout=layout), "ring_steps"),
    ],
)
def test_the_stacked_layout_fits_a_phone_at_its_own_size_with_every_label_legible(draw, name):
    wide, stacked = draw("wide"), draw("stacked")
    assert stacked.get_size_inches()[0] <= PHONE_WIDTH_INCHES < wide.get_size_inches()[0], name
    for fig in (wide, stacked):
        assert smallest_text_points(fig) >= SMALLEST_TEXT_POINTS, name


def test_ring_steps_stacked_puts_the_same_steps_one_under_another():
    wide, stacked = ring_steps(3, layout="wide"), ring_steps(3, layout="stacked")
    assert [ax.get_title() for ax in stacked.axes] == [ax.get_title() for ax in wide.axes]
    lefts = {round(ax.get_position().x0, 6) for ax in stacked.axes}
    assert len(lefts) == 1  # one column


def test_tiled_scores_rejects_what_it_cannot_draw():
    with pytest.raises(TypeError, match=r"tiled_scores: layout must be a string"):
        tiled_scores(SCORES, 2, layout=2)
    with pytest.raises(ValueError, match=r"tiled_scores: layout must be 'wide' or 'stacked'"):
        tiled_scores(SCORES, 2, layout="tall")
    with pytest.raises(ValueError, match=r"running_max_and_sum: scores must be a square"):
        tiled_scores(torch.zeros(2, 3), 1)
    with pytest.raises(TypeError, match=r"running_max_and_sum: scores must be a torch.Tensor"):
        tiled_scores([[0.0]], 1)
    with pytest.raises(ValueError, match=r"tiled_scores: expected at most 12 tokens"):
        tiled_scores(torch.zeros(13, 13), 4)
    with pytest.raises(ValueError, match=r"tiled_scores: expected 6 labels"):
        tiled_scores(SCORES, 2, ["a"])
    with pytest.raises(ValueError, match=r"tiled_scores: expected highlight in \[0, 5\]"):
        tiled_scores(SCORES, 2, highlight=6)
