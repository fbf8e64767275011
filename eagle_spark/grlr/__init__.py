"""GRLR label embeddings (paper Algorithm 1): numpy kernels, executor cache, the Spark job."""
