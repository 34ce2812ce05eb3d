"""One module per schema revision, oldest first (``0001_baseline`` is the schema before versioning)."""
