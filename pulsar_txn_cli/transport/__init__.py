"""The wire to a real cluster: HTTP through libcurl (http_pool.py), redirects, retries, TLS and OAuth2
(http_client.py, oauth2.py), an error answer as one sentence (http_errors.py), and secrets kept out of
everything (redact.py). PulsarAdmin (admin/) and the target's resolution (target/) are its callers."""
