"""The daemon's runtime: per-target state, one reconcile pass, the scheduler."""
