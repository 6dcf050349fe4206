"""A page per model of :data:`~attention.models.table.MODELS`, written when the build starts.

Each model's card (``docs/models/<slug>.md``) and the index of the cards
(``docs/models/index.md``) are generated from the table, never typed: add an entry to
``MODELS`` and the next build has its card. The pages are plain MyST Markdown, not
notebooks: every number on them is computed here, by the functions the package offers
(:func:`attention.models.bill`, :func:`~attention.models.recipe`,
:func:`~attention.models.cache_bytes`), and ``tests/docs/test_model_cards.py`` reads
them back against those functions: this module is a computation the build verifies.

A card holds:

* the recipe (:func:`attention.models.recipe`), one clause a line, each mechanism
  linked to the chapter section that builds it;
* the layer strip (:func:`attention.figures.layers.layer_strips`), with alt text computed
  from the layers, and the strip as text (:func:`attention.models.layer_strip`);
* the cache of one sequence at 8k, 32k and 128k tokens and at the model's context (trained,
  supported or configured, as its source says: ``context_claim``),
  in bf16 and fp8, with the fixed state, and per kind of layer;
* the weights, where the table cites a parameter count;
* the config fields that matter, each linked to the glossary (``docs/glossary.md``);
* the ``transformers`` classes that run its attention, read from ``transformers``'
  own source files (nothing is imported);
* what is unusual about it, computed from its facts and the rest of the table.

The pages and the figures live in ``docs/models/``, which git ignores. A page or a
figure is rewritten only when its content changes (a figure: when the model's facts,
``attention/figures/layers.py``, ``attention/figures/style.py`` or matplotlib's version
do), so that a warm build redraws nothing and ``sphinx-autobuild`` does not rebuild
forever.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import re
from functools import cache
from pathlib import Path
from typing import NamedTuple

import torch
from sphinx.application import Sphinx
from sphinx.util import logging

import attention.figures.caches
import attention.figures.heatmaps
import attention.figures.layers
import attention.figures.style
from attention.models import (
    BITS,
    CHUNKED,
    CONV,
    CROSS,
    CSA,
    FULL,
    HCA,
    HYBRID,
    INDEXED,
    LINEAR,
    MAMBA,
    MODELS,
    NO_MIXER,
    SLIDING,
    Chunked,
    ModelFacts,
    Sliding,
    bill,
    cache_profile,
    cross_cache_bytes,
    format_number,
    layer_strip,
    parameter_count,
    recipe,
    released_config,
    released_config_source,
    released_parameters,
)

logger = logging.getLogger(__name__)

FOLDER = "models"  # under docs/
STRIPS = "_strips"  # under docs/models/: the figures
#: The contexts every card gives the cache at, besides the model's own context.
CONTEXTS = (8 * 1024, 32 * 1024, 128 * 1024)
#: What a cache row past the model's context is not, by what its source says of it
#: (``ModelFacts.context_claim``).
PAST_CONTEXT = {
    "trained": "what the model was trained to read",
    "supported": "what its release says it reads",
    "configured": "positions its config allows",
}
CACHE_DTYPES = ("bf16", "fp8")
WEIGHT_DTYPES = ("bf16", "fp8", "int4")
STATE_DTYPE = "fp32"  # transformers keeps the recurrent states in float32


def slug(name: str) -> str:
    """A model's page name: its name in lower case, words joined by hyphens.

    >>> slug("Qwen3.5 397B-A17B"), slug("gpt-oss-20b")
    ('qwen3-5-397b-a17b', 'gpt-oss-20b')
    """
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def card_doc(facts: ModelFacts) -> str:
    """The card's docname, absolute from the docs folder: ``/models/<slug>``."""
    return f"/{FOLDER}/{slug(facts.name)}"


# -- numbers as the cards write them --------------------------------------------------


def size(nbytes: int | float) -> str:
    """Bytes in binary units: 2 decimals from a GiB up, 1 from a KiB, else whole.

    >>> size(3 * 2**30), size(1536), size(100)
    ('3.00 GiB', '1.5 KiB', '100 bytes')
    """
    for unit, power, decimals in (("TiB", 40, 2), ("GiB", 30, 2), ("MiB", 20, 1), ("KiB", 10, 1)):
        if nbytes >= 2**power:
            return f"{nbytes / 2**power:,.{decimals}f} {unit}"
    return f"{nbytes:,.0f} bytes"


def tokens_text(tokens: int) -> str:
    """``131,072 (128k)``: a context in tokens, with its k or M where it is a whole one.

    >>> tokens_text(131072), tokens_text(1048576), tokens_text(1000)
    ('131,072 (128k)', '1,048,576 (1M)', '1,000')
    """
    text = f"{tokens:,}"
    if tokens % 2**20 == 0:
        return f"{text} ({tokens // 2**20:,}M)"
    if tokens % 1024 == 0:
        return f"{text} ({tokens // 1024:,}k)"
    return text


# -- links into the chapters ------------------------------------------------------------


def ref(label: str, text: str) -> str:
    return f"{{ref}}`{text} <{label}>`"


def doc(name: str, text: str) -> str:
    return f"{{doc}}`{text} </chapters/{name}>`"


ADDRESS = re.compile(r"(?<![(<])(https://[^\s)>]+[\w/])")
ARXIV = re.compile(r"\barXiv (\d{4}\.\d{4,5})\b")
# A page named by its address without a scheme, as the table's sources write them.
BARE_ADDRESS = re.compile(r"(?<![/\w])((?:github\.com|huggingface\.co)/[\w./-]*[\w/])")


def linked(source: str) -> str:
    """A source from the model table, as Markdown: every address (``https://...``), every
    arXiv id and every github.com or huggingface.co address written without its scheme
    becomes a link.

    >>> linked("https://huggingface.co/openai-community/gpt2/blob/main/config.json (n_layer)")
    '<https://huggingface.co/openai-community/gpt2/blob/main/config.json> (n_layer)'

    >>> linked("the gpt-oss model card (arXiv 2508.10925), section 2")
    'the gpt-oss model card ([arXiv 2508.10925](https://arxiv.org/abs/2508.10925)), section 2'
    >>> linked("huggingface.co/bigscience/bloom: 'Sequence length'")
    "[huggingface.co/bigscience/bloom](https://huggingface.co/bigscience/bloom): 'Sequence length'"
    """
    text = ADDRESS.sub(r"<\1>", source)
    text = ARXIV.sub(r"[arXiv \1](https://arxiv.org/abs/\1)", text)
    return BARE_ADDRESS.sub(r"[\1](https://\1)", text)


def term(field: str, text: str | None = None) -> str:
    """A config field, linked to its glossary entry (under another name in some configs)."""
    return f"{{term}}`{text} <{field}>`" if text and text != field else f"{{term}}`{field}`"


