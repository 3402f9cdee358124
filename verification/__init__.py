"""The verification core: classification and fraud rules, payroll matching, the VIP figures and the four
risk pillars. Pure functions over plain values (no database, no chain, no clock: `now` is passed in);
the daemon's VIP job and the API call it. Thresholds come from `vip.config.VerificationConfig`; every rule
is explained with a worked example in docs/verification.md."""
