"""Workflows that join several stages: the curation recipe with the real judge and scorer, and the
offline demo. The one layer above every stage of the flow; only the CLI imports it."""
