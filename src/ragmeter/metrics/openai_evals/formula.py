"""The ``calculate_output`` formula of a ``multi`` grader, evaluated without ``eval``.

The formula is parsed with :mod:`ast` and only a whitelist of nodes is evaluated: numbers, the
sub-graders' names, ``+ - * /``, ``^`` (power, as OpenAI's graders guide lists it; ``**`` works
too), unary ``+``/``-``, parentheses and the functions ``min``, ``max``, ``abs``, ``floor``,
``ceil``, ``exp``, ``sqrt``, ``log`` (natural). Anything else (attributes, subscripts, other names
or calls, comparisons, strings, lambdas) is refused when the definition is read. A result that is
not a finite number (division by zero, ``log(0)``, ``sqrt(-1)``, overflow) is no value, with why.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Mapping

_MAX_LENGTH = 2000
_MAX_DEPTH = 60

FUNCTIONS: dict[str, Callable[..., float]] = {
    "min": min, "max": max, "abs": abs, "floor": math.floor, "ceil": math.ceil,
    "exp": math.exp, "sqrt": math.sqrt, "log": math.log,
}
_ARITY = {"abs": (1, 1), "floor": (1, 1), "ceil": (1, 1), "exp": (1, 1), "sqrt": (1, 1), "log": (1, 1),
          "min": (1, 64), "max": (1, 64)}
_BINARY: dict[type, Callable[[float, float], float]] = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b, ast.Pow: lambda a, b: a ** b,
}
_UNARY: dict[type, Callable[[float], float]] = {ast.USub: lambda a: -a, ast.UAdd: lambda a: a}


class FormulaError(ValueError):
    """The formula has no value for these grades (e.g. a division by zero)."""


def parse_formula(text: str, names: set[str]) -> ast.Expression:
    """Parse and check a formula whose variables are ``names``.

    Raises:
        ValueError: what is not allowed, and where.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("empty formula: write how the sub-graders combine, e.g. 0.5 * a + 0.5 * b")
    if len(text) > _MAX_LENGTH:
        raise ValueError(f"formula longer than {_MAX_LENGTH} characters")
    # ``^`` is a power in the formula (and in OpenAI's list), Python's XOR: give it the power's
    # precedence by writing it as ``**`` before parsing (a formula has no strings to protect)
    source = re.sub(r"\^", "**", text.strip())
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"cannot parse {text!r}: {exc.msg} at column {exc.offset}") from None
    except (ValueError, RecursionError, MemoryError):
        raise ValueError(f"cannot parse {text!r}") from None
    _check(tree.body, names, text, 0)
    return tree


def _check(node: ast.AST, names: set[str], text: str, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise ValueError("formula nested too deeply")
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise ValueError(f"{ast.unparse(node)} is not a number")
        return
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise ValueError(f"unknown name {node.id!r}; the formula may use the sub-graders "
                             f"({', '.join(sorted(names)) or 'none'}) and {', '.join(FUNCTIONS)}")
        return
    if isinstance(node, ast.BinOp):
        if type(node.op) not in _BINARY:
            raise ValueError(f"operator in {ast.unparse(node)!r} is not allowed; use + - * / ^")
        _check(node.left, names, text, depth + 1)
        _check(node.right, names, text, depth + 1)
        return
    if isinstance(node, ast.UnaryOp):
        if type(node.op) not in _UNARY:
            raise ValueError(f"operator in {ast.unparse(node)!r} is not allowed")
        _check(node.operand, names, text, depth + 1)
        return
    if isinstance(node, ast.Call):
        fname = node.func.id if isinstance(node.func, ast.Name) else None
        if fname not in FUNCTIONS or node.keywords:
            raise ValueError(f"call {ast.unparse(node)!r} is not allowed; functions: {', '.join(FUNCTIONS)}")
        lo, hi = _ARITY[fname]
        if not lo <= len(node.args) <= hi:
            raise ValueError(f"{fname} takes {lo if lo == hi else f'{lo} or more'} argument(s), "
                             f"got {len(node.args)}")
        for a in node.args:
            _check(a, names, text, depth + 1)
        return
    raise ValueError(f"{ast.unparse(node)!r} is not allowed in a formula (numbers, grader names, "
                     f"+ - * / ^, parentheses and {', '.join(FUNCTIONS)})")


def evaluate_formula(tree: ast.Expression, values: Mapping[str, float]) -> float:
    """The formula's value for the sub-graders' ``values``.

    Raises:
        FormulaError: no finite value (division by zero, a math domain error, overflow).
    """
    try:
        out = float(_eval(tree.body, values))
    except ZeroDivisionError:
        raise FormulaError("calculate_output divides by zero") from None
    except (ValueError, OverflowError) as exc:
        raise FormulaError(f"calculate_output has no value: {exc}") from None
    if not math.isfinite(out):
        raise FormulaError(f"calculate_output is {out}")
    return out


def _eval(node: ast.AST, values: Mapping[str, float]) -> float:
    if isinstance(node, ast.Constant):
        return float(node.value)
    if isinstance(node, ast.Name):
        return float(values[node.id])
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, values), _eval(node.right, values)
        if isinstance(node.op, ast.Pow) and abs(right) > 1e4 and abs(left) > 1:
            raise OverflowError("power too large")
        out = _BINARY[type(node.op)](left, right)
        if isinstance(out, complex):
            raise ValueError("a negative number to a fractional power")
        return out
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_eval(node.operand, values))
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    return float(FUNCTIONS[node.func.id](*(_eval(a, values) for a in node.args)))


