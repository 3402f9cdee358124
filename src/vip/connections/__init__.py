"""A borrower's connections: wallets by Sign-In with Ethereum, income platforms by OAuth or a direct
push; their list and their revocation."""
