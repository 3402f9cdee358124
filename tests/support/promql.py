"""What a PromQL expression refers to (series names, label names), and what series the service exports.

Enough of PromQL to check our own alert rules and dashboard queries where `promtool` is not installed:
strings, range brackets and grouping clauses are cut out, then every identifier is a function, a keyword
or a series name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import ModuleType

from prometheus_client.metrics import MetricWrapperBase

# Labels Prometheus attaches to every scraped series; a scraped label of the same name is renamed
# `exported_<name>` (honor_labels: false, the default).
TARGET_LABELS = frozenset({"job", "instance"})
# Series Prometheus itself writes for every target.
PROMETHEUS_SERIES = {"up": frozenset(), "scrape_duration_seconds": frozenset(),
                     "scrape_samples_scraped": frozenset()}

AGGREGATIONS = frozenset({"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
                          "bottomk", "topk", "quantile", "limitk", "limit_ratio"})
FUNCTIONS = AGGREGATIONS | frozenset({
    "abs", "absent", "absent_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min",
    "day_of_month", "day_of_week", "day_of_year", "days_in_month", "delta", "deriv", "exp", "floor",
    "histogram_quantile", "histogram_count", "histogram_sum", "holt_winters", "hour", "idelta", "increase",
    "irate", "label_join", "label_replace", "ln", "log2", "log10", "minute", "month", "predict_linear",
    "rate", "resets", "round", "scalar", "sgn", "sort", "sort_desc", "sqrt", "time", "timestamp", "vector",
    "year", "avg_over_time", "min_over_time", "max_over_time", "sum_over_time", "count_over_time",
    "quantile_over_time", "stddev_over_time", "stdvar_over_time", "last_over_time", "present_over_time",
})
KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
                      "group_left", "group_right", "inf", "nan"})

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_SELECTOR = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)?\s*\{([^{}]*)\}")
_MATCHER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)")
_BRACKETS = re.compile(r"\[[^\[\]]*\]")
_IDENT = re.compile(r"(?<![\w.$])([A-Za-z_:][A-Za-z0-9_:]*)\s*(\()?")


@dataclass
class Refs:
    """The series, functions and labels one expression names."""

    series: set[str] = field(default_factory=set)
    functions: set[str] = field(default_factory=set)
    unknown_functions: set[str] = field(default_factory=set)
    matchers: list[tuple[str | None, set[str]]] = field(default_factory=list)
    by_labels: set[str] = field(default_factory=set)
    other_grouping_labels: set[str] = field(default_factory=set)
    uses_without: bool = False

    @property
    def aggregates(self) -> bool:
        return bool(self.functions & AGGREGATIONS)


def balanced(expr: str) -> bool:
    depth = 0
    pairs = {")": "(", "]": "[", "}": "{"}
    stack: list[str] = []
    for char in _STRING.sub('""', expr):
        if char in "([{":
            stack.append(char)
        elif char in pairs and (not stack or stack.pop() != pairs[char]):
            return False
        depth = len(stack)
    return depth == 0


def references(expr: str) -> Refs:
    refs = Refs()
    text = _STRING.sub('""', expr)

    def selector(match: re.Match) -> str:
        refs.matchers.append((match.group(1), set(_MATCHER.findall(match.group(2)))))
        return f" {match.group(1) or ''} "

    text = _SELECTOR.sub(selector, text)

    def grouping(match: re.Match) -> str:
        labels = {label.strip() for label in match.group(2).split(",") if label.strip()}
        if match.group(1) == "by":
            refs.by_labels |= labels
        else:
            refs.other_grouping_labels |= labels
            refs.uses_without |= match.group(1) == "without"
        return " "

    text = _GROUPING.sub(grouping, text)
    text = _BRACKETS.sub(" ", text)
    for name, call in _IDENT.findall(text):
        if call:
            (refs.functions if name in FUNCTIONS else refs.unknown_functions).add(name)
        elif name not in KEYWORDS:
            refs.series.add(name)
    return refs


def scraped_labels(label_names: frozenset[str] | tuple[str, ...]) -> frozenset[str]:
    """The labels a series carries once Prometheus has scraped it."""
    return frozenset(f"exported_{n}" if n in TARGET_LABELS else n for n in label_names) | TARGET_LABELS


def exposition_names(name: str, kind: str) -> list[str]:
    """The sample names prometheus-client writes for a metric family of `kind`."""
    if kind == "counter":
        return [f"{name}_total", f"{name}_created"]
    if kind == "histogram":
        return [f"{name}_bucket", f"{name}_sum", f"{name}_count", f"{name}_created"]
    if kind == "summary":
        return [f"{name}_sum", f"{name}_count", f"{name}_created"]
    return [name]


def metric_objects(module: ModuleType) -> list[MetricWrapperBase]:
    return [value for value in vars(module).values() if isinstance(value, MetricWrapperBase)]


def exported_series(module: ModuleType) -> dict[str, frozenset[str]]:
    """Every sample name the module's metrics expose -> the label names it carries (as declared)."""
    series: dict[str, frozenset[str]] = {}
    for metric in metric_objects(module):
        # NOTE: prometheus-client has no public accessor for a metric's label names.
        labels = tuple(metric._labelnames)
        for family in metric.describe():
            for sample in exposition_names(family.name, family.type):
                extra = ("le",) if sample.endswith("_bucket") else ()
                series[sample] = frozenset(labels + extra)
    return series


def family_names(module: ModuleType) -> set[str]:
    return {family.name for metric in metric_objects(module) for family in metric.describe()}
