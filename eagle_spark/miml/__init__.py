"""The MIML extension of EAGLE (paper section 5, Figure 2; Table 3): Deep-MIML (Feng & Zhou 2017)
and its co-attention variant whose mask comes from GRLR label embeddings, on bags of MNIST digits.

* :mod:`eagle_spark.miml.data`: IDX reading, bags (numpy), centring;
* :mod:`eagle_spark.miml.bags`: the images as a dataset and bags by the ``aggregate`` job
  (Spark); the label embeddings by the ``embed`` job are :func:`eagle_spark.ml.miml.label_embeddings`
  (the API's GRLR);
* :mod:`eagle_spark.miml.network`: the networks (PyTorch);
* :mod:`eagle_spark.miml.training`: training in the driver or through TorchDistributor;
* the Table 3 run (``eagle-spark miml``) is :mod:`eagle_spark.experiments.miml`, beside the
  other experiments.

The network and training modules need PyTorch (the ``miml`` extra); the others do not.
"""
