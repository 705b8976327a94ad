"""analysis package of dpsim (see README)."""
