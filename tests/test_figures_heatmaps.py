"""Tests of attention.figures.heatmaps: heatmaps and cost curves (matplotlib, Agg backend)."""

import re

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")  # no display: render off-screen, before pyplot is imported

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from helpers import jupyter_png  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from attention import (  # noqa: E402
    INPUTS,
    TOKENS,
    CausalAttention,
    MultiHeadAttention,
    causal_mask,
    sliding_window_mask,
)
from attention.figures import FACECOLOR, head_grid, heatmap  # noqa: E402

CAUSAL = torch.ones(6, 6, dtype=torch.bool).triu(diagonal=1)  # True above the diagonal


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture
def causal_weights():
    torch.manual_seed(123)
    ca = CausalAttention(d_in=3, d_out=2, context_length=6, dropout=0.0)
    return ca.attention_weights(INPUTS.unsqueeze(0))[0]  # (6, 6), requires grad


@pytest.fixture
def head_weights():
    torch.manual_seed(123)
    mha = MultiHeadAttention(3, 4, context_length=6, dropout=0.0, num_heads=2)
    return mha.attention_weights(INPUTS.unsqueeze(0))  # (1, 2, 6, 6), requires grad


def texts(ax):
    return {(round(t.get_position()[1]), round(t.get_position()[0])): t for t in ax.texts}


def test_tokens_are_the_tick_labels_of_both_axes():
    ax = heatmap(torch.rand(6, 4), TOKENS, TOKENS[:4], title="weights")
    assert [t.get_text() for t in ax.get_yticklabels()] == list(TOKENS)
    assert [t.get_text() for t in ax.get_xticklabels()] == list(TOKENS[:4])
    assert ax.get_title() == "weights"
    assert ax.get_xlabel() == "key (attended to)"
    assert ax.get_ylabel() == "query (attending)"


def test_default_labels_are_positions():
    ax = heatmap(torch.rand(3, 5))
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "2", "3", "4"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0", "1", "2"]


def test_small_matrix_has_every_value_written_in_its_cell():
    weights = torch.tensor([[0.125, 0.875], [0.5, 0.5], [1.0, 0.0]])
    ax = heatmap(weights)
    cells = texts(ax)
    assert len(cells) == 6
    assert cells[(0, 0)].get_text() == "0.12"  # fmt "{:.2f}", round half to even
    assert cells[(0, 1)].get_text() == "0.88"
    assert cells[(2, 1)].get_text() == "0.00"
    assert heatmap(weights, fmt="{:.0%}").texts[1].get_text() == "88%"


def test_annotation_is_automatic_up_to_twelve_tokens():
    assert len(heatmap(torch.rand(12, 12)).texts) == 144
    assert len(heatmap(torch.rand(13, 13)).texts) == 0
    assert len(heatmap(torch.rand(4, 13)).texts) == 0
    assert len(heatmap(torch.rand(4, 4), annotate=False).texts) == 0
    assert len(heatmap(torch.rand(13, 2), annotate=True).texts) == 26


def test_text_colour_contrasts_with_its_cell():
    # viridis runs from dark purple (0) to light yellow (1).
    ax = heatmap(torch.tensor([[0.0, 1.0]]))
    cells = texts(ax)
    assert cells[(0, 0)].get_color() == "white"
    assert cells[(0, 1)].get_color() == "black"
    # Reversed colormap, reversed ink.
    cells = texts(heatmap(torch.tensor([[0.0, 1.0]]), cmap="viridis_r"))
    assert cells[(0, 0)].get_color() == "black"
    assert cells[(0, 1)].get_color() == "white"


