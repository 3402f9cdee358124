"""Every event type the service emits: the spec's table, plus `vip.unverified` (DESIGN: the spec names
no event for that outcome) and `webhook_endpoint.disabled` (decision 143). Endpoints subscribe to a
subset, or to all with `*`."""

from __future__ import annotations

EVENT_TYPES = (
    "connection.wallet.created",
    "connection.platform.created",
    "connection.revoked",
    "vip.generating",
    "vip.verified",
    "vip.partially_verified",
    "vip.unverified",
    "vip.failed",
    "income.change_detected",
    "fraud.flagged",
    "risk_score.generated",
    "payment_intent.created",
    "payment_intent.approval_confirmed",
    "payment_intent.expired",
    "charge.succeeded",
    "charge.failed",
    "webhook_endpoint.disabled",
)
# An endpoint whose every attempt failed for `webhooks.disable_after_days` was disabled (docs/webhooks.md).
ENDPOINT_DISABLED = "webhook_endpoint.disabled"
ALL = "*"


def normalise_event_types(requested: list[str] | None) -> list[str] | None:
    """Known types, de-duplicated in catalogue order; None (every type) for an omitted list or `*`."""
    if requested is None or ALL in requested:
        if requested is not None and len(set(requested)) > 1:
            raise ValueError("'*' subscribes to every event type and cannot be combined with others")
        return None
    if not requested:
        raise ValueError("give at least one event type, or '*' for all")
    unknown = sorted(set(requested) - set(EVENT_TYPES))
    if unknown:
        raise ValueError(f"unknown event types: {', '.join(unknown)}")
    return [t for t in EVENT_TYPES if t in requested]


def subscribed(event_types: list[str] | None, event_type: str) -> bool:
    """Whether an endpoint with this subscription (None: all) receives events of `event_type`."""
    return event_types is None or event_type in event_types
