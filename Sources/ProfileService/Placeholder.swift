// ProfileService: filled in by its issue.
