"""Around the passes: when they run and who runs them.

The daemon and its pacing, the Lease, metrics and systemd notification, and
`sync --wait`. Nothing here imports the engine: the CLI hands it a pass."""
