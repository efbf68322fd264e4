"""The variants under test: their files, rendered messages and snapshots."""
