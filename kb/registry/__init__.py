"""Names and versions: the parameter registry, release views and spellings, the user's versions, the fact-check."""
