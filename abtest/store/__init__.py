"""The results store: the only SQL over abtest's results (runs, answers, judgments, labels).

`results` is the API, `migrations` the schema, `writer` the one writing thread.
"""

from abtest.store.results import Store, read_export

__all__ = ["Store", "read_export"]
