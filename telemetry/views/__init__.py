"""Dashboard pages of telemetry, one module per area."""
