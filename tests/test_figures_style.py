"""Tests of attention.figures.style: the look and the primitives every figure shares.

matplotlib, on the Agg backend.
"""

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")  # no display: render off-screen, before pyplot is imported

import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from attention.figures import (  # noqa: E402
    SMALLEST_TEXT_POINTS,
    head_split,
    heatmap,
    labelled_texts,
    matrix_form,
    roadmap,
    scaled_dot_product_diagram,
    smallest_text_points,
)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_labelled_texts_reads_the_texts_with_a_gid_of_the_first_axes():
    fig, (ax, other) = plt.subplots(1, 2)
    ax.text(0, 0, "kept", gid="a")
    ax.text(0, 0, "no gid")
    other.text(0, 0, "other axes", gid="b")
    assert labelled_texts(fig) == {"a": "kept"}


def test_labelled_texts_refuses_what_is_not_a_figure_with_axes():
    with pytest.raises(TypeError, match="expected a matplotlib Figure, got Axes"):
        labelled_texts(plt.subplots()[1])
    with pytest.raises(ValueError, match="expected a figure with axes, got one with none"):
        labelled_texts(plt.figure())


@pytest.mark.parametrize("draw", [roadmap, matrix_form, head_split, scaled_dot_product_diagram])
def test_a_title_goes_above_the_drawing_in_room_of_its_own(draw):
    plain = draw()
    titled = draw(title="A diagram\non two lines")
    assert titled.get_suptitle() == "A diagram\non two lines"
    width, height = plain.get_size_inches()
    assert titled.get_size_inches()[0] == pytest.approx(width)
    assert titled.get_size_inches()[1] > height  # the drawing keeps its size
    assert titled.axes[0].get_position().y1 < 1.0
    with pytest.raises(TypeError, match=rf"{draw.__name__}: title must be a string or None"):
        draw(title=3)


@pytest.mark.parametrize("draw", [roadmap, matrix_form, head_split, scaled_dot_product_diagram])
def test_a_long_title_is_wrapped_to_the_figure_and_never_cut_at_its_edges(draw):
    words = "Scaled dot-product attention, bottom to top: MatMul, Scale, Mask (opt.), "
    fig = draw(title=words * 3)
    fig.canvas.draw()
    title = fig._suptitle.get_window_extent()
    edges = fig.bbox
    assert edges.x0 <= title.x0 and title.x1 <= edges.x1
    assert title.y1 <= edges.y1
    assert fig.get_suptitle().replace("\n", " ") == (words * 3).strip()
    plt.close(fig)


def test_smallest_text_points_finds_the_smallest_label_ticks_included():
    fig, ax = plt.subplots()
    ax.set_title("a title", fontsize=12)
    ax.set_xticks([0, 1], ["a", "b"], fontsize=6.5)
    ax.text(0.5, 0.5, "", fontsize=3)  # empty: nothing to read
    assert smallest_text_points(fig) == 6.5
    with pytest.raises(TypeError, match=r"smallest_text_points: expected a matplotlib Figure"):
        smallest_text_points(ax)


def test_heatmap_annotations_never_go_under_the_sites_smallest_text():
    # Twelve by twelve cells in a small figure: each cell is about 10 points wide.
    _, ax = plt.subplots(figsize=(2, 2))
    heatmap(torch.rand(12, 12), ax=ax)
    assert smallest_text_points(ax.figure) >= SMALLEST_TEXT_POINTS
