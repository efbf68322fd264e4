"""`abtest view`: a local browser over the results store.

People decide by reading cases, so the view puts two answers side by side on the same
frozen context, with each claim tied to the chunk it was checked against. It serves on
loopback, reads the store read-only per request and fetches nothing from the network:
its templates, CSS and JS ship in this package.
"""
