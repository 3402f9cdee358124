"""Payment intents and charges: pure rules (`rules`) and their state in PostgreSQL (`store`)."""
