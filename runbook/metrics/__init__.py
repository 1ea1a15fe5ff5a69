"""The domain's Prometheus metrics, read from the database, and the endpoint that serves them."""