def test_causal_mask_hides_the_future_from_image_and_numbers(causal_weights):
    ax = heatmap(causal_weights, TOKENS, TOKENS, allowed="causal")
    shown = ax.images[0].get_array()
    assert np.array_equal(np.ma.getmaskarray(shown), CAUSAL.numpy())
    # Only the 21 visible cells carry numbers; masked ones have none, not "0.00".
    cells = texts(ax)
    assert set(cells) == {(i, j) for i in range(6) for j in range(i + 1)}
    assert "0.00" not in [t.get_text() for t in ax.texts]
    # Masked cells are drawn in a grey outside the colormap, under a hatched patch.
    assert to_rgba(ax.images[0].get_cmap().get_bad()) != to_rgba(ax.images[0].cmap(0.0))
    (hatched,) = ax.patches
    assert hatched.get_hatch()
    assert len(ax.figure.legends) == 1  # the "masked" key


def test_zero_weights_without_a_mask_are_ordinary_cells(causal_weights):
    ax = heatmap(causal_weights)
    assert not np.ma.getmaskarray(ax.images[0].get_array()).any()
    assert len(ax.texts) == 36
    assert len(ax.patches) == 0
    assert ax.figure.legends == []


def test_bool_allowed_matches_causal(causal_weights):
    by_name = heatmap(causal_weights, allowed="causal").images[0].get_array()
    by_matrix = heatmap(causal_weights, allowed=~CAUSAL).images[0].get_array()
    by_numpy = heatmap(causal_weights, allowed=~CAUSAL.numpy()).images[0].get_array()
    assert np.array_equal(np.ma.getmaskarray(by_name), np.ma.getmaskarray(by_matrix))
    assert np.array_equal(np.ma.getmaskarray(by_name), np.ma.getmaskarray(by_numpy))


def test_minus_inf_scores_are_masked_automatically():
    scores = (INPUTS @ INPUTS.T).masked_fill(CAUSAL, float("-inf"))
    ax = heatmap(scores, TOKENS, TOKENS, vmin=None)
    assert np.array_equal(np.ma.getmaskarray(ax.images[0].get_array()), CAUSAL.numpy())
    assert len(ax.texts) == 21
    assert not any("inf" in t.get_text() for t in ax.texts)
    # The colour scale spans the finite scores only.
    finite = scores[~CAUSAL]
    assert ax.images[0].get_clim() == pytest.approx((finite.min().item(), finite.max().item()))


def test_colour_scale_defaults_and_colorbar():
    weights = torch.tensor([[0.2, 0.8], [0.6, 0.4]])
    ax = heatmap(weights)
    assert ax.images[0].get_clim() == pytest.approx((0.0, 0.8))
    assert ax.images[0].get_cmap().name.startswith("viridis")
    assert ax.images[0].colorbar is not None
    assert len(ax.figure.axes) == 2
    assert heatmap(weights, vmax=1.0).images[0].get_clim() == pytest.approx((0.0, 1.0))
    assert len(heatmap(weights, colorbar=False).figure.axes) == 1


def test_figure_is_opaque_white_and_cells_square():
    ax = heatmap(torch.rand(3, 5))
    assert to_rgba(ax.figure.get_facecolor()) == to_rgba(FACECOLOR) == (1, 1, 1, 1)
    assert ax.get_aspect() == 1.0


def test_draws_on_given_axes():
    fig, (left, right) = plt.subplots(1, 2)
    returned = heatmap(torch.rand(3, 3), ax=right, allowed="causal")
    assert returned is right
    assert len(left.images) == 0 and len(right.images) == 1
    assert fig.legends == []  # no key in someone else's figure


def test_accepts_grad_bfloat16_and_plain_arrays(causal_weights):
    assert causal_weights.requires_grad
    expected = heatmap(causal_weights).images[0].get_array()
    half = heatmap(causal_weights.to(torch.bfloat16)).images[0].get_array()
    np.testing.assert_allclose(half, expected, atol=1e-2)  # bfloat16 keeps ~3 digits
    listed = heatmap(causal_weights.tolist()).images[0].get_array()
    np.testing.assert_allclose(listed, expected)
    numpy = heatmap(causal_weights.detach().numpy()).images[0].get_array()
    np.testing.assert_allclose(numpy, expected)


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        (torch.rand(2, 6, 6), r"expected a 2-D matrix of weights, got shape \(2, 6, 6\)"),
        (torch.rand(6), r"expected a 2-D matrix of weights, got shape \(6,\)"),
        (torch.rand(0, 3), r"expected a non-empty matrix"),
    ],
)
def test_heatmap_rejects_wrong_shapes(weights, message):
    with pytest.raises(ValueError, match=rf"^heatmap: {message}"):
        heatmap(weights)
    with pytest.raises(TypeError, match=r"^heatmap: expected a tensor or an array of numbers"):
        heatmap("weights")


