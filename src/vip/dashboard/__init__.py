"""The lender dashboard, served by the API process under /dashboard: server-rendered pages for an
organisation's staff (sign-in, API keys, webhooks, the audit log; borrowers and networks). See
docs/dashboard.md."""
