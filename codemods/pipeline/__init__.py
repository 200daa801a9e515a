"""The run: configuration, file selection, discovery, the byte prefilter,
the engine for one file and the runner for many, the result cache, atomic
writes and the replay of an unchanged report."""
