"""Facts and utilities every stage uses: the data models, config, records, names, formatting, progress, fixture sets, groups, and the one Jinja environment."""
