// MemcachedClient: filled in by its issue.
