"""Compare what a page printed with what its source expects, number by number.

Printed floats are not portable: the last bits of a result change with the CPU
(AVX2, AVX-512, NEON), the BLAS library and the torch build, and torch changes the
whole layout of a tensor when they do (``tensor([1., 1.])`` where every value is
exactly 1, ``tensor([1.0000, 1.0000])`` where one of them is 1.0000001). So two
outputs match when

* the text around the numbers is the same, apart from whitespace and column
  alignment: words, brackets, commas, ``grad_fn=<...>``, ``dtype=...``, and with
  them the count and nesting of the numbers;
* integers are equal;
* each pair of floats differs by at most 1.5 units in the last digit printed: the
  coarser of the two numbers sets the unit, so ``0.4858`` and ``0.4857`` match
  (unit 1e-4), ``1.2346e-07`` and ``1.2345e-07`` match (unit 1e-11, so relative
  to the number's size), and ``0.0000`` matches ``1.0000e-08``. torch prints a
  float tensor whose values are all whole numbers as ``1.``; such a number counts
  as printed with torch's 4 decimals, so ``1.`` matches ``1.0000`` but not ``1.4``
  or ``2.``. Large numbers get at least 1e-5 of their size: ``152.0002`` carries more
  digits than float32 holds.

The parsing is pytest-doctestplus's ``FLOAT_CMP``; this module only sets the
tolerance and explains a mismatch (which line, which number, by how much).
"""

from __future__ import annotations

import difflib
import doctest
import math
import re
from dataclasses import dataclass
from decimal import Decimal

from pytest_doctestplus.output_checker import FLOAT_CMP, OutputChecker

FLAGS = FLOAT_CMP | doctest.NORMALIZE_WHITESPACE
# How many units of the last printed digit two numbers may differ by.
UNITS = 1.5
# The unit of a whole number printed as ``1.``: torch's default 4 decimals.
WHOLE = 1e-4
# ... and never less than this fraction of the number: about 100 float32 roundings.
RELATIVE = 1e-5


def last_digit(number: str) -> float:
    """The value of one unit in the last digit of a printed number.

    torch prints a tensor of whole numbers as ``1.``; such a number is whole to the
    4 decimals torch prints by default, so its unit is 1e-4 too.

    >>> last_digit("0.4858"), last_digit("-1.2345e-07"), last_digit("1.")
    (0.0001, 1e-11, 0.0001)
    """
    mantissa, _, exponent = number.strip().lower().partition("e")
    _, point, decimals = mantissa.partition(".")
    if point and not decimals and not exponent:
        return WHOLE
    return 10.0 ** (int(exponent or 0) - len(decimals))


def tolerance(expected: str, printed: str) -> float:
    """1.5 units in the last digit of the coarser number, and at least 1e-5 of its size.

    The floor matters only for large numbers printed with many decimals (``152.0002``),
    where the last digits are beyond what float32 holds.
    """
    size = max(abs(float(expected)), abs(float(printed)))
    return max(UNITS * max(last_digit(expected), last_digit(printed)), RELATIVE * size)


def same_number(expected: str, printed: str) -> bool:
    a, b = float(expected), float(printed)
    if not (math.isfinite(a) and math.isfinite(b)):
        return a == b or (math.isnan(a) and math.isnan(b))
    # Round away the float error of the subtraction itself (0.4858 - 0.4857 > 1e-4).
    return round(abs(a - b), 12) <= tolerance(expected, printed)


class PrintedOutputChecker(OutputChecker):
    """doctestplus's number-aware checker, with the tolerance of :func:`same_number`.

    doctestplus recognises a number only between separators. Printed sentences also
    end a number with ``:``, ``;``, ``%`` or a full stop, so those count too.
    """

    def __init__(self) -> None:
        super().__init__()
        exponent = r"(?:e[+-]?\d+)"
        number = (
            rf"\s*([+-]?\d+\.\d*{exponent}?|[+-]?\.\d+{exponent}?|[+-]?\d+{exponent}|nan|[+-]?inf)"
        )
        before = r"\s|[*+,<=(\[:/]"
        after = r"\s|[*+,<=(\[>j)\]}:;%]|\.(?:\s|$)"
        self.num_got_rgx = self.num_want_rgx = re.compile(
            rf"(^{number}(?={after}|$)|(?<={before}){number}(?={after}|$))"
        )

    def equal_floats(self, a: str, b: str) -> bool:
        return same_number(a, b)


