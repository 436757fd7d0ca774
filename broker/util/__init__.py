"""Small helpers every part of the product shares (broker, registry, load, DAGs).

See README.md beside this file: one home for the wall clock and time units
(`clock`) and for durable file writes (`files`), so no module keeps its own copy.
"""
