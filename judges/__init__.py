"""Protocols of the seed papers: items -> prompts -> verdicts -> aggregates -> agreement with humans."""
from litjudge.engine.core.registry import Registry

PROTOCOLS: Registry = Registry("protocol")
PROTOCOLS.add("ttcw", "litjudge.judges.ttcw:TTCW")
PROTOCOLS.add("reference_likert", "litjudge.judges.reference_likert:ReferenceLikert")
PROTOCOLS.add("listwise", "litjudge.judges.listwise:ListwiseRanking")
PROTOCOLS.add("pairwise", "litjudge.judges.pairwise:Pairwise")
PROTOCOLS.add("classification", "litjudge.judges.classification:Classification")
PROTOCOLS.add("rubric", "litjudge.judges.rubric:Rubric")
