"""Pure verification logic (classification, fraud rules, payroll matching, VIP figures, risk pillars).

No I/O lives here: plain functions over plain values, called by the API and the daemon.
"""
