"""The thin CLI layer: one module per command, each with a `register(app)` function."""
