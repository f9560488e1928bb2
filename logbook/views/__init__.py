"""Dashboard pages of logbook, one module per area."""
