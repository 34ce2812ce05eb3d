"""Simulated users: ``ragmeter simulate`` drives a system under test (an OpenAI-compatible chat
endpoint, an HTTP endpoint, a Python callable) from scenarios and stores the conversations as a
dataset (docs/conversations.md).

:mod:`.scenarios` (who the simulated user is and what they want), :mod:`.targets` (the system under
test), :mod:`.dialogue` (the conversations, a turn at a time, and storing them as a dataset)."""
