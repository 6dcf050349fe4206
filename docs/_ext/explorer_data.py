"""The numbers behind the attention explorer (``docs/explorer.md``), from the package.

The explorer page lets a reader hover, tap or focus a token and see how much it
attends to every token, for the same modules, seeds and sentence as the chapters.
This extension computes those numbers with the ``attention`` package at build time
and writes them into the built site twice:

* ``_static/explorer-data.json``, for anyone (and the site tests) to read;
* ``_static/explorer-data.js``, the same object as ``window.ATTENTION_EXPLORER = ...``,
  which the page loads with a plain ``<script>`` tag: a browser refuses to ``fetch()``
  a file next to a page opened from ``file://``, but runs a script.

Each view holds raw attention *scores*, one ``(T, T)`` matrix per head, and the
factor (``1 / sqrt(d_k)``, or 1 in chapter 1) the module multiplies them by before
its softmax. The page's script (``_static/explorer.js``) turns them into weights
itself, ``softmax(scale * scores / temperature)`` over the visible keys, so that the
temperature slider and the causal toggle work live.

**Drift check.** The explorer must show the chapters' numbers, so every build
compares the exported scores, and the weights they give, with the expected output
that a chapter (or the gallery script) states for the same quantity: the text the
cell would print, rendered from the exported numbers, against the cell's ``expect``
(which ``verify_outputs`` checks against what the cell really prints). Numbers match
as everywhere on the site (:mod:`printed_values`: 1.5 units in the last printed
digit). A difference, or a cell that can no longer be found, is a warning naming the
file and line, and ``-W`` fails the build.

The directive ``.. attention-explorer:: VIEW`` puts one view on a page; the page then
loads the data and the explorer's script and stylesheet.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import yaml
from docutils import nodes
from docutils.parsers.rst import Directive
from printed_values import explain, normalise
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx_gallery.py_source_parser import split_code_and_text_blocks

import attention
from attention import (
    INPUTS,
    TOKENS,
    MultiHeadAttention,
    SelfAttentionV2,
    causal_mask,
    chunked_mask,
    padding_mask,
    scores_for_all,
    sliding_window_mask,
)

logger = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
DATA_JSON = "explorer-data.json"
DATA_JS = "explorer-data.js"
GLOBAL = "ATTENTION_EXPLORER"


# -- The views ------------------------------------------------------------------------


def _matrix(tensor: torch.Tensor) -> list[list[float]]:
    """A float32 matrix as nested lists of the exact same values (JSON numbers)."""
    return tensor.detach().to(torch.float32).tolist()


def weight_free_view() -> dict:
    """Chapter 1: each embedding is its own query and key; scores are dot products."""
    return {
        "title": "Attention without trainable weights",
        "source": "chapters/01-attention-without-weights",
        "tokens": list(TOKENS),
        "query": 1,  # "journey", as in chapter 1
        "scale": 1.0,
        "causal": False,
        "causal_toggle": False,
        "states": [
            {"label": "", "heads": [{"label": "", "scores": _matrix(scores_for_all(INPUTS))}]}
        ],
    }


def trainable_view() -> dict:
    """Chapters 2 and 3: ``SelfAttentionV2`` with the book's seed 789, d_k = 2."""
    torch.manual_seed(789)
    module = SelfAttentionV2(d_in=3, d_out=2)
    with torch.no_grad():
        queries, keys = module.W_query(INPUTS), module.W_key(INPUTS)  # (6, 2) each
        scores = queries @ keys.T  # (6, 6)
        # What the page computes must be what the module computes.
        scale = keys.shape[-1] ** -0.5
        torch.testing.assert_close(
            torch.softmax(scores * scale, dim=-1), module.attention_weights(INPUTS)
        )
    return {
        "title": "Trainable weights, with or without the causal mask",
        "source": "chapters/03-causal-attention",
        "tokens": list(TOKENS),
        "query": 1,
        "scale": scale,
        "causal": True,
        "causal_toggle": True,
        "states": [{"label": "", "heads": [{"label": "", "scores": _matrix(scores)}]}],
    }


