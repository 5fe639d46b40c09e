"""Protocols of the seed papers: items -> prompts -> verdicts -> aggregates -> agreement with humans.

Another distribution adds a protocol by declaring its class under the entry-point group
`litjudge.protocols` (`name = "module:Class"`, a subclass of `litjudge.judges.base.Protocol`); it
is then usable by name in `litjudge run` and `litjudge.judge`, imported only when used or listed."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from litjudge.engine.core.registry import Registry

if TYPE_CHECKING:                      # the base class imports this registry: named here for the checker only
    from litjudge.judges.base import Protocol

PROTOCOLS: Registry[type[Protocol]] = Registry("protocol", base="litjudge.judges.base:Protocol", group="litjudge.protocols")

# The report panels litjudge's protocols draw (a Declaration's `report` names one), each registered
# under its own "module:function": a protocol is checked against this list where it is declared,
# and the function (and matplotlib) is imported only when a report is drawn. A plugin's protocol
# gives its panels function itself (`report=my_panels`).
PANELS: Registry[Callable[..., Any]] = Registry("report panels")
for _panels in ("litjudge.engine.app.report.panels:ttcw_panels", "litjudge.engine.app.report.panels:pairwise_panels",
                "litjudge.engine.app.report.panels:listwise_panels",
                "litjudge.engine.app.report.panels:classification_panels",
                "litjudge.engine.app.report.panels:reference_likert_panels",
                "litjudge.engine.app.report.rubric_panels:rubric_panels"):
    PANELS.add(_panels, _panels)
del _panels

PROTOCOLS.add("ttcw", "litjudge.judges.ttcw:TTCW")
PROTOCOLS.add("reference_likert", "litjudge.judges.reference_likert:ReferenceLikert")
PROTOCOLS.add("listwise", "litjudge.judges.listwise:ListwiseRanking")
PROTOCOLS.add("pairwise", "litjudge.judges.pairwise:Pairwise")
PROTOCOLS.add("classification", "litjudge.judges.classification:Classification")
PROTOCOLS.add("rubric", "litjudge.judges.rubric:Rubric")
