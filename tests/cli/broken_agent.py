"""An agent module that fails on import (for the spec error tests)."""

raise RuntimeError("this module is broken on purpose")
