"""The trace side: read a ``TORCH_TRACE`` folder into causes, match it to
findings, narrow the plan to them, make the fixes its evidence supports,
run a command under it."""