def multi_head_view() -> dict:
    """Chapter 4: the two heads of ``MultiHeadAttention(3, 4, 6, 0.0, num_heads=2)``, seed 123."""
    torch.manual_seed(123)
    module = MultiHeadAttention(3, 4, context_length=6, dropout=0.0, num_heads=2)
    x = INPUTS.unsqueeze(0)  # (1, 6, 3)

    def split_heads(projected: torch.Tensor) -> torch.Tensor:  # (6, d_out) -> (heads, 6, head_dim)
        return projected.view(6, module.num_heads, module.head_dim).transpose(0, 1)

    with torch.no_grad():
        queries = split_heads(module.W_query(INPUTS))  # (num_heads, 6, head_dim)
        keys = split_heads(module.W_key(INPUTS))  # (num_heads, 6, head_dim)
        scores = queries @ keys.transpose(1, 2)  # (num_heads, 6, 6)
        scale = module.head_dim**-0.5
        weights = torch.softmax((scores * scale).masked_fill(~causal_mask(6), -torch.inf), dim=-1)
        torch.testing.assert_close(weights, module.attention_weights(x)[0])
    heads = [
        {
            "label": f"head {h + 1}",
            "scores": _matrix(scores[h]),
            "queries": _matrix(queries[h]),
            "keys": _matrix(keys[h]),
        }
        for h in range(module.num_heads)
    ]
    return {
        "title": "Multi-head attention",
        "source": "chapters/04-multi-head-attention",
        "tokens": list(TOKENS),
        "query": 5,
        "scale": scale,
        "causal": True,
        "causal_toggle": False,
        "states": [{"label": "", "heads": heads}],
    }


def trained_view() -> dict:
    """The gallery's previous-token head, on its example sequence, before and after training.

    The task, the model and its training are the gallery script's own
    (gallery/plot_train_previous_token.py): its code blocks run here in order, seed
    and random draws included, up to the one that trains, so that this is the head the
    gallery shows. The scores are read as soon as the model exists, before the training
    block runs, and again once it has its ``checkpoints``; what the script prints is
    dropped, and torch's print options are set back to its defaults.
    """
    _, blocks = split_code_and_text_blocks(str(REPO / GALLERY))
    script: dict = {"__name__": "plot_train_previous_token"}
    states = []

    def snapshot(label: str) -> None:
        model, example = script["model"], script["example"]
        with torch.no_grad():
            x = model.embed(example)  # (1, T, n_embd)
            scores = (model.head.query(x) @ model.head.key(x).transpose(-2, -1))[0]  # (T, T)
            scale = model.head.head_size**-0.5
            torch.testing.assert_close(
                torch.softmax((scores * scale).masked_fill(~model.head.tril, -torch.inf), -1),
                model.attention_weights(example)[0],
            )
        states.append({"label": label, "heads": [{"label": "", "scores": _matrix(scores)}]})

    with printoptions(), contextlib.redirect_stdout(io.StringIO()):
        for block in (block for block in blocks if block.type == "code"):
            if "model" in script and not states:
                snapshot("before training")
            exec(compile(block.content, GALLERY, "exec"), script)
            if "checkpoints" in script:
                snapshot("after training")
                break
        else:
            raise RuntimeError(f"{GALLERY} no longer trains a `model` into `checkpoints`")
    # (step, weight on the previous token over the probe sequences), every 5 steps
    checkpoints, model = script["checkpoints"], script["model"]
    return {
        "title": "A head trained to attend to the previous token",
        "source": "auto_gallery/plot_train_previous_token",
        "tokens": script["labels"],
        "query": 3,  # the second 7: content alone cannot tell it from the first
        "scale": model.head.head_size**-0.5,
        "causal": True,
        "causal_toggle": False,
        "states": states,
        "previous_token_weight": {
            "before": checkpoints[0][1],
            "after": checkpoints[-1][1],
            "sequences": len(script["probe"]),
        },
    }


