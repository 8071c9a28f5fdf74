"""The index artifacts as the read side opens them: the manifest and its check, embedders, units and shipped vectors."""
