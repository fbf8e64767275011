"""XMC evaluation metrics (P@k, nDCG@k, PSP@k)."""
