"""Record batches (message format v2): header parsing, validation, building, compression."""