def test_heatmap_rejects_wrong_labels_masks_and_limits():
    weights = torch.rand(6, 6)
    with pytest.raises(ValueError, match="heatmap: expected 6 row labels, got 5"):
        heatmap(weights, TOKENS[:5], TOKENS)
    with pytest.raises(ValueError, match="heatmap: expected 6 column labels, got 7"):
        heatmap(weights, TOKENS, (*TOKENS, "extra"))
    with pytest.raises(TypeError, match="split it into tokens"):
        heatmap(weights, "Your journey starts with one step")
    with pytest.raises(ValueError, match=r"expected allowed of shape \(6, 6\).*got shape \(5, 5\)"):
        heatmap(weights, allowed=~CAUSAL[:5, :5])
    with pytest.raises(ValueError, match="allowed must be a bool matrix with True where a query"):
        heatmap(weights, allowed=(~CAUSAL).int())
    with pytest.raises(ValueError, match='"causal" or None'):
        heatmap(weights, allowed="future")
    with pytest.raises(ValueError, match="vmax must be greater than vmin"):
        heatmap(weights, vmin=0.5, vmax=0.5)


def test_head_grid_shares_one_scale_and_one_colorbar(head_weights):
    fig = head_grid(head_weights, TOKENS, TOKENS, suptitle="two heads")
    heads = fig.axes[:2]
    assert [ax.get_title() for ax in heads] == ["head 1", "head 2"]
    assert fig.get_suptitle() == "two heads"
    images = [image for ax in fig.axes for image in ax.images]
    assert len(images) == 2
    largest = head_weights.max().item()
    assert all(image.get_clim() == pytest.approx((0.0, largest)) for image in images)
    colorbars = [image.colorbar for image in images if image.colorbar is not None]
    assert len(colorbars) == 1
    assert len(fig.axes) == 3 and colorbars[0].ax is fig.axes[-1]
    assert to_rgba(fig.get_facecolor()) == (1, 1, 1, 1)


def test_head_grid_scale_is_the_maximum_over_all_heads():
    weights = torch.full((3, 2, 2), 0.25)
    weights[2, 1, 0] = 0.9  # only the last head reaches 0.9
    fig = head_grid(weights, ncols=2)
    assert len(fig.axes) == 4  # 3 heads on a 2 x 2 grid, the empty panel removed
    assert all(ax.images[0].get_clim() == pytest.approx((0.0, 0.9)) for ax in fig.axes[:3])
    fig = head_grid(weights, vmin=0.2, vmax=1.0, titles=["a", "b", "c"])
    assert [ax.get_title() for ax in fig.axes[:3]] == ["a", "b", "c"]
    assert fig.axes[0].images[0].get_clim() == pytest.approx((0.2, 1.0))


def test_head_grid_masks_every_head(head_weights):
    fig = head_grid(head_weights, allowed="causal")
    for ax in fig.axes[:2]:
        assert np.array_equal(np.ma.getmaskarray(ax.images[0].get_array()), CAUSAL.numpy())
        assert len(ax.texts) == 21
    assert len(fig.legends) == 1
    per_head = torch.ones(2, 6, 6, dtype=torch.bool)
    per_head[1, 0, 5] = False
    fig = head_grid(head_weights, allowed=per_head)
    assert not np.ma.getmaskarray(fig.axes[0].images[0].get_array()).any()
    assert np.ma.getmaskarray(fig.axes[1].images[0].get_array())[0, 5]


