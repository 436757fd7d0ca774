"""One module per API; each exposes `handle(ctx, header, request) -> response dict` and
`error_response(request, code) -> response dict` (for versions refused after decoding).
Fetch may also ask to be parked (see fetch.py)."""
