"""The Verified Income Profile and the risk score: asked for by the API, made by the daemon's job from
the pure rules of vip.verification."""