def _mask(allowed: torch.Tensor) -> list[list[bool]]:
    return allowed.to(torch.bool).tolist()


def masks_view() -> dict:
    """Chapter 12's masks on the running sentence: causal, sliding, chunked, padded.

    Each pattern holds the mask the package builds for every value of its slider
    (window, chunk, or the length of the short text of a padded batch), ``True`` where
    a query (row) may attend a key (column); the page only draws them.
    """
    n = len(TOKENS)
    sizes = range(1, n + 1)
    causal = causal_mask(n)
    padded = []
    for length in sizes:
        real = padding_mask([length, n], n)  # (2, n): the short text, then the sentence
        padded.append(
            {
                "value": length,
                "call": f"causal_mask({n}) & padding_mask([{length}, {n}], {n})[:, None, :]",
                "rule": f"j \u2264 i and j < {length}",
                "allowed": _mask((causal & real[:, None, :])[0]),
                "real": _mask(real),
            }
        )
    return {
        "kind": "masks",
        "title": "Mask patterns",
        "source": "chapters/12-masks",
        "tokens": list(TOKENS),
        "query": 4,  # "one"
        "patterns": [
            {
                "name": "causal",
                "label": "causal",
                "parameter": None,
                "value": None,
                "options": [
                    {
                        "value": None,
                        "call": f"causal_mask({n})",
                        "rule": "j \u2264 i",
                        "allowed": _mask(causal),
                    }
                ],
            },
            {
                "name": "sliding",
                "label": "sliding window",
                "parameter": "window",
                "value": 3,
                "options": [
                    {
                        "value": w,
                        "call": f"sliding_window_mask({n}, {w})",
                        "rule": f"i \u2212 {w} < j \u2264 i",
                        "allowed": _mask(sliding_window_mask(n, w)),
                    }
                    for w in sizes
                ],
            },
            {
                "name": "chunked",
                "label": "chunked",
                "parameter": "chunk",
                "value": 3,
                "options": [
                    {
                        "value": c,
                        "call": f"chunked_mask({n}, {c})",
                        "rule": f"j \u2264 i and i // {c} = j // {c}",
                        "allowed": _mask(chunked_mask(n, c)),
                    }
                    for c in sizes
                ],
            },
            {
                "name": "padding",
                "label": "padding",
                "parameter": "length of the short text",
                "value": 3,
                "options": padded,
            },
        ],
    }


#: The number types the calculator offers, for the cache and for the weights.
CALCULATOR_DTYPES = ("bf16", "fp8", "int8", "int4")
CALCULATOR_STATE_DTYPE = "fp32"  # transformers keeps the recurrent states in float32
#: The contexts the calculator's slider stops at: 1k to 1M tokens, doubling.
CALCULATOR_CONTEXTS = tuple(2**p for p in range(10, 21))


