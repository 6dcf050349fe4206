"""``python -m attention.models CONFIG_OR_NAME``: a model's recipe, strip and bill.

Run it with a ``config.json`` (or its folder) or a name from
:data:`.MODELS`::

    python -m attention.models path/to/config.json --tokens 32768 --batch 4 --cache-dtype fp8
    python -m attention.models "gpt-oss-20b"
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from attention.models.costs import BITS, bill, parameter_count
from attention.models.facts import ModelFacts
from attention.models.readers import facts_from_config
from attention.models.table import MODELS
from attention.models.text import format_bytes, format_number, kind_name, layer_strip, recipe


def _facts_and_parameters(source: str, tokens: int | None) -> tuple[ModelFacts, int | None]:
    if source in MODELS:
        facts = MODELS[source]
        return facts, facts.weights.parameters if facts.weights is not None else None
    path = Path(source)
    if not path.exists():
        raise ValueError(
            f"attention.models: expected a config.json path or a name from MODELS "
            f"({', '.join(MODELS)}), got {source!r}"
        )
    try:
        parameters = parameter_count(path)
    except Exception:  # a config transformers cannot build a model from: no weights
        parameters = None
    return facts_from_config(path, trained_context=tokens), parameters


def main(argv: list[str] | None = None) -> int:
    """``python -m attention.models CONFIG_OR_NAME``: the recipe, the strip, the bill."""
    parser = argparse.ArgumentParser(
        prog="python -m attention.models",
        description="A model's attention from its config: its recipe, its layer strip "
        "and its memory bill. Offline.",
    )
    parser.add_argument("config", help="a config.json (or its folder) or a name in MODELS")
    parser.add_argument(
        "--tokens",
        type=int,
        default=None,
        help="context length (default: the config's max_position_embeddings; needed for "
        "a config that sets no position limit, as BLOOM's)",
    )
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--dtype", choices=tuple(BITS), default="bf16", help="weights")
    parser.add_argument("--cache-dtype", choices=tuple(BITS), default="bf16")
    parser.add_argument("--state-dtype", choices=tuple(BITS), default="fp32")
    args = parser.parse_args(argv)
    try:
        facts, parameters = _facts_and_parameters(args.config, args.tokens)
    except ValueError as error:
        parser.exit(2, f"{error}\n")
    tokens = facts.trained_context if args.tokens is None else args.tokens
    if tokens is None:
        parser.exit(
            2,
            f"expected --tokens for {args.config}: its config sets no position limit to "
            "take the context from\n",
        )
    result = bill(
        facts,
        tokens,
        batch=args.batch,
        dtype=args.dtype,
        cache_dtype=args.cache_dtype,
        state_dtype=args.state_dtype,
        parameters=parameters,
    )
    print(recipe(facts))
    print()
    print(layer_strip(facts))
    print()
    print(f"Bill for {args.batch} x {format_number(tokens)} tokens:")
    if result.weights is None or parameters is None:  # both None, or neither
        print(f"  weights ({args.dtype}): unknown")
    else:
        count = f"{format_number(parameters)} parameters"
        print(f"  weights ({args.dtype}): {format_bytes(result.weights)} ({count})")
    print(f"  cache ({args.cache_dtype}, states {args.state_dtype}): {format_bytes(result.cache)}")
    for kind, size in result.per_kind.items():
        if size:
            print(f"    {kind_name(facts, kind)}: {format_bytes(size)}")
    if result.total is not None:
        print(f"  total: {format_bytes(result.total)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
