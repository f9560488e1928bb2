"""Explanations: why a run lost GPU-hours (slowdowns), and the evidence model auto-triage
shares."""
