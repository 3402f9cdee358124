"""Whitespace in the OpenAPI document's patterns is the set the validators strip (decision 362). `\\s` means a
different set to each regex dialect (ECMA-262 adds U+FEFF, Python's `re` adds U+001C-U+001F), so a schema
generator sent U+0085 as a user id, valid by the document's `\\S`, and the API refused it."""

from __future__ import annotations

import json
import re
import sys

from pydantic import Field, ValidationError

from vip.api.openapi import document
from vip.api.validation import NOT_BLANK, SPACE, Query


class Required(Query):
    text: str = Field(min_length=1, pattern=NOT_BLANK)


def accepted(text: str) -> bool:
    try:
        Required(text=text)
    except ValidationError:
        return False
    return True


def code_points() -> list[str]:
    return [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]


def test_the_document_s_whitespace_is_what_the_validators_strip():
    for ch in code_points():
        # A lone character is refused exactly when it is whitespace, which the document's class says.
        assert accepted(ch) == (re.fullmatch(NOT_BLANK, ch) is not None), hex(ord(ch))
        assert (re.fullmatch(SPACE, ch) is not None) == (not accepted(ch)), hex(ord(ch))
        # ... and a character the class calls whitespace is stripped from a text's ends, not kept.
        if re.fullmatch(SPACE, ch):
            assert Required(text=f"{ch}x{ch}").text == "x", hex(ord(ch))


def test_no_pattern_in_the_document_leans_on_a_dialect_s_whitespace():
    patterns: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                patterns.append(node["pattern"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(json.dumps(document("http://whitespace.invalid"))))
    assert patterns
    assert [p for p in patterns if re.search(r"(?<!\\)(?:\\\\)*\\[sS]", p)] == []
