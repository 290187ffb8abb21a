"""Calling models: the client side of chat completions and how many run at once."""