#: Phrases of :func:`attention.models.recipe`, each linked to what explains it: a
#: section label or a chapter. Tried in this order at each position of the text, so a
#: longer phrase comes before one it contains.
RECIPE_LINKS: tuple[tuple[str, str, str], ...] = (
    (r"sliding \(window [\d,]+\)", "ref", "local-global-layers"),
    (r"chunked \(chunk [\d,]+\)", "ref", "chunks-and-nope"),
    (r"local \([\d,]+ positions each side\)", "ref", "bidirectional-local"),
    (r"Gated DeltaNet", "doc", "21-gated-deltanet"),
    (r"Kimi Delta Attention", "ref", "kimi-delta-attention"),
    (r"Mamba-2", "doc", "23-mamba2-ssd"),
    (r"Lightning Attention", "ref", "linear-state"),
    (r"DeepSeek Sparse Attention \(top [\d,]+\)", "ref", "index-topk"),
    (r"compressed sparse|heavily compressed", "doc", "25-compressed-attention"),
    (r"reuse earlier layers' keys and values", "ref", "kv-sharing"),
    (r"keys as values|the key serving as the value", "ref", "keys-as-values"),
    (r"MLA", "doc", "13-latent-attention"),
    (r"a latent of [\d,]+", "ref", "mla-cache"),
    (r"\b(?:GQA|MQA|MHA)\b", "ref", "gqa"),
    (r"no position encoding \(NoPE\)", "ref", "chunks-and-nope"),
    (r"learned positions", "ref", "learned-positions"),
    (r"ALiBi", "ref", "alibi"),
    (r"an encoder: attends both ways, no cache", "ref", "encoder-attention"),
    (r"cross-attention in every layer", "ref", "cross-attention-cache"),
    (r"cross-attention in [\d,]+ layers|cross-attention$", "ref", "cross-attention-layers"),
    (r"no RoPE every \w+ layer \(NoPE\)", "ref", "chunks-and-nope"),
    (r"RoPE(?= \(base)", "doc", "11-rope"),
    (r"YaRN", "ref", "yarn"),
    (r"Llama 3 scaling", "ref", "llama3-scaling"),
    (r"linear scaling", "ref", "position-interpolation"),
    (r"dynamic NTK", "ref", "ntk-scaling"),
    (r"LongRoPE", "doc", "14-longer-contexts"),
    (r"proportional on full layers", "ref", "proportional-rope"),
    (r"on [\d.]+% of each head", "ref", "partial-rotary"),
    (r"QK-norm[\w ,]*?(?=$|,|;)", "ref", "qk-norm"),
    (r"value norm", "ref", "keys-as-values"),
    (r"output gate", "ref", "output-gate"),
    (r"sinks", "ref", "sinks"),
    (r"scores scaled by [\d.]+\^-0\.5", "ref", "query-pre-attn-scalar"),
    (r"softcapping at [\d.,]+", "ref", "softcapping"),
    (r"temperature tuning on NoPE layers", "ref", "temperature-tuning"),
    (r"cache per token", "ref", "kv-cache-memory"),
)
_RECIPE = re.compile(
    "|".join(f"(?P<g{i}>{pattern})" for i, (pattern, _, _) in enumerate(RECIPE_LINKS))
)


def link_recipe(text: str) -> str:
    """The recipe's text with each mechanism it names linked to its chapter section.

    >>> link_recipe("GQA, 8 heads; sinks")
    '{ref}`GQA <gqa>`, 8 heads; {ref}`sinks <sinks>`'
    """

    def linked(match: re.Match) -> str:
        index = int(match.lastgroup[1:])
        _, kind, target = RECIPE_LINKS[index]
        phrase = match.group(0)
        return ref(target, phrase) if kind == "ref" else doc(target, phrase)

    return _RECIPE.sub(linked, text)


def clauses(text: str) -> list[str]:
    """``text`` split at each ``"; "`` outside brackets.

    >>> clauses("RoPE (base 10; 5 on sliding layers); sinks")
    ['RoPE (base 10; 5 on sliding layers)', 'sinks']
    """
    found, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and text.startswith("; ", i):
            found.append(text[start:i])
            start = i + 2
    return [*found, text[start:]]


def recipe_clauses(facts: ModelFacts) -> list[str]:
    """The recipe, one clause a line (its name left out: the page's title says it)."""
    text = recipe(facts).removeprefix(f"{facts.name}: ")
    return [link_recipe(clause) for clause in clauses(text)]


# -- the layers -------------------------------------------------------------------------

KIND_NAMES = {
    FULL: "full-attention",
    CROSS: "cross-attention",
    NO_MIXER: "MLP-only (no token mixing)",
    CSA: "compressed sparse",
    HCA: "heavily compressed",
    CONV: "gated short-convolution",
}


def kind_name(facts: ModelFacts, kind: str) -> str:
    """A kind of layer as the cards name it, with its size: "N {kind_name} layers"."""
    local = facts.local
    if kind == SLIDING and facts.bidirectional:
        return f"local ({local.window:,} positions each side)"
    if kind == SLIDING:
        return f"sliding-window ({local.window:,})"
    if kind == CHUNKED:
        return f"chunked ({local.size:,})"
    if kind == LINEAR:
        return local.mixer
    if kind == INDEXED:
        return f"sparse (top {facts.indexer.top_k:,} keys)"
    if kind == MAMBA:
        return facts.mamba.mixer
    if kind == HYBRID:
        return f"hybrid (attention and {facts.mamba.mixer})"
    if kind in (CSA, HCA):
        rate = facts.compressed.csa_rate if kind == CSA else facts.compressed.hca_rate
        return f"{KIND_NAMES[kind]} (an entry per {rate} tokens)"
    return KIND_NAMES[kind]


def pattern_text(facts: ModelFacts) -> str:
    """How the kinds of layer alternate, in words."""
    kinds = facts.layer_types
    counts = {kind: kinds.count(kind) for kind in dict.fromkeys(kinds)}
    if len(counts) == 1:
        return f"all {facts.layers} layers are {kind_name(facts, kinds[0])} layers"
    listed = " and ".join(
        f"{count} {kind_name(facts, kind)} layer{'s' if count > 1 else ''}"
        for kind, count in counts.items()
    )
    local = facts.local
    if local is not None and local.global_every is not None:
        return f"{listed}: every {ordinal(local.global_every)} layer is full attention"
    full = [i for i, kind in enumerate(kinds) if kind in (FULL, INDEXED)]
    if local is not None and local.full_attention_layers is not None and full:
        return f"{listed}: full attention at layers {', '.join(map(str, full))}"
    return listed


def ordinal(n: int) -> str:
    """2nd, 3rd, 4th, 11th, 22nd."""
    if n == 2:
        return "other"
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def strip_alt(facts: ModelFacts) -> str:
    """The strip figure's alt text: the layers, in numbers computed from the facts (or,
    where the figure is not drawn, the same words for the strip as text)."""
    drawn = can_draw(facts)
    parts = [
        f"The {facts.layers} layers of {facts.name}"
        + (
            " as a strip of cells, one per layer from layer 0 on the left, coloured by kind"
            if drawn
            else ""
        )
        + f": {pattern_text(facts)}."
    ]
    nope = facts.nope_layers
    if nope:
        parts.append(
            f"{len(nope)} attention layer{'s' if len(nope) > 1 else ''} apply no RoPE"
            + (" (a white dot)." if drawn else ".")
        )
    sources = attention.figures.layers.kv_sources(facts)
    reused = sorted({s for s in sources if s is not None})
    if reused:
        first = min(i for i, s in enumerate(sources) if s is not None)
        parts.append(
            f"Layers {first} to {facts.layers - 1} are hollow: they reuse the keys and "
            f"values of layer{'s' if len(reused) > 1 else ''} "
            f"{' and '.join(map(str, reused))}, drawn as arrows."
        )
    return " ".join(parts)


def can_draw(facts: ModelFacts) -> bool:
    """Whether :func:`~attention.figures.layers.layer_strips` draws every kind of its layers."""
    return set(facts.layer_types) <= set(attention.figures.style.LAYER_COLORS)


def figure_key(*parts: str) -> str:
    """What a figure depends on: ``parts`` (the facts drawn), the drawing code and
    matplotlib."""
    import matplotlib

    code = (
        attention.figures.layers,
        attention.figures.style,
        attention.figures.caches,
        attention.figures.heatmaps,
    )
    sources = [Path(module.__file__).read_text(encoding="utf-8") for module in code]
    text = "\n".join([*parts, *sources, matplotlib.__version__])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def strip_key(facts: ModelFacts) -> str:
    """What the strip figure depends on: the facts, the drawing code and matplotlib."""
    return figure_key(repr(facts), repr((facts.layer_types, facts.kv_shared, facts.uses_rope)))


def draw(path: Path, key: str, make) -> bool:
    """Draw ``make()``'s figure into ``path`` (PNG) unless it is drawn already with this
    ``key``; return whether it was drawn."""
    key_path = path.with_suffix(".key")
    if path.is_file() and key_path.is_file() and key_path.read_text() == key:
        return False
    import matplotlib.pyplot as plt

    fig = make()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buffer.getvalue())
    key_path.write_text(key)
    return True


def draw_strip(facts: ModelFacts, path: Path) -> bool:
    """Draw the model's layer strip into ``path`` (PNG) unless it is drawn already;
    return whether it was drawn."""
    return draw(path, strip_key(facts), lambda: attention.figures.layers.layer_strips(facts))


