"""fix-recompiles' engine: the analysis (``analysis/``), the rules
(``transforms/``), the run (``pipeline/``), the trace (``trace/``) and the
modes (``modes/``); see README, "Architecture"."""
