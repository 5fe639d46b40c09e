"""`python -m litjudge ...`: the console, the same as the `litjudge` command."""
import sys

from litjudge.engine.app.console.cli import main

if __name__ == "__main__":
    sys.exit(main())