def compare_figures() -> dict[str, tuple[str, object]]:
    """Each comparison's figures: file name -> (key, a function drawing it)."""
    found: dict[str, tuple[str, object]] = {}
    for names in COMPARISONS:
        facts = [MODELS[n] for n in names]
        drawable = [m for m in facts if can_draw(m)]
        name = compare_name(names)
        if drawable:
            key = figure_key(*(strip_key(m) for m in drawable))
            found[f"{name}.png"] = (
                key,
                lambda d=drawable: attention.figures.layers.layer_strips(d),
            )
        # A title keeps the plot's frame off the image's top edge, and names the pair.
        title = f"{' vs '.join(names)}: one sequence's cache"
        key = figure_key("cache", title, *(repr(m) for m in facts))
        found[f"{name}-cache.png"] = (
            key,
            lambda f=facts, t=title: attention.figures.caches.cache_against_context(f, title=t),
        )
    return found


# -- the transformers classes ------------------------------------------------------------


@cache
def _transformers_models() -> Path | None:
    spec = importlib.util.find_spec("transformers")  # finds it, imports nothing
    return None if spec is None or spec.origin is None else Path(spec.origin).parent / "models"


@cache
def _config_modules() -> dict[str, str]:
    """Each config class of ``transformers`` -> the folder of its model."""
    found: dict[str, str] = {}
    root = _transformers_models()
    if root is None:
        return found
    for path in sorted(root.glob("*/configuration_*.py")):
        for name in re.findall(r"^class (\w+)\(", path.read_text(encoding="utf-8"), re.M):
            found.setdefault(name, path.parent.name)
    return found


# FlashAttention2: an implementation's class, not a model's (MiMoV2FlashAttention is one)
NOT_TEXT_ATTENTION = re.compile(r"Vision|Audio|Encoder|FlashAttention2|Sdpa|PreTrained|Pretrained")
MIXER = re.compile(r"(Attention|DeltaNet|Mixer)$")


def attention_classes(config_class: str, cross: bool = False) -> tuple[str, ...]:
    """The classes of ``transformers`` that mix tokens in the text model of
    ``config_class``: those its modeling file defines whose names end in
    ``Attention``, ``DeltaNet`` or ``Mixer`` (not a vision or audio one, nor a
    cross-attention one unless ``cross``), read from the file's source, in its order.

    >>> attention_classes("Qwen3NextConfig")
    ('Qwen3NextAttention', 'Qwen3NextGatedDeltaNet')
    """
    folder = _config_modules().get(config_class)
    if folder is None:
        return ()
    path = _transformers_models() / folder / f"modeling_{folder}.py"
    if not path.is_file():
        return ()
    names = re.findall(r"^class (\w+)\(", path.read_text(encoding="utf-8"), re.M)
    return tuple(
        n
        for n in names
        if MIXER.search(n)
        and not NOT_TEXT_ATTENTION.search(n)
        and (cross or "CrossAttention" not in n)
    )


# -- the config fields -----------------------------------------------------------------

#: The generic names of a few fields, as the older configs write them.
CONFIG_NAMES = {
    "GPT2Config": {
        "num_hidden_layers": "n_layer",
        "hidden_size": "n_embd",
        "num_attention_heads": "n_head",
        "max_position_embeddings": "n_positions",
    },
    "BloomConfig": {"num_hidden_layers": "n_layer", "num_attention_heads": "n_head"},
    "WhisperConfig": {
        "num_hidden_layers": "decoder_layers",
        "hidden_size": "d_model",
        "num_attention_heads": "decoder_attention_heads",
        "max_position_embeddings": "max_target_positions",
    },
}


@cache
def config_has(config_class: str, field: str) -> bool:
    """Whether ``transformers``' source of ``config_class`` names ``field`` at all."""
    folder = _config_modules().get(config_class)
    if folder is None:
        return True
    paths = (_transformers_models() / folder).glob("configuration_*.py")
    return any(field in path.read_text(encoding="utf-8") for path in paths)


#: The linear-attention sizes, by config class where they are not Qwen3-Next's names:
#: Kimi Linear gives one head count and one head size for keys and values alike.
LINEAR_NAMES = {
    "KimiLinearConfig": {
        "linear_num_key_heads": "linear_num_heads",
        "linear_num_value_heads": "linear_num_heads",
        "linear_key_head_dim": "linear_head_dim",
        "linear_value_head_dim": "linear_head_dim",
    },
}
#: The Mamba sizes, by config class: (config field, the group's field).
MAMBA_NAMES = {
    "JambaConfig": (
        ("mamba_d_state", "state_size"),
        ("mamba_d_conv", "conv_kernel_dim"),
    ),
    "NemotronHConfig": (
        ("mamba_num_heads", "num_heads"),
        ("ssm_state_size", "state_size"),
        ("conv_kernel", "conv_kernel_dim"),
        ("n_groups", "n_groups"),
    ),
    "FalconH1Config": (
        ("mamba_d_ssm", "inner_size"),
        ("mamba_n_heads", "num_heads"),
        ("mamba_d_state", "state_size"),
        ("mamba_d_conv", "conv_kernel_dim"),
        ("mamba_n_groups", "n_groups"),
    ),
}


def _layer_types_text(facts: ModelFacts) -> str:
    kinds = facts.layer_types
    counts = {kind: kinds.count(kind) for kind in dict.fromkeys(kinds)}
    return ", ".join(f"{count} × `{kind}`" for kind, count in counts.items())


def config_fields(facts: ModelFacts) -> list[tuple[str, str, str]]:
    """``(glossary term, field as written, value)`` for each config field that shapes the
    model's attention, with the value its facts hold.

    A row reads the facts by the field's own name where ``ModelFacts`` keeps it as a
    view of its group (``facts.sliding_window``), so that each row's name and value come
    from one place; the names of the package's own (``nope_every``) are read in their
    groups.
    """
    names = CONFIG_NAMES.get(facts.config_class, {})
    rows: list[tuple[str, str, str]] = []

    def add(field: str, value: object, written: str | None = None) -> None:
        """One row: the glossary's name, the name in this config, the value."""
        if value is None or value is False:
            return
        written = written or names.get(field, field)
        if any(row[1] == written for row in rows):
            return  # one field of this config holds two of the site's
        if isinstance(value, bool):
            text = "true"
        else:
            text = value if isinstance(value, str) else format_number(value)
        rows.append((field, written, text))

    add("num_hidden_layers", facts.layers)
    add("hidden_size", facts.hidden_size)
    add("num_attention_heads", facts.num_heads)
    if config_has(facts.config_class, "num_key_value_heads"):
        add("num_key_value_heads", facts.num_kv_heads)
    if facts.latent is None:
        add("head_dim", facts.head_dim)
    add("max_position_embeddings", facts.max_position_embeddings)
    if facts.rope is not None:
        rope = f"`rope_theta`: {format_number(facts.rope_theta)}"
        if facts.local_rope_theta is not None:
            local = format_number(facts.local_rope_theta)
            same = facts.local_rope_theta == facts.rope_theta
            rope += f" (sliding layers: {local}{', unscaled' if same else ''})"
        if facts.rope_scaling:
            items = ", ".join(
                f"`{key}`: {value if isinstance(value, str | bool) else format_number(value)}"
                for key, value in facts.rope_scaling.items()
            )
            rope += f"; {items}"
        add("rope_parameters", rope)
        if facts.partial_rotary_factor != 1.0:
            add("partial_rotary_factor", facts.partial_rotary_factor)
    add("sliding_window", facts.sliding_window)
    add("attention_chunk_size", facts.attention_chunk_size)
    if len(set(facts.layer_types)) > 1:
        add("layer_types", _layer_types_text(facts))
    if facts.rope is not None and facts.rope.nope_every is not None:
        every = ordinal(facts.rope.nope_every)
        add("no_rope_layers", f"0 (no RoPE) for every {every} layer")
    add("query_pre_attn_scalar", facts.query_pre_attn_scalar)
    add("attn_logit_softcapping", facts.attn_logit_softcapping)
    add("final_logit_softcapping", facts.final_logit_softcapping)
    add("num_kv_shared_layers", facts.num_kv_shared_layers or None)
    add("attention_k_eq_v", facts.attention_k_eq_v)
    add("global_head_dim", facts.global_head_dim)
    if facts.global_layers is not None:
        add("num_global_key_value_heads", facts.global_layers.num_kv_heads)
    if facts.latent is not None:
        for field in ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim"):
            add(field, getattr(facts, field))
        add("v_head_dim", facts.v_head_dim)
    if facts.indexer is not None:
        add("index_topk", facts.index_topk)
        add("index_n_heads", facts.index_n_heads)
        add("index_head_dim", facts.index_head_dim)
    if facts.linear_num_key_heads is not None and facts.linear_conv_kernel_dim is not None:
        names = LINEAR_NAMES.get(facts.config_class, {})
        for field in (
            "linear_num_key_heads",
            "linear_num_value_heads",
            "linear_key_head_dim",
            "linear_value_head_dim",
            "linear_conv_kernel_dim",
        ):
            add(field, getattr(facts, field), names.get(field))
    if facts.mamba is not None:
        for field, attribute in MAMBA_NAMES.get(facts.config_class, ()):
            add(field, getattr(facts.mamba, attribute))
    if facts.compressed is not None:
        rates = f"{facts.compressed.csa_rate} (CSA), {facts.compressed.hca_rate} (HCA)"
        add("compress_rates", rates)
    if facts.cross_attention_layers is not None:
        add("cross_attention_layers", ", ".join(map(str, facts.cross_attention_layers)))
    add("max_source_positions", facts.max_source_positions)
    return rows


