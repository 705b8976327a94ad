"""experiments package of dpsim (see README)."""
