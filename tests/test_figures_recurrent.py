"""Tests of attention.figures.recurrent: the delta rule and Gated DeltaNet.

matplotlib, on the Agg backend.
"""

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")  # no display: render off-screen, before pyplot is imported

import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from figure_helpers import (  # noqa: E402
    X,
    drawn,
    numbers,
)

from attention import (  # noqa: E402
    MODELS,
    gated_delta_rule,
)
from attention.figures import (  # noqa: E402
    delta_chunks,
    delta_rule_step,
    gated_deltanet_diagram,
    labelled_texts,
)
from attention.models import layer_state_bytes  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def running_state(tokens: int, beta: float = 1.0) -> torch.Tensor:
    x = X.view(1, 6, 1, 3)[:, :tokens]
    _, state = gated_delta_rule(
        x, x, x, torch.zeros(1, tokens, 1), torch.full((1, tokens, 1), beta)
    )
    return state[0, 0]


@pytest.mark.parametrize("beta", [1.0, 0.5])
def test_delta_rule_step_draws_the_state_gated_delta_rule_computes(beta):
    state, k, v = running_state(3), X[3], X[4]
    fig = delta_rule_step(state, k, v, beta)
    drawn(fig)
    x = lambda t: t.view(1, 1, 1, -1)  # noqa: E731
    _, after = gated_delta_rule(
        x(k),
        x(k),
        x(v),
        torch.zeros(1, 1, 1),
        torch.full((1, 1, 1), beta),
        initial_state=state[None, None],
    )
    assert torch.allclose(numbers(fig, "before", (3, 3)), state.double(), atol=0.006)
    assert torch.allclose(numbers(fig, "after", (3, 3)), after[0, 0].double(), atol=0.006)
    write = numbers(fig, "write", (3, 3))
    # The write is what turns the state before into the state after, and it is rank one:
    # the key's column times the error's row.
    assert torch.allclose(write, (after[0, 0] - state).double(), atol=0.011)
    unit = k / k.norm()
    error = numbers(fig, "error", (3,))
    assert torch.allclose(numbers(fig, "k", (3,)), unit.double(), atol=0.006)
    assert torch.allclose(error, beta * (v - state.T @ unit).double(), atol=0.006)
    assert torch.allclose(write, torch.outer(unit.double(), error), atol=0.011)
    read = numbers(fig, "read", (3,))
    assert torch.allclose(read, (after[0, 0].T @ unit).double(), atol=0.006)
    if beta == 1.0:  # the corrected state returns the value for the key
        assert torch.allclose(read, v.double(), atol=0.006)


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((torch.zeros(3, 3), [1.0, 0, 0], torch.zeros(3)), TypeError, "k as a torch.Tensor"),
        ((torch.zeros(3, 3), torch.zeros(2), torch.zeros(3)), ValueError, "k of 3 and v of 3"),
        ((torch.zeros(7, 3), torch.zeros(7), torch.zeros(3)), ValueError, "1 to 6 entries"),
        ((torch.zeros(2, 2), torch.ones(2), torch.ones(2), 1.5), ValueError, r"beta in \[0, 1\]"),
        ((torch.zeros(2, 2), torch.ones(2), torch.ones(2), "1"), TypeError, "beta as a number"),
    ],
)
def test_delta_rule_step_rejects_what_it_cannot_draw(args, error, message):
    with pytest.raises(error, match=rf"delta_rule_step: expected .*{message}"):
        delta_rule_step(*args)


@pytest.mark.parametrize(("tokens", "chunk"), [(6, 4), (6, 2), (5, 5), (7, 3)])
def test_delta_chunks_cuts_where_the_chunked_form_cuts(tokens, chunk):
    fig = delta_chunks(tokens, chunk)
    drawn(fig)
    patches = fig.axes[0].patches
    starts = list(range(0, tokens, chunk))
    for c, start in enumerate(starts):
        members = [
            int(p.get_gid().split()[1])
            for p in patches
            if (p.get_gid() or "").startswith("token ") and p.get_label() == f"chunk {c}"
        ]
        assert members == list(range(start, min(start + chunk, tokens)))
        n = len(members)
        cells = {
            tuple(map(int, p.get_gid().split()[2:])): p.get_label() == "masked"
            for p in patches
            if (p.get_gid() or "").startswith(f"chunk {c} ")
        }
        tril = torch.ones(n, n, dtype=torch.bool).tril()
        assert cells == {(i, j): not bool(tril[i, j]) for i in range(n) for j in range(n)}
    states = [p for p in patches if (p.get_gid() or "").startswith("state ")]
    assert len(states) == len(starts) + 1
    # The state passed between chunks is all a chunk needs: running the chunks one by
    # one, each from the state the previous one left, gives the one-pass numbers.
    x = torch.randn(1, tokens, 1, 3)
    g, beta = -torch.rand(1, tokens, 1), torch.rand(1, tokens, 1)
    whole, _ = gated_delta_rule(x, x, x, g, beta, chunk_size=chunk)
    state, outs = None, []
    for start in starts:
        part = slice(start, start + chunk)
        out, state = gated_delta_rule(
            x[:, part], x[:, part], x[:, part], g[:, part], beta[:, part], initial_state=state
        )
        outs.append(out)
    assert torch.allclose(torch.cat(outs, dim=1), whole, atol=1e-5)
    steps = [t.get_text() for t in fig.axes[0].texts if t.get_gid() == "steps"]
    assert steps == [
        f"{tokens} tokens in chunks of {chunk}: {len(starts)} sequential steps instead of {tokens}"
    ]


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((6, 7), ValueError, "chunk_size from 1 to 6"),
        ((6.0, 2), TypeError, "num_tokens as an int"),
        ((17, 2), ValueError, "num_tokens from 1 to 16"),
        ((3, 2, ["a"]), ValueError, "3 labels"),
    ],
)
def test_delta_chunks_rejects_what_it_cannot_draw(args, error, message):
    with pytest.raises(error, match=rf"delta_chunks: expected {message}"):
        delta_chunks(*args)


def test_gated_deltanet_diagram_state_is_the_state_the_facts_count():
    m = MODELS["Qwen3-Next 80B-A3B"]
    fig = gated_deltanet_diagram(m)
    drawn(fig)
    texts = labelled_texts(fig)
    linear = m.local
    heads, dk, dv = linear.num_value_heads, linear.key_head_dim, linear.value_head_dim
    assert texts["state"] == f"state S: {heads} heads × {dk} × {dv}"
    # ModelFacts counts the same state in float32, beside the convolution's window.
    conv = (2 * linear.num_key_heads * dk + heads * dv) * linear.conv_kernel_dim * 2
    linear_layer = m.layer_types.index("linear_attention")
    assert layer_state_bytes(m)[linear_layer] == conv + 4 * heads * dk * dv
    assert f"{linear.conv_kernel_dim} taps" in texts["conv"]
    assert texts["qkv"].startswith(f"q, k: {linear.num_key_heads} heads × {dk}")
    with pytest.raises(ValueError, match=r"gated_deltanet_diagram: expected a model with"):
        gated_deltanet_diagram("Kimi Linear")  # Kimi Delta Attention is another layer