# -- what is unusual ------------------------------------------------------------------


def _models_with(predicate) -> list[ModelFacts]:
    return [m for m in MODELS.values() if predicate(m)]


def _only(facts: ModelFacts, predicate, what: str) -> str:
    """ " It is the only model of the site's table with ``what``." where it is, else ""."""
    others = [m for m in _models_with(predicate) if m.name != facts.name]
    return "" if others else f" It is the only model of the site's table with {what}."


#: RoPE's scalings for longer contexts: (the chapters' name, the section's label).
SCALINGS = {
    "linear": ("position interpolation", "position-interpolation"),
    "dynamic": ("dynamic NTK scaling", "ntk-scaling"),
    "yarn": ("YaRN", "yarn"),
    "llama3": ("Llama 3's rule", "llama3-scaling"),
}


def unusual(facts: ModelFacts) -> list[str]:
    """What sets the model apart, each a sentence computed from its facts, with a link."""
    notes = []
    rope, scores, parts, wide = facts.rope, facts.scores, facts.parts, facts.global_layers
    window = facts.local.window if isinstance(facts.local, Sliding) else None
    if facts.bidirectional:
        local = ""
        if window is not None:
            local = (
                f"; its local layers see {window:,} positions on each side "
                f"({ref('bidirectional-local', 'local, both ways')})"
            )
        notes.append(
            "An encoder: every layer attends both ways, with no causal mask, and it "
            f"generates nothing, so it keeps no cache{local} "
            f"({ref('encoder-attention', 'an encoder')})."
        )
    if facts.alibi:
        notes.append(
            "No position embedding at all: each head subtracts its own slope times the "
            "distance from its scores (ALiBi), and its config sets no position limit "
            f"({ref('alibi', 'ALiBi')})."
        )
    if facts.cross is not None and facts.cross.layers is None:
        notes.append(
            f"Every layer of its decoder cross-attends, after its self-attention, to the "
            f"{facts.cross.context_tokens:,} tokens of the encoder's output "
            f"({ref('cross-attention-cache', 'cross-attention')})."
        )
    elif facts.cross is not None:
        notes.append(
            f"{len(facts.cross.layers)} of its {facts.layers} layers cross-attend to the "
            "image in place of self-attention: they keep nothing per token of the text "
            f"({ref('cross-attention-layers', 'cross-attention layers')})."
        )
    if window is not None and window * 32 <= facts.trained_context and not facts.bidirectional:
        windows = [m.local.window for m in MODELS.values() if isinstance(m.local, Sliding)]
        text = (
            f"Its sliding window is only {window:,} tokens, 1/{facts.trained_context // window:,} "
            f"of its {facts.context_label} of {facts.trained_context:,}"
        )
        if window == min(windows):
            text += ", the smallest window in the site's table"
        links = [ref("local-global-layers", "local and global layers")]
        if scores is not None and scores.sinks:
            text += (
                "; with a learned sink per head, a query whose window holds nothing "
                "useful can put its weight on nothing"
            )
            links.append(ref("sinks", "sinks"))
        notes.append(f"{text} ({'; '.join(links)}).")
    elif scores is not None and scores.sinks:
        sunk = _only(facts, lambda m: m.scores is not None and m.scores.sinks, "sinks")
        notes.append(
            f"Each head has a learned sink logit, a share of the weight that goes nowhere "
            f"({ref('sinks', 'sinks')})." + sunk
        )
    scalar = scores.query_pre_attn_scalar if scores is not None else None
    if scalar is not None and scalar != facts.head_dim:
        notes.append(
            "Its scores are scaled by `query_pre_attn_scalar ** -0.5` = "
            f"{format_number(scalar)}^-0.5, "
            f"not by `head_dim ** -0.5` = {facts.head_dim}^-0.5 "
            f"({ref('query-pre-attn-scalar', 'Gemma’s own scale')})."
        )
    if scores is not None and scores.scale is not None:
        notes.append(
            f"Its scores are not divided by √head_dim: the score scale is "
            f"{format_number(scores.scale)}, and QK-norm keeps the logits in range "
            f"({ref('qk-norm', 'QK-norm')})."
        )
    if facts.latent is not None and facts.positions == "none":
        full = facts.layer_types.count(FULL)
        notes.append(
            f"Its {full} latent-attention (MLA) layers apply no position encoding at all "
            f"(NoPE): the order of the tokens reaches them only through its "
            f"{getattr(facts.local, 'mixer', 'recurrent')} layers "
            f"({ref('chunks-and-nope', 'layers without positions')})."
        )
    elif rope is not None and rope.nope_every is not None:
        notes.append(
            f"Every {ordinal(rope.nope_every)} layer applies no RoPE (NoPE), "
            f"{facts.uses_rope.count(False)} of {facts.layers}"
            + (", with its queries' temperature tuned" if facts.attn_temperature_tuning else "")
            + f" ({ref('chunks-and-nope', 'layers without positions')})."
        )
    if isinstance(facts.local, Chunked):
        notes.append(
            f"Its local layers attend within chunks of {facts.local.size:,} tokens, "
            "not a window that slides: the first query of a chunk sees only itself "
            f"({ref('chunks-and-nope', 'chunked layers')})."
            + _only(facts, lambda m: isinstance(m.local, Chunked), "chunked layers")
        )
    local_theta = rope.local_theta if rope is not None else None
    if local_theta is not None and local_theta != rope.theta:
        notes.append(
            f"Two RoPE bases: {format_number(local_theta)} on its sliding layers, "
            f"{format_number(rope.theta)} on its full ones "
            f"({ref('two-rope-bases', 'two RoPE bases')})."
        )
    elif local_theta is not None:
        notes.append(
            "Its RoPE scaling applies to the full layers only: the sliding layers rotate "
            f"with the plain base, {format_number(rope.theta)} "
            f"({ref('two-rope-bases', 'a RoPE per kind of layer')})."
        )
    if facts.num_kv_shared_layers:
        notes.append(
            f"Its last {facts.num_kv_shared_layers} of {facts.layers} layers compute no keys "
            "and values: each reuses those of an earlier layer of its kind, and caches "
            f"nothing ({ref('kv-sharing', 'shared keys and values')})."
        )
    if wide is not None and wide.k_eq_v:
        notes.append(
            "Its full-attention layers use their keys as values "
            f"(`attention_k_eq_v`) ({ref('keys-as-values', 'keys as values')})."
        )
    if wide is not None and wide.head_dim:
        notes.append(
            f"Its full-attention layers have heads of {wide.head_dim}, its sliding "
            f"ones of {facts.head_dim}."
        )
    if scores is not None and scores.softcap is not None:
        capped = _only(
            facts,
            lambda m: m.scores is not None and m.scores.softcap is not None,
            "softcapped scores",
        )
        notes.append(
            f"Its scores are softcapped at {format_number(scores.softcap)} "
            f"({ref('softcapping', 'softcapping')})." + capped
        )
    if parts is not None and parts.output_gate:
        notes.append(
            "A sigmoid gate, computed from the layer's input, scales each head's output "
            f"({ref('output-gate', 'the output gate')})."
        )
    if facts.compressed is not None:
        c = facts.compressed
        notes.append(
            f"Beside a window of {window:,} tokens, each compressed sparse "
            f"layer keeps one compressed entry per {c.csa_rate} tokens, of which an indexer "
            f"picks {facts.indexer.top_k:,} for each query, and each heavily compressed layer "
            f"one entry per {c.hca_rate} tokens: its cache grows by "
            f"{size(cache_profile(facts)[0])} per token "
            f"({doc('25-compressed-attention', 'compressed attention')})."
        )
    if facts.indexer is not None and facts.latent is not None:
        notes.append(
            f"Each query attends to {facts.indexer.top_k:,} keys that a lightning indexer "
            f"picks, whatever the context; the indexer keeps a key of "
            f"{facts.indexer.head_dim} numbers per token in every layer "
            f"({ref('lightning-indexer', 'the lightning indexer')})."
        )
    kinds = facts.layer_types
    growing = sum(kind in (FULL, INDEXED, HYBRID) for kind in kinds)
    stateful = sum(kind in (LINEAR, MAMBA, CONV) for kind in kinds)
    if stateful:
        fixed = bill(facts, 0).cache
        idle = kinds.count(NO_MIXER)
        rest = f", and {idle} mix no tokens at all" if idle else ""
        notes.append(
            f"Only {growing} of its {facts.layers} layers keep a cache that grows with the "
            f"text; {stateful} keep a state of fixed size, {size(fixed)} per sequence in "
            f"all{rest} ({ref('linear-state', 'a state of fixed size')})."
        )
    if facts.attention == "MQA":
        notes.append(
            f"One key/value head serves all {facts.num_heads} query heads ({ref('gqa', 'MQA')})."
        )
    if facts.receptive_field is not None:
        notes.append(
            f"Every layer slides: its cache stops growing at {window:,} tokens "
            f"a layer, {size(bill(facts, window).cache)} in bf16 at any length, "
            f"while through its {facts.layers} layers a token can still draw on text up to "
            f"{facts.receptive_field:,} positions back "
            f"({ref('sliding-window-mask', 'sliding windows')})."
        )
    if facts.latent is not None:
        mla = facts.latent
        full_size = facts.num_heads * (facts.head_dim + mla.v_head_dim)
        latent = mla.kv_lora_rank + mla.qk_rope_head_dim
        notes.append(
            f"Each latent-attention layer caches {latent} numbers per token (a latent of "
            f"{mla.kv_lora_rank} and a rotary key of {mla.qk_rope_head_dim}), where "
            f"{facts.num_heads} heads of keys of {facts.head_dim} and values of "
            f"{mla.v_head_dim} would take "
            f"{full_size:,}: {full_size / latent:.0f} times fewer "
            f"({doc('13-latent-attention', 'latent attention')})."
        )
    if facts.positions == "learned":
        notes.append(
            f"Its positions come from a learned table of {facts.max_position_embeddings:,} "
            "rows: no text can be longer."
        )
    if rope is not None and rope.partial_rotary_factor != 1.0:
        notes.append(
            f"RoPE turns only {rope.partial_rotary_factor * 100:g}% of each head's "
            f"features ({ref('partial-rotary', 'partial rotary')})."
        )
    scaling = (rope.scaling if rope is not None else None) or {}
    if scaling.get("rope_type") in SCALINGS and "factor" in scaling:
        name, label = SCALINGS[scaling["rope_type"]]
        original = scaling.get("original_max_position_embeddings")
        since = f" from the {original:,} positions it was first trained on" if original else ""
        notes.append(
            f"Its RoPE is stretched ×{format_number(scaling['factor'])}{since}, by {name} "
            f"({ref(label, name)})."
        )
    if not notes:
        positions = {
            "rope": "RoPE",
            "learned": "learned positions",
            "sinusoidal": "sinusoidal positions",
            "alibi": "ALiBi",
            "none": "no positions",
        }
        notes.append(
            f"No mechanism that the site's other models lack: {facts.attention} with "
            f"{positions[facts.positions]}; {pattern_text(facts)}."
        )
    return notes


