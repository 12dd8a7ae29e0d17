"""Logs, the daemon's own metrics, health and status endpoints, and systemd notification."""
