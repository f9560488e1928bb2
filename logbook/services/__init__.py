"""Writes of logbook, one module per area (as selectors/ for reads); each is keyed or
version-locked so that repeating it changes nothing, and people's edits are audited."""
