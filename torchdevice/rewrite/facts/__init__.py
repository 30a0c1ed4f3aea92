"""What the rewriter knows about a module before rewriting it, computed once per module from its ``ast``
outline: ``names`` (what an imported name stands for), ``module`` (torch's name, availability guards, the
program's own device, rule groups, launchers)."""
