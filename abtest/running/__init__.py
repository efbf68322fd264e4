"""Running variants A and B over a fixture: planning, per-case work, batches, shards and sequential runs."""
