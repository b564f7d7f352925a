// HTTP1: filled in by its issue.
