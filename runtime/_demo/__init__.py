"""What ``python -m runtime demo`` drives, shipped in the package so the demo runs from an
installed bide. ``examples/payments.py`` presents the same agent to readers of the repository."""
