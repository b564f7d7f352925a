// PostgresClient: filled in by its issue.
