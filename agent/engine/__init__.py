"""The turn engine: one user question in, a stream of typed events out (see `engine.loop`)."""
