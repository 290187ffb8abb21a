"""A module that fails while being imported, for the load-error tests."""

raise RuntimeError("this module cannot be imported\nsecond line")