def layer_groups(facts) -> list[dict]:
    """A model's layers, grouped by what each keeps, in the numbers the bill counts.

    A layer holds, after ``t`` tokens, ``per_token * min(t, cap) + fixed + index * t
    + compressed(t)`` numbers in the cache's type (keys and values, a window's worth
    at most where ``cap`` is set; the convolution windows; the indexer's keys;
    DeepSeek-V4's compressed entries) and ``state`` numbers in the state's type, as
    :func:`~attention.models.layer_cache_numbers` counts them. Layers alike in
    all of these form one group, with their ``count``.
    """
    from attention.models import CSA, HCA, INDEXED, costs

    index = facts.indexer.head_dim if facts.indexer is not None else 0
    local = facts.local
    empty = costs.layer_cache_numbers(facts, 0)
    groups: dict[tuple, dict] = {}
    for kind, per_token, (fixed, state) in zip(
        facts.layer_types, costs.layer_kv_cache_bytes_per_token(facts, 1), empty, strict=True
    ):
        capped = local is not None and local.tokens_kept is not None
        windowed = kind in (CSA, HCA) and facts.compressed is not None
        cap = local.tokens_kept if capped and (kind == local.kind or windowed) else None
        compressed = None
        if kind in (CSA, HCA):
            csa = kind == CSA
            rate = facts.compressed.csa_rate if csa else facts.compressed.hca_rate
            widths = [facts.head_dim, facts.indexer.head_dim] if csa else [facts.head_dim]
            compressed = {"rate": rate, "widths": widths, "wide": 2 if csa else 1, "overlap": csa}
        layer = {
            "kind": kind,
            "per_token": per_token,
            "cap": cap,
            "fixed": fixed,
            "index": index if kind == INDEXED else 0,
            "compressed": compressed,
            "state": state,
        }
        key = json.dumps(layer, sort_keys=True)
        if key in groups:
            groups[key]["count"] += 1
        else:
            groups[key] = {**layer, "count": 1}
    return list(groups.values())


def calculator_view() -> dict:
    """The calculator: every model of MODELS as the bill counts it, per group of layers.

    The page computes the bill itself, as :func:`calculator_bill` does here (which the
    tests compare with :func:`attention.models.bill` and
    :func:`~attention.models.cache_bytes`).
    """
    from model_cards import kind_name, slug

    from attention.models import BITS, MODELS

    models = []
    for facts in MODELS.values():
        kinds = list(dict.fromkeys(facts.layer_types))
        models.append(
            {
                "name": facts.name,
                "page": f"models/{slug(facts.name)}.html",
                "layers": facts.layers,
                "trained_context": facts.trained_context,
                "context_label": facts.context_label,  # trained, supported or configured
                "max_position_embeddings": facts.max_position_embeddings,
                "parameters": facts.weights.parameters if facts.weights else None,
                "encoder": facts.bidirectional,
                "cross": facts.cross is not None,
                "kinds": [{"kind": k, "label": kind_name(facts, k)} for k in kinds],
                "groups": layer_groups(facts),
            }
        )
    names = [m["name"] for m in models]
    return {
        "kind": "calculator",
        "title": "What a model's cache and weights take",
        "source": "models/index",
        "models": models,
        "model": names.index("gpt-oss-20b") if "gpt-oss-20b" in names else 0,
        "bits": {d: BITS[d] for d in (*CALCULATOR_DTYPES, CALCULATOR_STATE_DTYPE)},
        "dtypes": list(CALCULATOR_DTYPES),
        "state_dtype": CALCULATOR_STATE_DTYPE,
        "contexts": list(CALCULATOR_CONTEXTS),
        "tokens": 128 * 1024,
        "batch": 1,
    }


def layer_numbers(group: dict, tokens: int) -> int:
    """Numbers one layer of ``group`` keeps in the cache's type after ``tokens`` tokens."""
    kept = tokens if group["cap"] is None else min(tokens, group["cap"])
    numbers = group["per_token"] * kept + group["fixed"] + group["index"] * tokens
    compressed = group["compressed"]
    if compressed is not None:
        entries, waiting = divmod(tokens, compressed["rate"])
        overlap = 2 * compressed["rate"] if compressed["overlap"] and entries else 0
        numbers += sum(
            entries * w + waiting * 2 * compressed["wide"] * w + overlap * w
            for w in compressed["widths"]
        )
    return numbers


