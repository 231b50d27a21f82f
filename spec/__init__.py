"""A model of bide's ownership and settling protocol (``protocol``) and an explicit-state checker
that explores every interleaving of it up to stated bounds (``check``). See ``spec/README.md``."""
