"""The rewrite rules as code: one module per kind of rule in ``catalog/overlays/rewrite.yaml``, each a
:class:`~torchdevice.rewrite.rules.base.Rule` that reads alone (what it matches, what it writes, what it
reports). The rules themselves (names, replacements, parameters) are data, rendered into
``torchdevice_generated.rewrite_rules``; the golden fixtures of a rule are beside its module's name:
``tests/rewrite/fixtures/<module>/<rule name>*`` (``Rule.kinds`` says which rules a module applies).

``RULES`` is the order the rewriter runs their hooks in on each node: a later rule's ``leave_*`` gets what
the earlier ones made (a launcher's count wraps whatever the call became); the rules rewriting a node
between them never match the same node.
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

RULES = (References, Calls, Methods, Arguments, Gates, Values, Indices, Guards, Launchers, Branches, Reports, Checks)
