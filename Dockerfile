# One image for every role of docker-compose.yml (Spark master, workers, submit): the project and its
# pinned pyspark installed into the same Python, so driver and workers run identical versions.
# Spark's roles start through pyspark's own bin/spark-class (the pip package has no sbin/ scripts).
FROM python:3.11-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY eagle_spark ./eagle_spark
COPY jobs ./jobs
COPY conf ./conf
RUN pip install --no-cache-dir .
ENV SPARK_HOME=/usr/local/lib/python3.11/site-packages/pyspark \
    PYSPARK_PYTHON=python3 \
    PYSPARK_DRIVER_PYTHON=python3
ENV PATH="${SPARK_HOME}/bin:${PATH}"
