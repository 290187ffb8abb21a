"""Reusable test support: real servers the tests start on loopback (see ``openai_server``)."""
