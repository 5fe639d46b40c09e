"""The kernel: typed configs, requests and the one content key, planner, runner, store, verdict cache,
registries. It imports nothing above itself (tests/test_architecture.py)."""
