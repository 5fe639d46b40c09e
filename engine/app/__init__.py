"""The application: what a config means and runs (run, execute, sweeps, ensembles, generation,
budgets, reparse, bench), with its report/ and console/ rooms above it."""
