"""Example agents, written to be copied. `python -m runtime demo` runs `payments`."""