@pytest.mark.parametrize(
    ("given", "written"),
    [
        (
            CAUSAL,
            "write allowed=~mask (allowed is True where a query may attend; mask was "
            "True where a cell is hidden) (got mask=Tensor)",
        ),
        (
            CAUSAL.numpy(),
            "write allowed=~mask (allowed is True where a query may attend; "
            "mask was True where a cell is hidden) (got mask=ndarray)",
        ),
        (
            "causal",
            "write allowed='causal' (allowed is True where a query may attend) (got mask=str)",
        ),
    ],
    ids=["tensor", "numpy", "causal"],
)
def test_old_mask_keyword_is_refused_with_what_to_write(
    causal_weights, head_weights, given, written
):
    """mask= meant True = hidden; it is refused, never silently read either way."""
    refused = f" mask= is no longer taken; {re.escape(written)}$"
    with pytest.raises(ValueError, match=f"^heatmap:{refused}"):
        heatmap(causal_weights, mask=given)
    with pytest.raises(ValueError, match=f"^head_grid:{refused}"):
        head_grid(head_weights, mask=given)
    assert plt.get_fignums() == []  # refused before any figure is made


def test_allowed_causal_mask_hatches_exactly_the_future(causal_weights, head_weights, tmp_path):
    """The package's own causal_mask (True = may attend) draws the same figure as "causal"."""
    by_name = heatmap(causal_weights, TOKENS, TOKENS, allowed="causal")
    by_mask = heatmap(causal_weights, TOKENS, TOKENS, allowed=causal_mask(6))
    assert np.array_equal(np.ma.getmaskarray(by_mask.images[0].get_array()), CAUSAL.numpy())
    assert len(by_mask.texts) == 21
    np.testing.assert_array_equal(
        rendered(by_mask.figure, tmp_path / "mask.png"),
        rendered(by_name.figure, tmp_path / "name.png"),
    )
    fig_name = head_grid(head_weights, TOKENS, TOKENS, allowed="causal")
    fig_mask = head_grid(head_weights, TOKENS, TOKENS, allowed=causal_mask(6).expand(2, 6, 6))
    np.testing.assert_array_equal(
        rendered(fig_mask, tmp_path / "grid_mask.png"),
        rendered(fig_name, tmp_path / "grid_name.png"),
    )


def test_allowed_false_is_hidden_and_true_is_drawn(causal_weights):
    """A pattern that is not symmetric under inversion: a window of 2 hides the future and
    the far past; its complement hides the band instead. Non-finite values stay hidden."""
    window = sliding_window_mask(6, 2)  # True on the diagonal and just below it
    ax = heatmap(causal_weights, allowed=window)
    assert np.array_equal(np.ma.getmaskarray(ax.images[0].get_array()), ~window.numpy())
    assert set(texts(ax)) == {(i, j) for i in range(6) for j in (i - 1, i) if j >= 0}
    scores = torch.zeros(6, 6)
    scores[2, 1], scores[3, 3] = float("-inf"), float("nan")
    shown = np.ma.getmaskarray(heatmap(scores, allowed=window).images[0].get_array())
    expected = ~window.numpy()
    expected[2, 1] = expected[3, 3] = True  # allowed, but -inf and nan have no colour
    assert np.array_equal(shown, expected)
    everywhere = torch.ones(6, 6, dtype=torch.bool)
    shown = heatmap(causal_weights, allowed=everywhere).images[0].get_array()
    assert not np.ma.getmaskarray(shown).any()


def test_head_grid_accepts_bfloat16_and_unbatched(head_weights):
    fig = head_grid(head_weights[0].to(torch.bfloat16))
    assert len(fig.axes) == 3


@pytest.mark.parametrize("shape", [(6, 6), (2, 2, 6, 6), (1, 1, 2, 6, 6), (0, 6, 6)], ids=str)
def test_head_grid_rejects_wrong_shapes(shape):
    expected = (
        "head_grid: expected weights of shape (num_heads, T, T) or (1, num_heads, T, T), "
        f"got shape {shape}"
    )
    with pytest.raises(ValueError, match=re.escape(expected)):
        head_grid(torch.rand(shape))


