// TestSupport: filled in by its issue.