def calculator_bill(
    view: dict, model: int, tokens: int, batch: int, cache_dtype: str, weight_dtype: str
) -> dict:
    """The bill as the calculator's page computes it, from the exported data alone:
    ``{"per_kind": {kind: bytes}, "cache": bytes, "weights": bytes or None}``."""
    data = view["models"][model]
    bits = view["bits"]
    per_kind = {k["kind"]: 0 for k in data["kinds"]}
    for group in data["groups"]:
        numbers = layer_numbers(group, tokens)
        layer = -(-(numbers * bits[cache_dtype] + group["state"] * bits[view["state_dtype"]]) // 8)
        per_kind[group["kind"]] += group["count"] * batch * layer
    parameters = data["parameters"]
    weights = None if parameters is None else -(-parameters * bits[weight_dtype] // 8)
    return {"per_kind": per_kind, "cache": sum(per_kind.values()), "weights": weights}


VIEWS: dict[str, Callable[[], dict]] = {
    "weight-free": weight_free_view,
    "trainable": trainable_view,
    "multi-head": multi_head_view,
    "trained": trained_view,
    "masks": masks_view,
    "calculator": calculator_view,
}


def export() -> dict:
    """Every view's data, computed now from the package, with the random state restored.

    On one thread (restored after): on tensors this small a second thread costs more
    than it shares (the trained view took 1.2 s of CPU time on one thread and 7.8 s on
    two, on a busy 2-core AMD EPYC).
    """
    state, threads = torch.random.get_rng_state(), torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        views = {name: make() for name, make in VIEWS.items()}
    finally:
        torch.random.set_rng_state(state)
        torch.set_num_threads(threads)
    return {"version": attention.__version__, "views": views}


# -- Weights from the exported scores, as the page computes them -----------------------


def weights(
    view: dict, state: int = 0, head: int = 0, causal: bool | None = None, temperature: float = 1.0
) -> torch.Tensor:
    """``softmax(scale * scores / temperature)`` of one head, masked if causal; float32."""
    scores = torch.tensor(view["states"][state]["heads"][head]["scores"])
    scaled = scores * view["scale"] / temperature
    if view["causal"] if causal is None else causal:
        future = torch.ones_like(scaled, dtype=torch.bool).triu(diagonal=1)
        scaled = scaled.masked_fill(future, -torch.inf)
    return torch.softmax(scaled, dim=-1)


def causal_scores(view: dict) -> torch.Tensor:
    scores = torch.tensor(view["states"][0]["heads"][0]["scores"])
    return scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), -torch.inf)


def evenly(length: int) -> float:
    """The weight on the previous token if every row spread its weight evenly."""
    return sum(1 / (t + 1) for t in range(1, length)) / (length - 1)


# -- The drift check ----------------------------------------------------------------------


@dataclass(frozen=True)
class Printed:
    """A chapter cell (or gallery print) whose output the explorer's data must reproduce.

    ``marker`` is a line of its code; ``render`` writes, from the exported data, the
    text that the cell prints.
    """

    path: str  # relative to the repository root
    marker: str
    render: Callable[[dict], str]


def _tensor_text(*tensors: torch.Tensor) -> str:
    """How the chapters print tensors: torch's repr, 4 decimals, no scientific notation."""
    with printoptions(precision=4, sci_mode=False):
        return "\n".join(str(t) for t in tensors)


@contextlib.contextmanager
def printoptions(**options):
    """torch's print options set to ``options``, then to torch's defaults again: torch
    has no public way to read them back, and nothing else in the build prints tensors."""
    torch.set_printoptions(**options)
    try:
        yield
    finally:
        torch.set_printoptions(profile="default")


def _v(data: dict, name: str) -> dict:
    return data["views"][name]


CH1 = "docs/chapters/01-attention-without-weights.md"
CH2 = "docs/chapters/02-trainable-weights.md"
CH3 = "docs/chapters/03-causal-attention.md"
CH4 = "docs/chapters/04-multi-head-attention.md"
CH11 = "docs/chapters/12-masks.md"
GALLERY = "gallery/plot_train_previous_token.py"


def option(view: dict, pattern: str, value: int | None = None) -> dict:
    """The mask view's data for one pattern at one slider value."""
    [found] = (p for p in view["patterns"] if p["name"] == pattern)
    [chosen] = (o for o in found["options"] if o["value"] == value)
    return chosen


