"""Stage operators."""
