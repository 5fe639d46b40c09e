"""litjudge engine: requests, planner, backends, store, runner and CLI.

Importing this package never imports vLLM or torch; backends load them when chosen.
"""
