"""Code the tests share that is neither a test nor a fixture: test modules hold tests,
conftest.py files hold fixtures, and everything a test imports from another file lives
here. The servers the tests run as processes come from `broker.processes`."""
