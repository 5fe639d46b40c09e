"""Protocols of the seed papers: items -> prompts -> verdicts -> aggregates -> agreement with humans."""
from engine.core.registry import Registry

PROTOCOLS: Registry = Registry("protocol")
PROTOCOLS.add("ttcw", "judges.ttcw:TTCW")
PROTOCOLS.add("reference_likert", "judges.reference_likert:ReferenceLikert")
PROTOCOLS.add("listwise", "judges.listwise:ListwiseRanking")
PROTOCOLS.add("pairwise", "judges.pairwise:Pairwise")
PROTOCOLS.add("classification", "judges.classification:Classification")