def test_head_grid_rejects_wrong_labels_and_titles(head_weights):
    with pytest.raises(ValueError, match="head_grid: expected 6 row labels, got 5"):
        head_grid(head_weights, TOKENS[:5])
    with pytest.raises(ValueError, match="head_grid: expected 2 titles, got 3"):
        head_grid(head_weights, titles=["a", "b", "c"])
    with pytest.raises(ValueError, match="head_grid: ncols must be at least 1, got 0"):
        head_grid(head_weights, ncols=0)
    with pytest.raises(TypeError, match=r"head_grid: ncols must be a positive integer, got 2\.0"):
        head_grid(head_weights, ncols=2.0)


def rendered(fig, path):
    """``fig`` saved as a PNG and read back: ``(height, width, 4)`` floats in [0, 1]."""
    fig.savefig(path, dpi=fig.dpi)  # at the figure's dpi, so its transforms locate the pixels
    return plt.imread(path)


def cell_pixel(png, ax, row: int, col: int) -> np.ndarray:
    """The 0-255 RGB of cell ``(row, col)`` of ``ax``'s heatmap, a third of a cell off its
    centre: clear of the number written at the centre and of the white lines on the edges."""
    x, y = ax.transData.transform((col - 0.3, row - 0.3))
    return png[int(png.shape[0] - y), int(x), :3] * 255


def assert_cells_show(png, ax, weights, hidden, vmax: float) -> None:
    """Each visible cell has viridis' colour at ``weight / vmax``; each hidden one is grey
    (its fill or its hatching)."""
    viridis = matplotlib.colormaps["viridis"]
    for (row, col), value in np.ndenumerate(weights):
        pixel = cell_pixel(png, ax, row, col)
        if hidden[row, col]:
            assert pixel.max() - pixel.min() <= 2, (row, col, pixel)  # a neutral grey
            assert 0x9A - 3 <= pixel.mean() <= 0xE4 + 3, (row, col, pixel)  # not white
        else:
            colour = np.array(viridis(value / vmax)[:3]) * 255
            np.testing.assert_allclose(pixel, colour, atol=3, err_msg=f"cell {(row, col)}")


def test_figures_render_to_png_with_each_weight_in_its_cell_and_the_future_grey(
    causal_weights, tmp_path
):
    # Drawing runs the layout engine and every artist, which building alone does not.
    ax = heatmap(causal_weights, TOKENS, TOKENS, allowed="causal")
    png = rendered(ax.figure, tmp_path / "a.png")
    width, height = ax.figure.get_size_inches() * ax.figure.dpi
    assert png.shape == (round(height), round(width), 4)
    assert np.all(png[..., 3] == 1)  # opaque, for dark pages too
    assert np.all(png[[0, 0, -1, -1], [0, -1, 0, -1], :3] == 1)  # on white
    weights = causal_weights.detach().numpy()
    # The scale runs from 0 to the largest visible weight (row 0's 1.0 on the diagonal).
    assert_cells_show(png, ax, weights, CAUSAL.numpy(), vmax=weights[~CAUSAL.numpy()].max())

    # Two heads that attend differently (the book's small heads are nearly uniform):
    # each panel must show its own head's weights, on the one shared colour scale.
    scores = torch.randn(2, 6, 6, generator=torch.Generator().manual_seed(0)) * 3
    per_head = torch.softmax(scores.masked_fill(CAUSAL, float("-inf")), dim=-1).numpy()
    assert np.abs(per_head[0] - per_head[1]).max() > 0.5
    fig = head_grid(per_head, TOKENS, TOKENS, allowed="causal")
    png = rendered(fig, tmp_path / "b.png")
    assert np.all(png[..., 3] == 1)
    for h, ax in enumerate(fig.axes[:2]):
        assert_cells_show(png, ax, per_head[h], CAUSAL.numpy(), vmax=per_head.max())


def test_heatmap_draws_into_axes_inside_a_subfigure():
    fig = plt.figure(figsize=(8, 4))
    _, right = fig.subfigures(1, 2)
    ax = heatmap(torch.rand(4, 4), ax=right.subplots(), allowed="causal")
    assert ax.images and len(ax.texts) == 10  # the 10 visible cells are annotated
    plt.close(fig)