def _ch11_mask(pattern: str, value: int | None, key: str = "allowed") -> Callable[[dict], str]:
    return lambda d: _tensor_text(torch.tensor(option(_v(d, "masks"), pattern, value)[key]))


def _ch4_queries(data: dict) -> str:
    heads = _v(data, "multi-head")["states"][0]["heads"]
    journey = torch.tensor([head["queries"][1] for head in heads])  # (num_heads, head_dim)
    return _tensor_text(journey.flatten(), journey)


def _previous_before(data: dict) -> str:
    view = _v(data, "trained")
    before = view["previous_token_weight"]["before"]
    return (
        f"weight on the previous token before training: {before:.2f}, "
        f"evenly: {evenly(len(view['tokens'])):.2f}"
    )


def _previous_after(data: dict) -> str:
    after = _v(data, "trained")["previous_token_weight"]["after"]
    return f"weight on the previous token after training > 0.8: {after > 0.8}"


CHECKS: tuple[Printed, ...] = (
    Printed(
        CH1,
        "all_scores[i, j] = torch.dot(x_i, x_j)",
        lambda d: _tensor_text(
            torch.tensor(_v(d, "weight-free")["states"][0]["heads"][0]["scores"])
        ),
    ),
    Printed(
        CH1,
        "weights = attention_weights(scores)",
        lambda d: _tensor_text(weights(_v(d, "weight-free"))[1]),
    ),
    Printed(
        CH1,
        "all_weights = torch.softmax(all_scores, dim=-1)",
        lambda d: _tensor_text(w := weights(_v(d, "weight-free")), w.sum(dim=-1)),
    ),
    Printed(
        CH2,
        "weights_v2 = sa_v2.attention_weights(INPUTS)",
        lambda d: _tensor_text(weights(_v(d, "trainable"), causal=False)),
    ),
    Printed(
        CH3,
        "scores = queries @ keys.T  # (6, 6): row i holds query i's scores",
        lambda d: _tensor_text(weights(_v(d, "trainable"), causal=False)),
    ),
    Printed(
        CH3,
        "masked_scores = scores.masked_fill(mask.bool(), -torch.inf)",
        lambda d: _tensor_text(causal_scores(_v(d, "trainable"))),
    ),
    Printed(
        CH3,
        "causal_weights = torch.softmax(\n    masked_scores",
        lambda d: _tensor_text(weights(_v(d, "trainable"), causal=True)),
    ),
    Printed(CH4, "print(queries[0, 1])  # 4 features", _ch4_queries),
    Printed(CH11, "causal = torch.ones(6, 6, dtype=torch.bool).tril()", _ch11_mask("causal", None)),
    Printed(CH11, "window = sliding_window_mask(6, 3)", _ch11_mask("sliding", 3)),
    Printed(CH11, "real = padding_mask(lengths, 6)", _ch11_mask("padding", 3, "real")),
    Printed(GALLERY, 'print(f"weight on the previous token before training', _previous_before),
    Printed(GALLERY, 'print(f"weight on the previous token after training', _previous_after),
)

_FENCE = re.compile(r"^(`{3,}|~{3,})\{code-cell\}")
_GRAD_FN = re.compile(r",\s*grad_fn=<\w+>")


