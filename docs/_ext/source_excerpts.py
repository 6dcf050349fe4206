"""Show the package's source in the chapters without its argument checks.

The chapters show the package's own code with ``literalinclude`` (``:pyobject:
CausalAttention.attention_weights``), so that the page cannot drift from the code the
tests run. That code begins with the checks that turn bad input into a clear error
(``attention/_checks.py``): useful to a user, noise to a reader learning the method.

This replaces Sphinx's ``literalinclude`` with one that, for Python, leaves out each
statement that only checks: the import of ``_checks``, a bare ``_checks.…(…)`` call,
and an assignment whose targets all go into the check as arguments (``x =
_checks.module_input(self, x, ...)``, which hands ``x`` back checked). Statements are
found with Python's tokenizer, so a check spread over several lines goes whole. A check
that computes something new (``size = _checks.dtype_bytes(...)``) stays: the lines
after it need its result. Everything else, line numbers apart, is Sphinx's own.
"""

from __future__ import annotations

import ast
import io
import textwrap
import tokenize

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.directives.code import LiteralInclude

CHECKS = "_checks"


def only_checks(statement: str) -> bool:
    """Whether one logical line of Python is a check and nothing else.

    Examples
    --------
    >>> only_checks("x = _checks.module_input(self, x, d_in=3)")
    True
    >>> only_checks("size = _checks.dtype_bytes('f', dtype)")
    False
    """
    try:
        tree = ast.parse(textwrap.dedent(statement))
    except SyntaxError:  # a line that opens a block ("def f(x):"), or a fragment
        return False
    if len(tree.body) != 1:
        return False
    node = tree.body[0]
    if isinstance(node, ast.ImportFrom):
        return any(alias.name == CHECKS for alias in node.names)
    if isinstance(node, ast.Import):
        return all(alias.name.endswith("." + CHECKS) for alias in node.names)
    value = node.value if isinstance(node, ast.Expr | ast.Assign) else None
    if not (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and isinstance(value.func.value, ast.Name)
        and value.func.value.id == CHECKS
    ):
        return False
    if isinstance(node, ast.Expr):
        return True
    given = {ast.unparse(arg) for arg in [*value.args, *(k.value for k in value.keywords)]}
    targets = [
        ast.unparse(element)
        for target in node.targets
        for element in (target.elts if isinstance(target, ast.Tuple) else [target])
    ]
    return all(target in given for target in targets)


def without_checks(code: str) -> str:
    """``code`` with every statement that only checks left out.

    Code the tokenizer cannot read (a fragment cut mid-string) comes back unchanged.

    Examples
    --------
    >>> print(without_checks('''def f(x, n):
    ...     _checks.positive_int(
    ...         "f", "n", n
    ...     )
    ...     return x * n
    ... '''), end="")
    def f(x, n):
        return x * n
    """
    lines = code.splitlines(keepends=True)
    drop: set[int] = set()
    start = None  # the first line (0-based) of the logical line being read
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            kind = token.type
            if kind in (tokenize.NL, tokenize.COMMENT) and start is None:
                continue
            if kind in (tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING):
                continue
            if start is None:
                start = token.start[0] - 1
            if kind in (tokenize.NEWLINE, tokenize.ENDMARKER):
                end = token.end[0]
                if only_checks("".join(lines[start:end])):
                    drop.update(range(start, end))
                start = None
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return code
    return "".join(line for number, line in enumerate(lines) if number not in drop)


class ExcerptInclude(LiteralInclude):
    """``literalinclude``, without the checks in Python source."""

    def run(self) -> list[nodes.Node]:
        result = super().run()
        language = self.options.get("language", "")
        if not (self.arguments[0].endswith(".py") or language == "python"):
            return result
        for block in result:
            for literal in block.findall(nodes.literal_block):
                text = literal.astext()
                shown = without_checks(text)
                if shown != text:
                    literal.clear()
                    literal += nodes.Text(shown)
                    literal.rawsource = shown
        return result


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("literalinclude", ExcerptInclude, override=True)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