# ---- the range of a formula ------------------------------------------------------------------------
Interval = tuple[float, float]
_WHOLE: Interval = (-math.inf, math.inf)


def formula_range(tree: ast.Expression, ranges: Mapping[str, Interval]) -> Interval:
    """The range of the formula's values when each sub-grader's value lies in ``ranges[name]``, by
    interval arithmetic (Moore, *Interval Analysis*, 1966): every value the formula can take for
    such grades lies in it. Where an operation has no finite bound (a division by a range that
    holds 0, ``log`` near 0, a power of a range that may be negative) the range is unbounded on
    that side; values the formula cannot have (``log`` of a negative number) are no value, so they
    do not widen it."""
    low, high = _range(tree.body, ranges)
    return (low, high) if low <= high else _WHOLE


def _ok(low: float, high: float) -> Interval:
    """An interval, or the whole line where arithmetic on infinities left no bound."""
    if math.isnan(low) or math.isnan(high) or low > high or low == math.inf or high == -math.inf:
        return _WHOLE
    return low, high


def _mul(a: float, b: float) -> float:
    return 0.0 if a == 0.0 or b == 0.0 else a * b  # 0 * inf is 0 for a bound: the factor is exactly 0


def _range(node: ast.AST, ranges: Mapping[str, Interval]) -> Interval:
    if isinstance(node, ast.Constant):
        return float(node.value), float(node.value)
    if isinstance(node, ast.Name):
        low, high = ranges[node.id]
        return float(low), float(high)
    if isinstance(node, ast.UnaryOp):
        low, high = _range(node.operand, ranges)
        return (-high, -low) if isinstance(node.op, ast.USub) else (low, high)
    if isinstance(node, ast.BinOp):
        return _binary(node.op, _range(node.left, ranges), _range(node.right, ranges))
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    args = [_range(a, ranges) for a in node.args]
    return _call(node.func.id, args)


def _binary(op: ast.operator, a: Interval, b: Interval) -> Interval:
    (a0, a1), (b0, b1) = a, b
    if isinstance(op, ast.Add):
        return _ok(a0 + b0, a1 + b1)
    if isinstance(op, ast.Sub):
        return _ok(a0 - b1, a1 - b0)
    if isinstance(op, ast.Mult):
        p = [_mul(x, y) for x in (a0, a1) for y in (b0, b1)]
        return _ok(min(p), max(p))
    if isinstance(op, ast.Div):
        if b0 <= 0.0 <= b1:
            return _WHOLE  # a divisor near 0 takes any size (exactly 0 is no value)
        return _binary(ast.Mult(), a, (1.0 / b1, 1.0 / b0))
    return _power(a, b)


def _power(a: Interval, b: Interval) -> Interval:
    """``x ** y``: on a positive base ``y * log(x)`` is bilinear in ``(y, log x)``, so the extremes
    are at the corners (with a base down to 0, at the corners' limits: ``0 ** y`` is 0 for
    ``y > 0``, 1 for ``y = 0``, unbounded for ``y < 0``); a constant integer exponent is monotone
    on each side of 0; a base that may be negative with any other exponent is unbounded."""
    (a0, a1), (b0, b1) = a, b
    if a0 >= 0.0:
        corners = [_pow(x, y) for x in (a0, a1) for y in (b0, b1)]
        return _ok(min(corners), max(corners))
    if b0 == b1 and float(b0).is_integer():
        n = int(b0)
        if n == 0:
            return 1.0, 1.0
        if n < 0 and a0 <= 0.0 <= a1:
            return _WHOLE
        ends = [_pow(a0, n), _pow(a1, n)]
        low, high = min(ends), max(ends)
        if n % 2 == 0 and a0 <= 0.0 <= a1:
            low = 0.0
        return _ok(low, high)
    return _WHOLE


def _pow(x: float, y: float) -> float:
    try:
        out = math.pow(x, y)
    except OverflowError:
        return math.inf if x > 0 or float(y).is_integer() and int(y) % 2 == 0 else -math.inf
    except ValueError:  # 0 to a negative power
        return math.inf
    return out


def _call(name: str, args: list[Interval]) -> Interval:
    if name == "min":
        return min(a[0] for a in args), min(a[1] for a in args)
    if name == "max":
        return max(a[0] for a in args), max(a[1] for a in args)
    (low, high), = args
    if name == "abs":
        if low >= 0.0:
            return low, high
        if high <= 0.0:
            return -high, -low
        return 0.0, max(-low, high)
    if name in {"floor", "ceil"}:
        f = math.floor if name == "floor" else math.ceil
        return (float(f(low)) if math.isfinite(low) else low), (float(f(high)) if math.isfinite(high) else high)
    if name == "exp":
        return _exp(low), _exp(high)
    if name == "sqrt":  # a negative value has no square root: no value
        return (math.sqrt(max(low, 0.0)), math.sqrt(high)) if high >= 0.0 else _WHOLE
    # log: a value <= 0 has no logarithm (no value)
    if high <= 0.0:
        return _WHOLE
    return (math.log(low) if low > 0.0 else -math.inf), math.log(high)


def _exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf
