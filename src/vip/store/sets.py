"""Statements over a set of values of any size.

An `IN (...)` list binds one parameter per value, and PostgreSQL's protocol takes at most 65,535
parameters in a statement: a watch set of 100,000 addresses fails there. `any_of` binds the whole set as
one array parameter (`column = ANY(:values)`), whatever its size; COPY into a temporary table is the other
way, used where rows rather than a list of keys go in (indexer/store.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import ColumnElement, any_, bindparam
from sqlalchemy.dialects.postgresql import ARRAY


def any_of(column: ColumnElement[Any], values: Iterable[Any]) -> ColumnElement[bool]:
    """`column = ANY(:values)` with `values` bound as one array of the column's type."""
    return column == any_(bindparam(None, list(values), type_=ARRAY(column.type)))