# -- memory_curves: one style for the log-log cost figures ----------------------------

from attention.figures import LAYER_COLORS, Curve, memory_curves  # noqa: E402


def test_memory_curves_draw_each_models_cache_on_log_log_axes():
    from attention import MODELS
    from attention.models import kv_cache_bytes

    names = ["Llama 3 8B", "Mistral 7B"]
    tokens = [2**p for p in range(4, 14)]
    curves = [Curve(n, tokens, [kv_cache_bytes(MODELS[n], t) for t in tokens]) for n in names]
    curves.append(Curve(None, tokens, [2.0 * t for t in tokens], dashed=True, pair=True))
    ax = memory_curves(curves)
    lines = ax.get_lines()
    for line, name in zip(lines, names, strict=False):
        assert list(line.get_xdata()) == tokens
        assert list(line.get_ydata()) == [kv_cache_bytes(MODELS[name], t) for t in tokens]
        assert line.get_linestyle() == "-"
    # Mistral's cache stops growing at its window: the drawn line is flat past it.
    flat = [y for x, y in zip(tokens, lines[1].get_ydata(), strict=True) if x >= 4096]
    assert len(set(flat)) == 1
    assert to_rgba(lines[0].get_color()) != to_rgba(lines[1].get_color())
    assert lines[2].get_color() == lines[1].get_color()  # pair: the colour before
    assert lines[2].get_linestyle() == "--"
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    assert [t.get_text() for t in ax.get_legend().texts] == names  # None: no entry
    assert to_rgba(ax.figure.get_facecolor()) == to_rgba(FACECOLOR)


def test_memory_curves_colour_a_layer_kind_with_its_palette_colour():
    tokens = [64, 128, 256]
    kinds = ["full_attention", "sliding_attention", "linear_attention"]
    ax = memory_curves([Curve(k, tokens, [1, 2, 3], kind=k) for k in kinds], base=2)
    for line, kind in zip(ax.get_lines(), kinds, strict=True):
        assert to_rgba(line.get_color()) == to_rgba(LAYER_COLORS[kind])
    assert ax.xaxis.get_transform().base == 2


@pytest.mark.parametrize(
    ("curves", "error", "message"),
    [
        (Curve("a", [1], [1]), TypeError, "a sequence of Curve"),
        ([], ValueError, "at least one Curve, got none"),
        ([("a", [1], [1])], TypeError, "Curve items, got tuple"),
        ([Curve("a", [1, 2], [1])], ValueError, "as many values as tokens"),
        ([Curve("a", [0, 2], [1, 1])], ValueError, "positive tokens and values"),
        ([Curve("a", [1], [1], kind="global")], ValueError, "a kind in"),
        ([Curve("a", [1], [1], pair=True)], ValueError, "first curve without pair"),
    ],
)
def test_memory_curves_reject_what_they_cannot_draw(curves, error, message):
    with pytest.raises(error, match=rf"memory_curves: expected.*{message}"):
        memory_curves(curves)


@pytest.mark.parametrize("draw", ["heatmap", "head_grid", "memory_curves"])
def test_saved_figures_are_opaque_to_their_edges(draw, causal_weights, head_weights):
    """On the site's dark theme a transparent pixel shows the dark page through: every
    pixel of the saved image, its margins included, is opaque, and its corners white."""
    tokens = [2**p for p in range(4, 12)]
    fig = {
        "heatmap": lambda: heatmap(causal_weights, TOKENS, TOKENS, allowed="causal").figure,
        "head_grid": lambda: head_grid(head_weights, TOKENS, TOKENS, suptitle="two heads"),
        "memory_curves": lambda: memory_curves([Curve("full", tokens, tokens)]).figure,
    }[draw]()
    image = jupyter_png(fig)
    assert image[..., 3].min() == 1.0
    for corner in (image[0, 0], image[0, -1], image[-1, 0], image[-1, -1]):
        assert tuple(corner) == to_rgba(FACECOLOR)