# -- the cache --------------------------------------------------------------------------


def contexts(facts: ModelFacts) -> list[int]:
    """The contexts of the card's cache table: 8k, 32k, 128k and the model's context (its
    trained, supported or configured one: ``context_claim``), in order, those the
    config's positions allow."""
    trained = {facts.trained_context} if facts.trained_context is not None else set()
    wanted = sorted({*CONTEXTS, *trained})  # none: a config with no positions (Mamba-2)
    limit = facts.max_position_embeddings  # None: ALiBi, no limit
    return [t for t in wanted if limit is None or t <= limit]


def cache_rows(facts: ModelFacts) -> list[tuple[int, dict[str, int]]]:
    """``(tokens, {cache dtype: bytes of one sequence's cache})`` for each context."""
    return [
        (
            tokens,
            {
                d: bill(facts, tokens, cache_dtype=d, state_dtype=STATE_DTYPE).cache
                for d in CACHE_DTYPES
            },
        )
        for tokens in contexts(facts)
    ]


def fixed_state(facts: ModelFacts, cache_dtype: str) -> int:
    """Bytes the cache holds before the first token: the fixed states."""
    return bill(facts, 0, cache_dtype=cache_dtype, state_dtype=STATE_DTYPE).cache


# -- the weights --------------------------------------------------------------------------


class Parameters(NamedTuple):
    """A model's parameter count, how many of them its release quantizes, and where
    the count comes from."""

    total: int
    quantized: int | None  # None: all 16-bit as released, or the split is not known
    source: str


@cache
def quantized_count(name: str, patterns: tuple[str, ...]) -> int:
    """How many parameters of the released model ``name`` match ``patterns``, counted
    once per build (building a large model on the meta device takes a second)."""
    return parameter_count(released_config(name), only=patterns)


def parameters_of(facts: ModelFacts) -> Parameters | None:
    """The model's parameters, where the site knows them: the one place the cards,
    the key numbers and the compare view read them from.

    Counted on the meta device from the release's whole ``config.json``
    (:func:`attention.models.released_parameters`), and those the release quantizes
    with :func:`attention.models.parameter_count`'s ``only``; where the table keeps no
    whole file, the count it cites (``facts.weights``), with no split, its source saying
    that it is cited, not counted.
    """
    total = released_parameters(facts.name)
    if total is None:
        if facts.weights is None:
            return None
        source = f"cited, not counted: {facts.weights.source}"
        return Parameters(facts.weights.parameters, None, source)
    quantized = None
    if facts.quantization is not None:
        quantized = quantized_count(facts.name, facts.quantization.parameters)
    source = (
        "counted on the meta device from the released config.json, "
        f"{released_config_source(facts.name)}"
    )
    return Parameters(total, quantized, source)


def count_text(parameters: int) -> str:
    """``20.9 billion (20,900,000,000)``: a parameter count, rounded, then exact.

    >>> count_text(20_900_000_000), count_text(124_439_808)
    ('20.9 billion (20,900,000,000)', '124 million (124,439,808)')
    """
    if parameters >= 10**9:
        return f"{parameters / 10**9:,.1f} billion ({parameters:,})"
    return f"{parameters / 10**6:,.0f} million ({parameters:,})"


def weight_bytes(facts: ModelFacts) -> dict[str, int] | None:
    """The weights' bytes: ``"bf16"`` every parameter in bf16, and ``"released"`` as the
    release stores them (its quantized weights in their type, the rest in bf16) where
    the split is known. ``None``: no parameter count."""
    counted = parameters_of(facts)
    if counted is None:
        return None
    found = {"bf16": bill(facts, 0, parameters=counted.total).weights}
    if facts.quantization is not None and counted.quantized is not None:
        quantized = bill(facts, 0, dtype=facts.quantization.dtype, parameters=counted.quantized)
        rest = bill(facts, 0, parameters=counted.total - counted.quantized)
        found["released"] = quantized.weights + rest.weights
    return found