def expected_output(path: Path, marker: str) -> tuple[int, str] | None:
    """The line and the expected output of the chapter cell, or gallery print, with ``marker``.

    In a chapter, the ``expect`` of the first code cell whose code has ``marker`` in it;
    in a gallery script, the ``# Expected output:`` comment after the line with ``marker``.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    if path.suffix == ".py":
        for number, line in enumerate(lines):
            if marker not in line:
                continue
            rest = lines[number + 1 :]
            start = next((i for i, s in enumerate(rest) if s.strip() == "# Expected output:"), None)
            if start is None:
                return None
            comment = []
            for line_after in rest[start + 1 :]:
                if not line_after.lstrip().startswith("#"):
                    break
                comment.append(line_after.strip().removeprefix("#").removeprefix(" "))
            return number + 1, "\n".join(comment)
        return None
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        i += 1
        if not fence:
            continue
        start, meta = i, {}
        if i < len(lines) and lines[i].strip() == "---":
            end = lines.index("---", i + 1)
            meta = yaml.safe_load("\n".join(lines[i + 1 : end])) or {}
            i = end + 1
        body = i
        while i < len(lines) and lines[i].rstrip() != fence.group(1):
            i += 1
        if marker in "\n".join(lines[body:i]) and "expect" in meta:
            return start, meta["expect"]
    return None


def drift(data: dict, root: Path = REPO) -> list[tuple[str, str]]:
    """Where the exported data disagrees with the chapters: ``(location, message)`` pairs."""
    problems = []
    for check in CHECKS:
        found = expected_output(root / check.path, check.marker)
        if found is None:
            problems.append(
                (
                    check.path,
                    f"the explorer's drift check found no expected output for the "
                    f"code {check.marker!r}; update CHECKS in docs/_ext/explorer_data.py",
                )
            )
            continue
        line, expect = found
        expected = normalise(_GRAD_FN.sub("", expect))
        problem = explain(expected, normalise(check.render(data)))
        if problem:
            problems.append(
                (
                    f"{check.path}:{line}",
                    f"the attention explorer's data differs from what this cell prints: {problem}",
                )
            )
    return problems


# -- Sphinx ---------------------------------------------------------------------------------


class ExplorerNode(nodes.General, nodes.Element):
    """Where one view of the explorer goes; explorer.js fills it in."""


def visit_explorer_html(translator, node: ExplorerNode) -> None:
    view = node["view"]
    translator.body.append(
        f'<div class="attention-explorer" data-view="{view}" id="explorer-{view}">'
        '<p class="ae-noscript">This interactive view needs JavaScript.</p>'
    )


def depart_explorer_html(translator, node: ExplorerNode) -> None:
    translator.body.append("</div>")


class ExplorerDirective(Directive):
    """``.. attention-explorer:: VIEW``: one view of the attention explorer."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        view = self.arguments[0]
        if view not in VIEWS:
            raise self.error(f"unknown explorer view {view!r}; expected one of {sorted(VIEWS)}")
        node = ExplorerNode()
        node["view"] = view
        return [node]


def on_html_page_context(app: Sphinx, pagename: str, templatename, context, doctree) -> None:
    if doctree is not None and doctree.next_node(ExplorerNode) is not None:
        app.add_css_file("explorer.css")
        app.add_js_file(DATA_JS)
        app.add_js_file("explorer.js")


def on_build_finished(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    data = export()
    problems = drift(data, Path(app.config.attention_explorer_root))
    for location, message in problems:
        logger.warning(message, location=location)
    logger.info(
        "explorer_data: %d views exported; %d printed outputs of the chapters and gallery "
        "checked against them, %d differ",
        len(data["views"]),
        len(CHECKS),
        len(problems),
    )
    if app.builder.name == "epub":
        return  # the EPUB (nox -s book) runs no script: the explorer's data stays out
    static = Path(app.outdir) / "_static"
    static.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, separators=(",", ":"))
    (static / DATA_JSON).write_text(text + "\n", encoding="utf-8")
    (static / DATA_JS).write_text(
        "// The attention explorer's numbers, computed by docs/_ext/explorer_data.py.\n"
        f"window.{GLOBAL} = {text};\n",
        encoding="utf-8",
    )


def setup(app: Sphinx) -> dict:
    # Where the chapters and gallery are, for the drift check: this repository.
    app.add_config_value("attention_explorer_root", str(REPO), "env", types=[str])
    app.add_node(ExplorerNode, html=(visit_explorer_html, depart_explorer_html))
    app.add_directive("attention-explorer", ExplorerDirective)
    app.connect("html-page-context", on_html_page_context)
    app.connect("build-finished", on_build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
