"""Webhooks: endpoints, signed deliveries of outbox events with the spec's retry schedule, replay.

Pure rules (schedule, signing, URL checks) have no I/O; `store` holds the queries; `worker` is the
daemon's delivery task.
"""
