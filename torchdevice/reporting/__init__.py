"""What the runtime did: :mod:`.counts` (redirections, fallbacks and stand-ins per op and route, logging once),
:mod:`.program` (one report for every process of a program, and its summary) and :mod:`.page` (that report as
a self-contained HTML page)."""
