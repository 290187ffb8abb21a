"""The model-call seam: every chat completion the SDK asks of a model goes through here, and
how many run at once.

``complete`` (routing decided once, the call, the reply parsed the same from every route),
``litellm`` (named providers through LiteLLM), ``openai_compat`` (base URLs over the SDK's own
HTTP pool), ``errors`` (one classification of failures), ``concurrency`` (the adaptive limit).
Import the modules themselves; this package imports nothing, so it stays cheap to import.

There is one of it: ``tests/test_one_of_each.py::test_one_model_call_seam``.
"""
