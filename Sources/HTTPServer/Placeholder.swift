// HTTPServer: filled in by its issue.
