"""What the runtime did: :mod:`.counts` (redirections, fallbacks and stand-ins per op and route, logging once) and
:mod:`.program` (one JSON report for every process of a program, and its summary)."""
