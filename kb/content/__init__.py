"""The curated entries: their schema and loader, `kb check`, coverage statistics."""
