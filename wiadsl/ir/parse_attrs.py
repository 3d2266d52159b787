"""A token cursor that reads types and attribute values (the leaves of IR text).

Every error is a ``WiaIRError`` with a span at the offending token.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from ..diagnostics import SourceFile, WiaIRError
from ..dtypes import IR_DTYPE_NAMES, DType
from .lexer import Token, error_at, tokenize
from .types import INDEX, IRType, ScalarType, TensorType, VectorType

_TENSOR = re.compile(r"^tensor<((?:(?:\d+|\?)x)*)([A-Za-z0-9]+)>$")
_VECTOR = re.compile(r"^vector<(\d+)x([A-Za-z0-9]+)>$")


class TokenCursor:
    """Recursive-descent helpers over the token list of one source text."""

    def __init__(self, text: str, filename: str = "<ir>"):
        self.source = SourceFile(filename, text)
        self.tokens = tokenize(self.source)
        self.pos = 0

    # ------------------------------------------------------------ cursor

    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.pos + ahead, len(self.tokens) - 1)]

    def next(self) -> Token:
        tok = self.peek()
        self.pos += 1
        return tok

    def at(self, kind: str, text: str | None = None, ahead: int = 0) -> bool:
        tok = self.peek(ahead)
        return tok.kind == kind and (text is None or tok.text == text)

    def accept(self, kind: str, text: str | None = None) -> Token | None:
        return self.next() if self.at(kind, text) else None

    def expect(self, kind: str, text: str | None = None, what: str | None = None) -> Token:
        if not self.at(kind, text):
            want = what or (repr(text) if text else kind.lower())
            raise self.error(f"expected {want}, got {self.describe(self.peek())}")
        return self.next()

    def punct(self, text: str) -> Token:
        return self.expect("PUNCT", text)

    def accept_punct(self, text: str) -> Token | None:
        return self.accept("PUNCT", text)

    @staticmethod
    def describe(tok: Token) -> str:
        return "end of input" if tok.kind == "EOF" else repr(tok.text)

    def error(self, message: str, tok: Token | None = None) -> WiaIRError:
        tok = tok or self.peek()
        return error_at(self.source, tok.line, tok.column, len(tok.text), message)

    def comma_list(self, item: Any, close: str | None = None) -> list[Any]:
        """``item (',' item)*``; empty when the next token is the ``close`` punct."""
        if close is not None and self.at("PUNCT", close):
            return []
        items = [item()]
        while self.accept_punct(","):
            items.append(item())
        return items

    # ------------------------------------------------------------- types

    def parse_type(self) -> IRType:
        tok = self.peek()
        if tok.kind == "TENSOR":
            self.next()
            return self.tensor_type(tok)
        if tok.kind == "VECTOR":
            self.next()
            return self.vector_type(tok)
        if tok.kind == "IDENT" and tok.text == "index":
            self.next()
            return INDEX
        if tok.kind == "IDENT" and tok.text in IR_DTYPE_NAMES:
            self.next()
            return ScalarType(IR_DTYPE_NAMES[tok.text])
        raise self.error(f"expected a type, got {self.describe(tok)}")

    def tensor_type(self, tok: Token) -> TensorType:
        m = _TENSOR.match(tok.text)
        if m is None or m[2] not in IR_DTYPE_NAMES:
            raise self.error(f"bad tensor type {tok.text!r}", tok)
        dims = [None if d == "?" else int(d) for d in m[1].split("x")[:-1]]
        if not dims:
            raise self.error("a tensor type needs rank >= 1; write a scalar type instead", tok)
        return TensorType(IR_DTYPE_NAMES[m[2]], tuple(dims))

    def vector_type(self, tok: Token) -> VectorType:
        m = _VECTOR.match(tok.text)
        if m is None or m[2] not in IR_DTYPE_NAMES:
            raise self.error(f"bad vector type {tok.text!r}", tok)
        if int(m[1]) < 1:
            raise self.error("a vector type needs at least one lane", tok)
        return VectorType(IR_DTYPE_NAMES[m[2]], int(m[1]))

    def type_group(self) -> list[IRType]:
        """``T`` or ``(T1, T2, ...)`` (possibly ``()``)."""
        if self.accept_punct("("):
            types = self.comma_list(self.parse_type, ")")
            self.punct(")")
            return types
        return [self.parse_type()]

    # -------------------------------------------------------- attributes

    def attr_dict(self) -> dict[str, Any]:
        """``{key = value, flag}``: a bare key means True."""
        self.punct("{")
        attrs: dict[str, Any] = {}

        def entry() -> None:
            tok = self.peek()
            if tok.kind == "STRING":
                key = json.loads(self.next().text)
            else:
                key = self.expect("IDENT", what="an attribute name").text
            if key in attrs:
                raise self.error(f"duplicate attribute '{key}'", tok)
            attrs[key] = self.attr_value() if self.accept_punct("=") else True

        self.comma_list(entry, "}")
        self.punct("}")
        return attrs

    def attr_value(self) -> Any:
        tok = self.next()
        if tok.kind == "INT":
            return int(tok.text)
        if tok.kind == "FLOAT":
            return float(tok.text)
        if tok.kind == "STRING":
            return json.loads(tok.text)
        if tok.kind == "PUNCT" and tok.text == "[":
            items = self.comma_list(self.attr_value, "]")
            self.punct("]")
            return items
        if tok.kind == "IDENT":
            if tok.text in ("true", "false"):
                return tok.text == "true"
            if tok.text == "dense":
                return self.dense()
            if tok.text in IR_DTYPE_NAMES:
                return IR_DTYPE_NAMES[tok.text]
        raise self.error(f"expected an attribute value, got {self.describe(tok)}", tok)

    def dense(self) -> np.ndarray:
        """``dense<nested : type>`` after the ``dense`` keyword."""
        self.punct("<")
        start = self.peek()
        nested = self.attr_value()
        self.punct(":")
        t = self.parse_type()
        self.punct(">")
        if isinstance(t, type(INDEX)):
            raise self.error("a dense attribute needs an element dtype, not index", start)
        dtype: DType = t.dtype  # type: ignore[union-attr]
        dims = t.shape if isinstance(t, TensorType) else ()
        try:
            array = np.array(nested, dtype=dtype.numpy)
        except (ValueError, TypeError, OverflowError):
            raise self.error(f"dense literal does not fit {t}", start) from None
        shape = tuple(d for d in dims if d is not None)
        if len(shape) != len(dims):  # a '?' dim: no literal has that shape
            raise self.error(f"dense literal of shape {list(array.shape)} does not match {t}", start)
        if array.size == 0 and int(np.prod(shape)) == 0:
            array = array.reshape(shape)
        if array.shape != shape:
            raise self.error(f"dense literal of shape {list(array.shape)} does not match {t}", start)
        return array
