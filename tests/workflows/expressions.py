"""The subset of GitHub Actions expressions this project's workflow files use, evaluated like GitHub does.

Supported: literals (`'str'` with `''` escapes, numbers, `true`, `false`, `null`); context access
(`inputs.x`, `matrix.x`, `needs.<job>.outputs.x`, `needs.<job>.result`, `secrets.X`, `steps.<id>.outputs.x`,
`vars.X`, `github.*`, `env.X`, `strategy.*`, `runner.*`, `job.*`; names may contain `-`; lookups are
case-insensitive and a missing property is `null`); `x[expr]`; the functions `fromJSON`, `toJSON` and the
status functions `success()`, `failure()`, `cancelled()`, `always()`; the operators `!`, `==`, `!=`, `&&`,
`||` and parentheses. `&&`/`||` return an operand (not a boolean), `==` coerces mismatched types to
numbers and compares strings case-insensitively, as documented for GitHub expressions.

Anything else (other functions, `<`, `>`, `*` filters) raises `Unsupported`: a workflow change that uses
more of the language must extend this module on purpose, not be evaluated wrongly in silence.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

CONTEXTS = frozenset({"github", "inputs", "vars", "secrets", "matrix", "needs", "steps", "env", "strategy",
                      "runner", "job"})
STATUS_FUNCTIONS = frozenset({"success", "failure", "cancelled", "always"})

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<string>'(?:[^']|'')*')
  | (?P<number>-?(?:0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?))
  | (?P<op>==|!=|&&|\|\||<=|>=|[!<>()\[\],.*])
  | (?P<ident>[A-Za-z_][A-Za-z0-9_-]*)
""", re.VERBOSE)


class Unsupported(Exception):
    """The workflow uses something this harness does not emulate."""


class ExpressionError(Exception):
    """The expression is malformed or refers to something that cannot exist (GitHub rejects it too)."""


@dataclass(frozen=True)
class Token:
    kind: str
    text: str


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match:
            raise ExpressionError(f"cannot parse {text[pos:]!r} in expression {text!r}")
        pos = match.end()
        kind = match.lastgroup or ""
        if kind != "ws":
            tokens.append(Token(kind, match.group()))
    return tokens


# -- AST ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Literal:
    value: Any


@dataclass(frozen=True)
class Context:
    name: str


@dataclass(frozen=True)
class Member:
    target: Any
    key: Any  # a Literal name or an expression (index)


@dataclass(frozen=True)
class Call:
    name: str
    args: tuple[Any, ...]


@dataclass(frozen=True)
class Not:
    operand: Any


@dataclass(frozen=True)
class Binary:
    op: str
    left: Any
    right: Any


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.pos = 0

    def peek(self) -> Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, text: str | None = None) -> Token:
        token = self.peek()
        if token is None or (text is not None and token.text != text):
            raise ExpressionError(f"expected {text or 'a token'} in expression {self.text!r}")
        self.pos += 1
        return token

    def parse(self) -> Any:
        node = self.or_()
        if self.peek() is not None:
            raise ExpressionError(f"unexpected {self.peek().text!r} in expression {self.text!r}")  # type: ignore[union-attr]
        return node

    def or_(self) -> Any:
        node = self.and_()
        while self.peek() is not None and self.peek().text == "||":  # type: ignore[union-attr]
            self.take()
            node = Binary("||", node, self.and_())
        return node

    def and_(self) -> Any:
        node = self.equality()
        while self.peek() is not None and self.peek().text == "&&":  # type: ignore[union-attr]
            self.take()
            node = Binary("&&", node, self.equality())
        return node

    def equality(self) -> Any:
        node = self.unary()
        while self.peek() is not None and self.peek().text in ("==", "!=", "<", ">", "<=", ">="):  # type: ignore[union-attr]
            op = self.take().text
            if op not in ("==", "!="):
                raise Unsupported(f"operator {op!r} (expression {self.text!r})")
            node = Binary(op, node, self.unary())
        return node

    def unary(self) -> Any:
        if self.peek() is not None and self.peek().text == "!":  # type: ignore[union-attr]
            self.take()
            return Not(self.unary())
        return self.postfix()

    def postfix(self) -> Any:
        node = self.primary()
        while True:
            token = self.peek()
            if token is None:
                return node
            if token.text == ".":
                self.take()
                name = self.take()
                if name.text == "*":
                    raise Unsupported(f"object filter '.*' (expression {self.text!r})")
                if name.kind != "ident":
                    raise ExpressionError(f"expected a property name after '.' in {self.text!r}")
                node = Member(node, Literal(name.text))
            elif token.text == "[":
                self.take()
                index = self.or_()
                self.take("]")
                node = Member(node, index)
            else:
                return node

    def primary(self) -> Any:
        token = self.take()
        if token.kind == "string":
            return Literal(token.text[1:-1].replace("''", "'"))
        if token.kind == "number":
            value = float(int(token.text, 16)) if token.text.lower().startswith(("0x", "-0x")) else float(token.text)
            return Literal(int(value) if value.is_integer() else value)
        if token.text == "(":
            node = self.or_()
            self.take(")")
            return node
        if token.kind == "ident":
            lowered = token.text.lower()
            if lowered in ("true", "false"):
                return Literal(lowered == "true")
            if lowered == "null":
                return Literal(None)
            nxt = self.peek()
            if nxt is not None and nxt.text == "(":
                self.take("(")
                args: list[Any] = []
                if self.peek() is not None and self.peek().text != ")":  # type: ignore[union-attr]
                    args.append(self.or_())
                    while self.peek() is not None and self.peek().text == ",":  # type: ignore[union-attr]
                        self.take()
                        args.append(self.or_())
                self.take(")")
                return Call(lowered, tuple(args))
            if lowered not in CONTEXTS:
                raise ExpressionError(f"unknown context {token.text!r} in expression {self.text!r}")
            return Context(lowered)
        raise ExpressionError(f"unexpected {token.text!r} in expression {self.text!r}")


