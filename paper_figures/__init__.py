"""paper_figures package of dpsim (see README)."""
