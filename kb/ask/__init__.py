"""The question and its ranking: parse the question once, retrieve, rank, and assemble the Answer (Engine)."""
