"""The one model-call seam: every chat completion the SDK asks of a model goes through here.

``complete`` (routing decided once, the call, the reply parsed the same from every route),
``litellm`` (named providers through LiteLLM), ``errors`` (one classification of failures).
Import the modules themselves; this package imports nothing, so it stays cheap to import.
"""
