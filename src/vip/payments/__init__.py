"""Payment intents and charges: pure rules (`rules`), their state in PostgreSQL (`store`), their JSON
(`shapes`), the API's operations (`service`, which owns exactly once), the charge executor (`charges`,
`disburser`) and the daemon's jobs (`worker`)."""
