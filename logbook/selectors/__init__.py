"""Reads of logbook, one module per area, each scoped to what the user may see."""
