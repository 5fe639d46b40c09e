"""Protocols of the seed papers: items -> prompts -> verdicts -> aggregates -> agreement with humans.

Another distribution adds a protocol by declaring its class under the entry-point group
`litjudge.protocols` (`name = "module:Class"`, a subclass of `litjudge.judges.base.Protocol`); it
is then usable by name in `litjudge run` and `litjudge.judge`, imported only when used or listed."""
from litjudge.engine.core.registry import Registry

PROTOCOLS: Registry = Registry("protocol", base="litjudge.judges.base:Protocol", group="litjudge.protocols")
PROTOCOLS.add("ttcw", "litjudge.judges.ttcw:TTCW")
PROTOCOLS.add("reference_likert", "litjudge.judges.reference_likert:ReferenceLikert")
PROTOCOLS.add("listwise", "litjudge.judges.listwise:ListwiseRanking")
PROTOCOLS.add("pairwise", "litjudge.judges.pairwise:Pairwise")
PROTOCOLS.add("classification", "litjudge.judges.classification:Classification")
PROTOCOLS.add("rubric", "litjudge.judges.rubric:Rubric")
