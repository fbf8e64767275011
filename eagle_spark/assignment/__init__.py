"""EAGLE label assignment (paper Algorithm 2) and the Baseline."""
