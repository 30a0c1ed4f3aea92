"""The rewrite rules as code: one module per kind of rule in ``catalog/overlays/rewrite.yaml``, each a
:class:`~torchdevice.rewrite.rules.base.Rule` that says what it matches, what it writes and what it reports,
and which marks it reads and leaves for the others (``reads``, ``writes``). The rules themselves (names,
replacements, parameters) are data, rendered into ``torchdevice_generated.rewrite_rules``; the golden
fixtures of a rule are beside its module's name: ``tests/rewrite/fixtures/<module>/<rule name>*``
(``Rule.kinds`` says which rules a module applies).

``RULES`` is the order the rewriter runs their hooks in on each node. Every rule that writes a mark runs
before every other rule that reads it (``tests/rewrite/test_rules.py`` holds the order to the declared marks,
and the declarations to the code): ``branches`` keeps the CUDA checks that ``calls`` must leave; ``methods``
and ``values`` mark where a device is expected, for ``values`` and ``calls`` to write it; ``arguments`` and
``values`` mark the tests they write, which ``checks`` does not report; ``calls`` marks the statements that
``guards`` puts under a guard. A later rule's ``leave_*`` gets what the earlier ones made: a launcher's count
wraps whatever the call became (``calls`` before ``launchers``), ``gates`` restores the CUDA branch of a
version gate before ``values`` may collapse the ``if`` into one assignment; otherwise the rules rewriting a
node between them never match the same node.
"""

from torchdevice.rewrite.rules.arguments import Arguments
from torchdevice.rewrite.rules.branches import Branches
from torchdevice.rewrite.rules.calls import Calls
from torchdevice.rewrite.rules.checks import Checks
from torchdevice.rewrite.rules.gates import Gates
from torchdevice.rewrite.rules.guards import Guards
from torchdevice.rewrite.rules.indices import Indices
from torchdevice.rewrite.rules.launchers import Launchers
from torchdevice.rewrite.rules.methods import Methods
from torchdevice.rewrite.rules.references import References
from torchdevice.rewrite.rules.reports import Reports
from torchdevice.rewrite.rules.values import Values

RULES = (References, Branches, Methods, Arguments, Gates, Values, Calls, Indices, Guards, Launchers, Reports, Checks)