def parse(text: str) -> Any:
    return _Parser(text).parse()


# -- values ------------------------------------------------------------------------------------------
def truthy(value: Any) -> bool:
    if value is None or value is False:
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value != 0 and not math.isnan(value)
    if isinstance(value, str):
        return value != ""
    return True


def to_number(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if text == "":
            return 0.0
        try:
            return float(int(text, 16)) if text.lower().startswith("0x") else float(text)
        except ValueError:
            return math.nan
    return math.nan


def equal(left: Any, right: Any) -> bool:
    if isinstance(left, str) and isinstance(right, str):
        return left.casefold() == right.casefold()
    simple = (str, int, float, bool, type(None))
    if isinstance(left, simple) and isinstance(right, simple):
        if type(left) is type(right) or (isinstance(left, (int, float)) and isinstance(right, (int, float))
                                         and not isinstance(left, bool) and not isinstance(right, bool)):
            return left == right
        a, b = to_number(left), to_number(right)
        return not (math.isnan(a) or math.isnan(b)) and a == b
    return left is right


def to_string(value: Any) -> str:
    """How a value is rendered into a string (an `env:` value, a `with:` input, an interpolation)."""
    if value is None:
        return ""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2)


def lookup(target: Any, key: Any) -> Any:
    if isinstance(target, Mapping):
        if not isinstance(key, str):
            key = to_string(key)
        if key in target:
            return target[key]
        folded = key.casefold()
        for name, value in target.items():
            if isinstance(name, str) and name.casefold() == folded:
                return value
        return None
    if isinstance(target, list):
        number = to_number(key)
        if not math.isnan(number) and number.is_integer() and 0 <= int(number) < len(target):
            return target[int(number)]
        return None
    return None


# -- evaluation --------------------------------------------------------------------------------------
@dataclass
class Scope:
    """The contexts an expression may see, and what the status functions answer at that point."""

    contexts: Mapping[str, Any]
    status: Callable[[str], bool] | None = None  # success/failure/cancelled/always -> bool

    def context(self, name: str) -> Any:
        if name not in self.contexts:
            raise ExpressionError(f"the {name!r} context is not available here")
        return self.contexts[name]


