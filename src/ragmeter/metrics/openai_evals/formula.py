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