DTYPE_NAMES = {"fp8": "FP8", "mxfp4": "MXFP4"}


def released_text(facts: ModelFacts) -> str:
    """How the release stores its weights, in a few words."""
    q = facts.quantization
    return f"{DTYPE_NAMES[q.dtype]} for {q.weights}"


def key_numbers(facts: ModelFacts) -> list[tuple[str, str]]:
    """The key numbers of a card: ``(what, how much)`` rows, each computed by the bill.

    The parameters; the weights (as released first, where the release quantizes some
    and the split is known, then in bf16); one sequence's cache in bf16 at 8k, 32k,
    128k and the model's context (``context_label``); and weights plus that last cache.
    """
    rows = []
    counted = parameters_of(facts)
    weights = weight_bytes(facts)
    rows.append(("parameters", count_text(counted.total) if counted else "not in the table yet"))
    if weights is not None and "released" in weights:
        rows.append(
            (
                f"weights as released ({DTYPE_NAMES[facts.quantization.dtype]} and bf16)",
                size(weights["released"]),
            )
        )
    if weights is not None:
        rows.append(("weights, all in bf16", size(weights["bf16"])))
    if not facts.bidirectional:
        for tokens, by_dtype in cache_rows(facts):
            label = f"cache at {tokens_text(tokens)} tokens"
            if tokens == facts.trained_context:
                label += f", its {facts.context_label}"
            rows.append((label, size(by_dtype["bf16"])))
    if facts.trained_context is None:  # no trained context known: no total (Mamba-2)
        return rows
    trained = bill(facts, facts.trained_context, state_dtype=STATE_DTYPE).cache
    context = (
        "no cache: an encoder" if facts.bidirectional else f"the cache at its {facts.context_label}"
    )
    if weights is not None:
        for key, label in (("released", "as released"), ("bf16", "in bf16")):
            if key in weights:
                rows.append((f"total: weights {label} and {context}", size(weights[key] + trained)))
    return rows


def key_box(facts: ModelFacts) -> list[str]:
    """The key numbers as a box at the top of the card."""
    lines = [
        ":::{admonition} Key numbers",
        ":class: key-numbers",
        "",
        "One sequence, its cache in bf16 ({func}`attention.models.bill`); the weights "
        "and the cache at other contexts below.",
        "",
    ]
    lines += _table(("", "bytes or count"), key_numbers(facts))
    return [*lines, ":::", ""]


# -- the pages -----------------------------------------------------------------------------


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    lines = [header, ("---",) * len(header), *rows]
    return ["| " + " | ".join(line) + " |" for line in lines]


def cross_note(facts: ModelFacts) -> str | None:
    """What the cross-attention keeps beside the cache, which the bill does not count."""
    if facts.cross is None:
        return None
    link = "cross-attention-cache" if facts.cross.layers is None else "cross-attention-layers"
    cross = cross_cache_bytes(facts, torch.bfloat16)
    if cross is None:
        return (
            f"Besides, its {len(facts.cross.layers)} cross-attention layers keep the keys "
            "and values of the encoded context (the image's tiles), as many as the input "
            "has: computed once per sequence, not counted above "
            f"({ref(link, 'cross-attention')})."
        )
    return (
        f"Besides, its cross-attention keeps the keys and values of the "
        f"{facts.cross.context_tokens:,} encoded tokens in every layer that cross-attends: "
        f"{size(cross)} in bf16, computed once per sequence and not counted above "
        f"({ref(link, 'the cross-attention cache')})."
    )


def cache_section(facts: ModelFacts) -> list[str]:
    """The card's cache: per token, capped and fixed, at each context, by kind of layer."""
    if facts.bidirectional:
        return [
            "None: an encoder attends both ways and generates no tokens, so it keeps no "
            f"cache ({ref('encoder-attention', 'an encoder')}). Its memory is its weights "
            "and, while it runs, one pass's activations."
        ]
    lines = []
    growing, capped, _ = cache_profile(facts)
    parts = [f"{size(growing)} per token in the layers that keep every token"]
    if capped:
        parts.append(f"{size(capped)} once its local layers are full, however long the text")
    state = {d: fixed_state(facts, d) for d in CACHE_DTYPES}
    if state["bf16"]:
        parts.append(
            f"{size(state['bf16'])} of fixed state from the first token on (convolution "
            "windows in bf16, recurrent states in float32, as `transformers` keeps them)"
        )
    lines += [
        "One sequence's cache, in 16-bit numbers: " + "; ".join(parts) + ". At each context "
        "(every layer's keys, values, indexer keys and states, as "
        "{func}`~attention.models.cache_bytes` counts them and "
        "{func}`attention.models.bill` bills them):",
        "",
    ]
    rows = []
    for tokens, by_dtype in cache_rows(facts):
        label = tokens_text(tokens)
        if tokens == facts.trained_context:
            label += f", its {facts.context_label}"
        rows.append((label, *(size(by_dtype[d]) for d in CACHE_DTYPES)))
    lines += _table(("tokens", "cache, bf16", "cache, fp8"), rows)
    limit = facts.max_position_embeddings
    beyond = [t for t in CONTEXTS if limit is not None and t > limit]
    notes = []
    known = facts.trained_context is not None  # Mamba-2 alone: no position limit
    past = [t for t in contexts(facts) if known and t > facts.trained_context]
    if past:
        notes.append(
            f"Past its {facts.context_label} of {facts.trained_context:,} tokens, a row "
            f"gives what the cache would hold, not {PAST_CONTEXT[facts.context_claim]}."
        )
    if beyond:
        notes.append(
            "Not at "
            + ", ".join(tokens_text(t) for t in beyond)
            + f" tokens: its config allows {facts.max_position_embeddings:,} positions."
        )
    if state["bf16"]:
        notes.append(
            f"Of each, the fixed state is {size(state['bf16'])} (bf16) and "
            f"{size(state['fp8'])} (fp8: the convolution windows in fp8, the recurrent "
            "states still in float32)."
        )
    cross = cross_note(facts)
    if cross:
        notes.append(cross)
    if notes:
        lines += ["", " ".join(notes)]
    kinds = {kind: facts.layer_types.count(kind) for kind in dict.fromkeys(facts.layer_types)}
    if len(kinds) > 1 and known:
        trained = bill(facts, facts.trained_context, state_dtype=STATE_DTYPE)
        lines += [
            "",
            f"At its {facts.context_label}, {facts.trained_context:,} tokens, in bf16, "
            "by kind of layer:",
            "",
        ]
        lines += _table(
            ("layers", "how many", "cache"),
            [
                (kind_name(facts, kind), str(count), size(trained.per_kind.get(kind, 0)))
                for kind, count in kinds.items()
            ],
        )
    return lines


def card(facts: ModelFacts) -> str:
    """The Markdown of one model's card."""
    name = slug(facts.name)
    lines = [
        f"({FOLDER}-{name})=",
        f"# {facts.name}",
        "",
        f"*{facts.year}, checkpoint `{facts.checkpoint}`, read by `transformers`' "
        f"`{facts.config_class}`.* This page is computed from the site's table of models "
        "({data}`~attention.models.table.MODELS`) each time the site is built; see "
        f"{{doc}}`index` for every model, and the {{ref}}`calculator <calculator>` for "
        "another context, batch or number type.",
        "",
        *key_box(facts),
        "## Its attention",
        "",
        f"> {recipe(facts)}",
        "",
        "The recipe above ({func}`attention.models.recipe`), clause by clause, each "
        "mechanism linked to the section that builds it:",
        "",
    ]
    lines += [f"- {clause}" for clause in recipe_clauses(facts)]
    classes = attention_classes(facts.config_class, cross=facts.cross is not None)
    if classes:
        lines += [
            "",
            "In `transformers`, its layers mix tokens with "
            + " and ".join(f"`{c}`" for c in classes)
            + f" (the modeling file of `{facts.config_class}`).",
        ]
    lines += ["", "## Layer by layer", ""]
    alt = strip_alt(facts)
    if can_draw(facts):
        lines += [
            f":::{{figure}} {STRIPS}/{name}.png",
            f":alt: {alt}",
            "",
            f"The layers of {facts.name} ({{func}}`attention.figures.layers.layer_strips`).",
            ":::",
            "",
        ]
    else:
        lines += [
            f"{alt} The site's strip figure does not draw these kinds of layer yet.",
            "",
        ]
    lines += [
        "As text ({func}`attention.models.layer_strip`), one letter per layer:",
        "",
        "```text",
        layer_strip(facts),
        "```",
        "",
        "## Its cache",
        "",
        *cache_section(facts),
    ]
    lines += ["", "## Its weights", ""]
    counted = parameters_of(facts)
    if counted is not None:
        weights = {
            d: bill(facts, 0, dtype=d, parameters=counted.total).weights for d in WEIGHT_DTYPES
        }
        text = f"{counted.total:,} parameters ({linked(counted.source)}): " + ", ".join(
            f"{size(weights[d])} in {d}" for d in WEIGHT_DTYPES
        )
        if facts.trained_context is not None:  # none known for Mamba-2 alone
            trained = bill(facts, facts.trained_context, state_dtype=STATE_DTYPE)
            text += (
                f". With one sequence's cache at its {facts.context_label}, in bf16: "
                f"{size(weights['bf16'] + trained.cache)}"
            )
        lines += [text + "."]
    else:
        lines += [
            "The site's table cites no parameter count for this checkpoint. With "
            "`transformers` installed, `python -m attention.models path/to/config.json` "
            "counts them exactly from its `config.json` "
            "({func}`attention.models.parameter_count`, on the meta device: nothing is "
            "allocated) and adds them to the bill.",
        ]
    if facts.quantization is not None:
        q = facts.quantization
        released = weight_bytes(facts) or {}
        bits = format_number(BITS[q.dtype])
        text = (
            f"As released, its weights are not all 16-bit: {released_text(facts)} "
            f"({linked(q.source)}). The bill counts {DTYPE_NAMES[q.dtype]} at {bits} bits a number"
            + (
                ", its shared 8-bit scale per 32 numbers included"
                if q.dtype == "mxfp4"
                else ", its scales (one float32 per 128 × 128 block) left out"
            )
            + "."
        )
        if "released" in released:
            text += f" As released: {size(released['released'])}."
        else:
            text += (
                " How many parameters those are needs the release's whole `config.json`, "
                "which the table does not keep yet: the key numbers give bf16 alone."
            )
        lines += ["", text]
    lines += [
        "",
        "## The config fields that matter",
        "",
        "As `transformers`' config class reads them, each linked to the "
        "{doc}`glossary </glossary>`:",
        "",
    ]
    lines += _table(
        ("field", "value"),
        [(term(key, shown), value) for key, shown, value in config_fields(facts)],
    )
    lines += ["", "## What is unusual about it", ""]
    lines += [f"- {note}" for note in unusual(facts)]
    lines += [
        "",
        "## Sources",
        "",
        f"- The config: {linked(facts.source)}",
        f"- The {facts.context_label}: {linked(facts.context_source)}",
    ]
    if facts.class_defaults:
        lines.append(
            "- Left to the config class's defaults: "
            + ", ".join(f"`{name}`" for name in facts.class_defaults)
        )
    return "\n".join(lines) + "\n"


# -- the compare view ----------------------------------------------------------------

#: The comparisons readers search for, each a page of its own (``compare-A-vs-B``).
COMPARISONS = (
    ("Llama 3.1 70B", "Qwen3-Next 80B-A3B"),
    ("Gemma 3 27B", "Gemma 4 31B"),
    ("DeepSeek-V3", "DeepSeek-V3.2", "DeepSeek-V4-Flash"),
    ("gpt-oss-20b", "Qwen3-30B-A3B"),
)
#: What a recipe's clauses say, in the order :func:`attention.models.recipe` says it.
TOPICS = {
    "layers": "layers",
    "heads": "heads",
    "positions": "positions",
    "parts": "scores and parts",
    "cache": "cache per token",
}
POSITION_WORDS = re.compile(r"RoPE|NoPE|learned positions|ALiBi|no position")


def clause_topic(index: int, clause: str) -> str:
    """Which of :data:`TOPICS` a recipe's clause (its ``index``-th) is about.

    >>> clause_topic(0, "24 layers, all full"), clause_topic(3, "sinks")
    ('layers', 'parts')
    """
    if index == 0:
        return "layers"
    if clause.startswith("cache per token"):
        return "cache"
    if POSITION_WORDS.search(clause):
        return "positions"
    if index == 1 or clause.startswith(("full layers:", "each token caches")):
        return "heads"
    return "parts"


def recipe_topics(facts: ModelFacts) -> dict[str, str]:
    """The recipe's clauses, joined by topic (``"–"`` where it says nothing of one)."""
    text = recipe(facts).removeprefix(f"{facts.name}: ")
    found: dict[str, list[str]] = {topic: [] for topic in TOPICS}
    for index, clause in enumerate(clauses(text)):
        found[clause_topic(index, clause)].append(clause)
    return {topic: "; ".join(said) or "–" for topic, said in found.items()}


def compare_name(names: tuple[str, ...]) -> str:
    """A comparison's page name: ``compare-gemma-3-27b-vs-gemma-4-31b``."""
    return "compare-" + "-vs-".join(slug(name) for name in names)


def cache_alt(facts: list[ModelFacts]) -> str:
    """The cache figure's alt text, its numbers computed from the bill."""
    parts = []
    for m in facts:
        at = bill(m, m.trained_context).cache
        growing, capped, fixed = cache_profile(m)
        parts.append(
            f"{m.name} grows by {size(growing)} a token"
            + (f" beyond {size(capped + fixed)} capped or fixed" if capped + fixed else "")
            + f" and reaches {size(at)} at its {m.context_label} of {m.trained_context:,} tokens"
        )
    return (
        "One sequence's cache in bf16 against the context, doubling from 1,024 tokens, "
        "on log scales, a line per model: " + "; ".join(parts) + "."
    )


def compare_page(names: tuple[str, ...]) -> str:
    """The Markdown of one comparison: key numbers, recipes clause by clause with the
    differences marked, the strips and the caches against the context."""
    facts = [MODELS[name] for name in names]
    name = compare_name(names)
    title = " vs ".join(names)
    lines = [
        f"({FOLDER}-{name})=",
        f"# {title}",
        "",
        "Side by side, each number computed from the site's table "
        "({data}`~attention.models.table.MODELS`) when the site is built: "
        + ", ".join(f"{{doc}}`{m.name} <{slug(m.name)}>`" for m in facts)
        + ". Pick any two models on the {doc}`compare page <compare>`.",
        "",
        "## Key numbers",
        "",
        "One sequence, its cache in bf16 ({func}`attention.models.bill`):",
        "",
    ]
    rows: list[tuple[str, ...]] = []
    counted = [parameters_of(m) for m in facts]
    weights = [weight_bytes(m) for m in facts]
    rows.append(("parameters", *(count_text(c.total) if c else "–" for c in counted)))
    if any(w is not None and "released" in w for w in weights):
        rows.append(
            (
                "weights as released",
                *(size(w["released"]) if w and "released" in w else "–" for w in weights),
            )
        )
    rows.append(("weights in bf16", *(size(w["bf16"]) if w else "–" for w in weights)))
    for tokens in CONTEXTS:
        rows.append(
            (
                f"cache at {tokens_text(tokens)}",
                *(
                    size(bill(m, tokens).cache)
                    if m.max_position_embeddings is None or tokens <= m.max_position_embeddings
                    else "–"
                    for m in facts
                ),
            )
        )
    # Each model's context as its source gives it: trained, supported or configured
    rows.append(
        (
            "context (as its source gives it)",
            *(f"{tokens_text(m.trained_context)}, {m.context_claim}" for m in facts),
        )
    )
    rows.append(("cache at that context", *(size(bill(m, m.trained_context).cache) for m in facts)))
    lines += _table(("", *names), rows)
    lines += [
        "",
        "## Their recipes, clause by clause",
        "",
        "Each model's recipe ({func}`attention.models.recipe`), its clauses side by side "
        "by what they say; **differs** marks a row where the models differ.",
        "",
    ]
    topics = [recipe_topics(m) for m in facts]
    recipe_rows = []
    for topic, label in TOPICS.items():
        said = [t[topic] for t in topics]
        mark = "same" if len(set(said)) == 1 else "**differs**"
        recipe_rows.append((label, *(link_recipe(text) for text in said), mark))
    lines += _table(("", *names, ""), recipe_rows)
    lines += ["", "## Their layers", ""]
    drawable = [m for m in facts if can_draw(m)]
    if drawable:
        alt = " ".join(strip_alt(m) for m in drawable)
        lines += [
            f":::{{figure}} {STRIPS}/{name}.png",
            f":alt: {alt}",
            "",
            "Their layers, a row each ({func}`attention.figures.layers.layer_strips`).",
            ":::",
            "",
        ]
    for m in facts:
        if not can_draw(m):
            lines += [
                f"{strip_alt(m)} The strip figure does not draw these kinds of layer yet.",
                "",
            ]
    lines += ["As text ({func}`attention.models.layer_strip`), one letter per layer:", ""]
    for m in facts:
        lines += [f"{m.name}:", "", "```text", layer_strip(m), "```", ""]
    lines += [
        "## Their caches against the context",
        "",
        f":::{{figure}} {STRIPS}/{name}-cache.png",
        f":alt: {cache_alt(facts)}",
        "",
        "One sequence's cache against the context "
        "({func}`attention.figures.caches.cache_against_context`).",
        ":::",
    ]
    return "\n".join(lines) + "\n"


#: The contexts of the compare view's plot: 1k to 1M tokens, doubling.
COMPARE_CONTEXTS = tuple(2**p for p in range(10, 21))


def compare_data() -> dict:
    """What the compare page's script shows for each model, computed here: the key
    numbers, the recipe by topic, the strip as text and the cache at each context."""
    models = []
    for facts in MODELS.values():
        if facts.bidirectional:
            continue  # an encoder keeps no cache: nothing to set against the context
        limit = facts.max_position_embeddings
        tokens = sorted(
            {t for t in [*COMPARE_CONTEXTS, facts.trained_context] if limit is None or t <= limit}
        )
        models.append(
            {
                "name": facts.name,
                "page": f"{slug(facts.name)}.html",
                "key": [list(row) for row in key_numbers(facts)],
                "recipe": recipe_topics(facts),
                "strip": layer_strip(facts),
                "trained_context": facts.trained_context,
                "cache": [[t, bill(facts, t).cache] for t in tokens],
            }
        )
    return {
        "topics": TOPICS,
        "models": models,
        "pairs": [list(names) for names in COMPARISONS],
    }


def compare_index() -> str:
    """The compare page: two models picked by the reader, and the pages for the pairs
    readers search for."""
    data = json.dumps(compare_data(), separators=(",", ":")).replace("</", "<\\/")
    lines = [
        f"({FOLDER}-compare)=",
        "# Compare two models",
        "",
        "Pick two models: their key numbers, their recipes clause by clause with the "
        "differences marked, their layers and their caches against the context. Every "
        "number here was computed by the package when the site was built, as on each "
        "model's page; the page only shows them. For another batch or number type, use "
        "the {ref}`calculator <calculator>`.",
        "",
        "```{raw} html",
        '<div class="model-compare" id="model-compare">'
        '<p class="mc-noscript">This view needs JavaScript; the pages below need none.</p>'
        "</div>",
        f'<script type="application/json" id="model-compare-data">{data}</script>',
        "```",
        "",
        "## The comparisons readers look for",
        "",
    ]
    lines += [f"- {{doc}}`{' vs '.join(names)} <{compare_name(names)}>`" for names in COMPARISONS]
    return "\n".join(lines + hidden_toctree(compare_name(names) for names in COMPARISONS))


def hidden_toctree(documents) -> list[str]:
    """The lines of a hidden toctree of ``documents``, after a blank line, ending a page."""
    return ["", "```{toctree}", ":hidden:", ":maxdepth: 1", "", *documents, "```", ""]


def index_page() -> str:
    """The index of the cards: one row per model, and the toctree of their pages."""
    lines = [
        f"({FOLDER}-index)=",
        "# Models",
        "",
        "A page per model of the site's table ({data}`~attention.models.table.MODELS`): "
        "its attention in one recipe, its layers, its cache at 8k, 32k and 128k tokens "
        "and at its own context, its weights, its config fields and what is unusual "
        "about it. Every page is computed from the table each time the site is built; "
        "a model added to the table gets its page. The same numbers for any "
        "`config.json`, from a terminal:",
        "",
        "```console",
        "$ python -m attention.models path/to/config.json --tokens 32768 --cache-dtype fp8",
        "```",
        "",
        "For another context, batch or number type, use the {ref}`calculator <calculator>`; "
        "for what a config field means, the {doc}`glossary </glossary>`; for every model "
        "beside the chapters that build its parts, with its cache, layers and heads, "
        "{doc}`/which-model-uses-what`. Below, the cache "
        "of one sequence at the model's context, in bf16, and what it adds per "
        "token once its local layers are full. A model's context is the one its source "
        "gives: the length it was trained at, the length its release says it supports, "
        "or its config's limit where no source gives one.",
        "",
    ]
    rows = []
    for facts in MODELS.values():
        growing, _, _ = cache_profile(facts)
        cache_at = bill(facts, facts.trained_context, state_dtype=STATE_DTYPE).cache
        at = f"{size(cache_at)} at {facts.trained_context:,}, {facts.context_claim}"
        rows.append(
            (
                f"{{doc}}`{facts.name} <{slug(facts.name)}>`",
                str(facts.year),
                f"{facts.layers}",
                facts.attention,
                size(growing) if growing else "–",
                "none: an encoder" if facts.bidirectional else at,
            )
        )
    lines += _table(
        ("model", "year", "layers", "attention", "cache per token", "cache at its context"),
        rows,
    )
    return "\n".join(lines + hidden_toctree(slug(facts.name) for facts in MODELS.values()))


def pages() -> dict[str, str]:
    """Every generated page, by its path under ``docs/models/``."""
    names = [slug(name) for name in MODELS]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    taken = {"index", "compare"} & set(names)
    if duplicates or taken:
        raise ValueError(f"model_cards: two pages share a name: {duplicates or sorted(taken)}")
    found = {"index.md": index_page(), "compare.md": compare_index()}
    found |= {f"{slug(facts.name)}.md": card(facts) for facts in MODELS.values()}
    found |= {f"{compare_name(names)}.md": compare_page(names) for names in COMPARISONS}
    return found


def write(docs: Path) -> tuple[int, int]:
    """Write the pages and figures under ``docs/models/``, each only if it changed, and
    remove what no model needs any more; return (pages written, figures drawn)."""
    folder = docs / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    written = drawn = 0
    wanted = pages()
    for name, text in wanted.items():
        path = folder / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written += 1
    for path in folder.glob("*.md"):
        if path.name not in wanted:
            path.unlink()
    figures = {f"{slug(f.name)}.png": f for f in MODELS.values() if can_draw(f)}
    compared = compare_figures()
    with torch.no_grad():
        for name, facts in figures.items():
            drawn += draw_strip(facts, folder / STRIPS / name)
        for name, (key, make) in compared.items():
            drawn += draw(folder / STRIPS / name, key, make)
    for path in (folder / STRIPS).glob("*"):
        if path.with_suffix(".png").name not in {*figures, *compared}:
            path.unlink()
    return written, drawn


def on_html_page_context(app: Sphinx, pagename: str, templatename, context, doctree) -> None:
    if pagename == f"{FOLDER}/compare":
        app.add_js_file("compare.js")


def on_builder_inited(app: Sphinx) -> None:
    written, drawn = write(Path(app.srcdir))
    logger.info("model_cards: %d pages, %d written, %d figures drawn", len(pages()), written, drawn)


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", on_builder_inited)
    app.connect("html-page-context", on_html_page_context)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
