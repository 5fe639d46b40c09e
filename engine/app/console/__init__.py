"""The console room: argument parsing (`cli`) and the commands that print what the library computes.
Nothing here computes a result: `run` goes through `engine/app/execute.py`, as `litjudge.run` does."""