CHECKER = PrintedOutputChecker()


def printed_text(cell: dict) -> str:
    """The text a reader sees under a notebook's code cell.

    Streams, plain-text results, and Markdown a cell displays (a table the page
    renders, such as the home page's, is checked like printed text).
    """
    parts = []
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if output["output_type"] == "stream" and output["name"] == "stdout":
            parts.append(output["text"])
        elif "text/markdown" in data:
            parts.append(data["text/markdown"] + "\n")
        elif output["output_type"] == "execute_result":
            parts.append(data.get("text/plain", "") + "\n")
    return normalise("".join(parts))


def normalise(text: str) -> str:
    """Ignore trailing spaces on each line and blank lines at either end."""
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def matches(expected: str, printed: str, ellipsis: bool = False) -> bool:
    """Whether ``printed`` is ``expected`` up to layout and printed precision.

    With ``ellipsis``, ``...`` in ``expected`` stands for any text (an unchecked part).

    >>> matches("tensor([1., 1.])", "tensor([1.0000, 1.0000])")
    True
    >>> matches("tensor([0.4858, 1.4950])", "tensor([0.4857, 1.4970])")
    False
    >>> matches("a: 0.5\\n...\\nb: 1.", "a: 0.5000\\n12.3 ms\\nb: 1.0000", ellipsis=True)
    True
    """
    flags = FLAGS | (doctest.ELLIPSIS if ellipsis else 0)
    return CHECKER.check_output(expected, printed, flags)


@dataclass
class Number:
    text: str
    line: int  # 1-based line within its output


def numbers(text: str) -> list[Number]:
    """The floats in ``text`` as the checker sees them, with their line numbers."""
    found = []
    for match in CHECKER.num_got_rgx.finditer(text):
        start = match.start(1) + len(match.group(1)) - len(match.group(1).lstrip())
        found.append(Number(match.group(1).strip(), text.count("\n", 0, start) + 1))
    return found


def skeleton(text: str) -> str:
    """The text around the numbers, whitespace collapsed: what must match exactly."""
    return CHECKER.num_got_rgx.sub("#", " ".join(text.split()))


def explain(expected: str, printed: str) -> str | None:
    """``None`` if the outputs match; otherwise what differs, for a build warning."""
    if matches(expected, printed):
        return None
    diff = "\n".join(
        difflib.unified_diff(
            expected.splitlines(), printed.splitlines(), "expected", "printed", lineterm=""
        )
    )
    if skeleton(expected) != skeleton(printed):
        reason = "the text around the numbers differs (words, brackets, or how many numbers)"
        return f"{reason}:\n{diff}"
    lines = []
    for want, got in zip(numbers(expected), numbers(printed), strict=True):
        if not same_number(want.text, got.text):
            off = abs(float(want.text) - float(got.text))
            lines.append(
                f"  line {got.line}: expected {want.text}, printed {got.text} "
                f"(off by {off:.3g}; tolerance {tolerance(want.text, got.text):.3g})"
            )
    return "numbers differ by more than 1.5 units in their last digit:\n" + "\n".join(
        [*lines, diff]
    )


# -- Another CPU's last digit -----------------------------------------------------------


def shifted(text: str, units: int) -> str:
    """``text`` as another CPU may print it: every float ``units`` units of its last digit
    away, and a whole number printed ``1.`` written with torch's 4 decimals.

    Another CPU, BLAS or build computes the same result to within about 1e-7 of its
    size. Printed with 4 or 5 digits, that changes at most the last digit, by one, where
    the value sits on a rounding boundary; and a tensor of whole numbers (``1.``) loses
    its short form when one of them is 1.0000001. Integers, ``nan`` and ``inf``, a
    number beyond float64's range (``-1.8e+308``, finfo's ``min`` to 2 digits) and the
    text around the numbers stay as they are.

    >>> shifted("tensor([0.4858, 1., -2.5e-07]) over 6 tokens", 1)
    'tensor([0.4859, 1.0001, -2.4e-07]) over 6 tokens'
    >>> shifted("loss 0.0000, nan", -1)
    'loss -0.0001, nan'
    """

    def shift(match: re.Match) -> str:
        whole = match.group(0)
        number = whole.lstrip()
        mantissa, e, exponent = number.lower().partition("e")
        if not math.isfinite(float(number)):  # nan, inf, and -1.8e+308 that means finfo.min
            return whole
        step = Decimal(1).scaleb(round(math.log10(last_digit(mantissa))))
        moved = (Decimal(mantissa) + units * step).quantize(step)
        return whole[: len(whole) - len(number)] + f"{moved}{e}{exponent}"

    return CHECKER.num_got_rgx.sub(shift, text)


# A number written with two or more decimals, as prose restates a printed value:
# 1.4950, 0.17, −0.25. Not part of a longer token (2.13.0, x_0.25, 1.5e-4 counts
# from its mantissa's digits only if written with two decimals).
PROSE_NUMBER = re.compile(r"(?<![\w.])[-−]?\d+\.\d{2,}(?:e[+-]?\d+)?(?![\w]|\.\d)")
# A link's target, an autolink or a bare address: read by a browser, not a reader.
ADDRESS = re.compile(r"\]\([^)\s]*\)|<https?://[^>\s]*>|https?://\S+")


def unprinted(prose: str, printed: list[str]) -> tuple[int, list[str]]:
    """How many numbers ``prose`` restates, and those that no printed number matches.

    A restated number matches a printed one within 1.5 units of the coarser last
    digit, so rounding is allowed ("about 0.24" for 0.2379) but a changed digit is not.

    >>> unprinted("The highest score, 1.4950, is about 1.50; dropout 0.1.", ["1.4950"])
    (2, [])
    >>> unprinted("The highest score is 1.4970.", ["1.4950", "0.9544"])
    (1, ['1.4970'])

    An address is not prose: a paper's arXiv number in a link is no restated value.

    >>> unprinted("[Wang et al.](https://arxiv.org/abs/2409.12191), <https://x.org/1.25>", [])
    (0, [])
    """
    prose = ADDRESS.sub(" ", prose)
    found = [match.group().replace("−", "-") for match in PROSE_NUMBER.finditer(prose)]
    missing = [n for n in found if not any(same_number(n, value) for value in printed)]
    return len(found), missing


# -- Expected output written in a script ---------------------------------------------
# A gallery script states what a print shows in a comment right after it:
#
#     print(weights.sum(dim=-1))
#     # Expected output:
#     # tensor([1., 1., 1., 1., 1., 1.])

EXPECTED = "# Expected output:"
UNCHECKED = "# Unchecked output:"


def expected_output(code: str) -> tuple[str | None, str | None]:
    """A code block's expected output (``None`` if it states none), and why it is unchecked.

    >>> code = "print(1.5)\\n# Expected output:\\n# 1.5\\nprint('a')\\n# Expected output:\\n# a"
    >>> expected_output(code)
    ('1.5\\na', None)
    """
    expected, unchecked, inside = None, None, False
    for line in code.splitlines():
        stripped = line.strip()
        if stripped == EXPECTED:
            inside, expected = True, expected or []
        elif stripped.startswith(UNCHECKED):
            unchecked, inside = stripped.removeprefix(UNCHECKED).strip(), False
        elif inside and stripped.startswith("#"):
            expected.append(stripped.removeprefix("#").removeprefix(" "))
        else:
            inside = False
    return (None if expected is None else "\n".join(expected)), unchecked


def without_expectations(code: str) -> str:
    """The code block as the page shows it: the expected-output comments removed."""
    kept, inside = [], False
    for line in code.splitlines():
        stripped = line.strip()
        if stripped == EXPECTED:
            inside = True
            continue
        if stripped.startswith(UNCHECKED):
            continue
        if inside and stripped.startswith("#"):
            continue
        inside = False
        kept.append(line)
    return "\n".join(kept)
