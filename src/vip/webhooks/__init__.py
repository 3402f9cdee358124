"""Webhooks: endpoints, signed deliveries of outbox events with the spec's retry schedule, replay.

Pure rules (`catalogue`, `schedule`, `signing`, `urls`) have no I/O; `store` holds the endpoints and
`events` the event queries; `service` is what the API does. Delivery: `fanout` (outbox events into
deliveries), `claims` (due deliveries leased), `sender` (the signed POST), `outcomes` (the result on
the schedule), `listener` (the wake-up on commit), `worker` (the daemon's loop over them).
"""
