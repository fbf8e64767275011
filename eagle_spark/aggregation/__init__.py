"""Aggregated-label data: groups (Y1) and group labels (Y2), built or supplied by the user."""