def evaluate(node: Any, scope: Scope) -> Any:
    if isinstance(node, Literal):
        return node.value
    if isinstance(node, Context):
        return scope.context(node.name)
    if isinstance(node, Member):
        target = evaluate(node.target, scope)
        key = node.key.value if isinstance(node.key, Literal) else evaluate(node.key, scope)
        if (isinstance(node.target, Context) and node.target.name == "needs" and isinstance(target, Mapping)
                and lookup(target, key) is None):
            raise ExpressionError(f"needs.{key} is not a job listed in this job's `needs`")
        return lookup(target, key)
    if isinstance(node, Not):
        return not truthy(evaluate(node.operand, scope))
    if isinstance(node, Binary):
        left = evaluate(node.left, scope)
        if node.op == "&&":
            return evaluate(node.right, scope) if truthy(left) else left
        if node.op == "||":
            return left if truthy(left) else evaluate(node.right, scope)
        right = evaluate(node.right, scope)
        return equal(left, right) if node.op == "==" else not equal(left, right)
    if isinstance(node, Call):
        return _call(node, scope)
    raise ExpressionError(f"cannot evaluate {node!r}")  # pragma: no cover


def _call(node: Call, scope: Scope) -> Any:
    if node.name in STATUS_FUNCTIONS:
        if node.args:
            raise ExpressionError(f"{node.name}() takes no arguments")
        if scope.status is None:
            raise ExpressionError(f"{node.name}() is only allowed in `if:`")
        return scope.status(node.name)
    args = [evaluate(arg, scope) for arg in node.args]
    if node.name == "fromjson":
        if len(args) != 1:
            raise ExpressionError("fromJSON takes one argument")
        text = to_string(args[0])
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ExpressionError(f"fromJSON: {text!r} is not JSON ({exc})") from None
    if node.name == "tojson":
        if len(args) != 1:
            raise ExpressionError("toJSON takes one argument")
        return json.dumps(args[0], indent=2)
    raise Unsupported(f"function {node.name}() is not emulated")


def uses_status_function(text: str) -> bool:
    return any(isinstance(n, Call) and n.name in STATUS_FUNCTIONS for n in _walk(parse(text)))


def _walk(node: Any) -> list[Any]:
    out = [node]
    if isinstance(node, Member):
        out += _walk(node.target) + ([] if isinstance(node.key, Literal) else _walk(node.key))
    elif isinstance(node, Not):
        out += _walk(node.operand)
    elif isinstance(node, Binary):
        out += _walk(node.left) + _walk(node.right)
    elif isinstance(node, Call):
        for arg in node.args:
            out += _walk(arg)
    return out


# -- templates ---------------------------------------------------------------------------------------
def split_template(text: str) -> list[tuple[bool, str]]:
    """[(is_expression, text)]: literal text and the insides of each `${{ ... }}`, quote-aware."""
    parts: list[tuple[bool, str]] = []
    pos = 0
    while True:
        start = text.find("${{", pos)
        if start < 0:
            if pos < len(text):
                parts.append((False, text[pos:]))
            return parts
        if start > pos:
            parts.append((False, text[pos:start]))
        i, quoted = start + 3, False
        while i < len(text):
            if text[i] == "'":
                quoted = not quoted
            elif not quoted and text.startswith("}}", i):
                break
            i += 1
        else:
            raise ExpressionError(f"unterminated ${{{{ in {text!r}")
        parts.append((True, text[start + 3:i].strip()))
        pos = i + 2


def render(value: Any, scope: Scope) -> Any:
    """Evaluate a YAML value: a lone `${{ expr }}` keeps its type; mixed text becomes a string."""
    if isinstance(value, str):
        parts = split_template(value)
        if len(parts) == 1 and parts[0][0] and value.strip().startswith("${{") and value.strip().endswith("}}"):
            return evaluate(parse(parts[0][1]), scope)
        if not any(is_expr for is_expr, _ in parts):
            return value
        return "".join(to_string(evaluate(parse(text), scope)) if is_expr else text for is_expr, text in parts)
    if isinstance(value, list):
        return [render(item, scope) for item in value]
    if isinstance(value, dict):
        return {key: render(item, scope) for key, item in value.items()}
    return value


def render_str(value: Any, scope: Scope) -> str:
    return to_string(render(value, scope))


def condition(value: Any, scope: Scope) -> bool:
    """An `if:`: with or without `${{ }}`; `success() &&` is implied unless a status function is used."""
    if value is None:
        return scope.status("success") if scope.status else True
    if isinstance(value, bool):
        return value and (scope.status("success") if scope.status else True)
    text = str(value).strip()
    if text.startswith("${{") and text.endswith("}}") and len(split_template(text)) == 1:
        text = text[3:-2].strip()
    elif "${{" in text:
        return truthy(render(text, scope))
    if not uses_status_function(text):
        text = f"success() && ({text})"
    return truthy(evaluate(parse(text), scope))
