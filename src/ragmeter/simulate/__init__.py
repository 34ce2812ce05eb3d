"""Simulated users: ``ragmeter simulate`` drives a system under test (an OpenAI-compatible chat
endpoint, an HTTP endpoint, a Python callable) from scenarios and stores the conversations as a
dataset (docs/conversations.md)."""
