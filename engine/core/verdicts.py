"""The verdict frame: one run id's plan entries joined with their stored results, the request
metadata as columns, and every stored value decoded once, here: what aggregation, sweeps, budgets
and the generation stage read. Protocols never parse JSON: `value` arrives typed (an int for a
binary or Likert verdict, text for a preference or a category, a list of [id, score] pairs for a
ranking, a list of uses), and `distribution` (and `analysis_distribution`, analyze mode's) as a
struct of label probabilities (`probability` reads one label's, null where the verdict had none)."""
from __future__ import annotations

import polars as pl

from .config import MissingPolicy
from .store import PLAN_RESULT_COLUMNS, Store


def verdict_frame(store: Store, run_id: str, judge: str) -> pl.DataFrame:
    """Plan entries of one run joined with their results: one row per (item, order, repeat...),
    the request metadata as columns. Built column-wise from the store (a million rows fit)."""
    cols = list(PLAN_RESULT_COLUMNS)
    schema = {c: (pl.Float64 if c == "label_mass" else pl.Int64 if c == "cut" else pl.Utf8) for c in cols}
    parts = [pl.DataFrame(rows, schema=schema, orient="row") for rows in store.plan_results(run_id)]
    frame = pl.concat(parts) if parts else pl.DataFrame(schema=schema)
    if not frame.height:
        return frame.drop("meta").with_columns(pl.lit(judge).alias("judge"))
    meta = frame["meta"].str.json_decode(infer_schema_length=None).struct.unnest()
    frame = pl.concat([meta.drop([c for c in meta.columns if c in cols]), frame.drop("meta")], how="horizontal")
    value = frame["value"].replace("null", None)
    return frame.with_columns(
        pl.lit(judge).alias("judge"),
        pl.col("status").fill_null("missing"),
        pl.when(pl.col("reason").is_null() & pl.col("status").is_null()).then(pl.lit("not generated"))
        .otherwise(pl.col("reason")).alias("reason"),
        value.str.json_decode(infer_schema_length=None).alias("value"),
        *(frame[c].str.json_decode(infer_schema_length=None).alias(c) for c in ("distribution", "analysis_distribution")))


def probability(frame: pl.DataFrame, label: str, column: str = "distribution") -> pl.Expr:
    """P(label) of each verdict read in distribution mode (null where there is none); of `column`
    "analysis_distribution": read after an analysis (analyze mode)."""
    dtype = frame.schema.get(column)
    if isinstance(dtype, pl.Struct) and label in [f.name for f in dtype.fields]:
        return pl.col(column).struct.field(label).cast(pl.Float64)
    return pl.lit(None, dtype=pl.Float64)


def judged_probability(frame: pl.DataFrame, label: str) -> pl.Expr:
    """P(label) as the judge gave it, whichever mode read it: distribution mode's, else the one read
    after an analysis; null where neither is stored (a label-mode verdict, an API judge's analysis).
    What the annotation queue draws by; the tables read distribution mode's alone."""
    return pl.coalesce(probability(frame, label), probability(frame, label, "analysis_distribution"))


def has_probabilities(frame: pl.DataFrame) -> str | None:
    """Which kind of stored probability the verdicts hold: "distribution", "analysis" (read after an
    analysis), or None."""
    for column, kind in (("distribution", "distribution"), ("analysis_distribution", "analysis")):
        if isinstance(frame.schema.get(column), pl.Struct) and frame[column].is_not_null().any():
            return kind
    return None


def not_a_probability(frame: pl.DataFrame) -> str | None:
    """The first stored P(label) that is none (NaN, or outside [0, 1]), named with its row: a
    damaged or hand-edited verdicts file. The queue drew by it silently: a NaN left every estimate
    empty, said as "every labelled draw gives the same weighted value" (a hostile pass)."""
    for column in ("distribution", "analysis_distribution"):
        dtype = frame.schema.get(column)
        for field in dtype.fields if isinstance(dtype, pl.Struct) else ():
            p = frame[column].struct.field(field.name).cast(pl.Float64)
            rows = (p.is_nan() | (p < -1e-9) | (p > 1 + 1e-9)).fill_null(False).arg_true()
            if len(rows):
                return f"{column}.{field.name} is {p[int(rows[0])]} in row {int(rows[0])}: not a probability"
    return None


UNPARSED_WARN = 0.1          # the share of a judge's answers left unread that is worth a line of its own


def answered_and_unread(verdicts: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The verdicts the judge answered (read or not: a failed or skipped request is neither), and
    those of them that could not be read as a verdict: what `unread` shares and warnings count."""
    answered = verdicts.filter(pl.col("status").is_in(["ok", "unparsed"]))
    return answered, answered.filter(pl.col("status") == "unparsed")


def cut_analysis_warnings(verdicts: pl.DataFrame) -> list[str]:
    """A line per judge some of whose verdicts followed an analysis cut at analysis_tokens: read as
    verdicts (the label forced after the marker), and counted, but not of a finished analysis (a
    hostile pass: 7 of 8 at 64 tokens were stored as finished, nothing said)."""
    if not {"judge", "status", "cut", "analysis"} <= set(verdicts.columns):
        return []
    out = []
    for (judge,), v in verdicts.group_by(["judge"], maintain_order=True):
        read = v.filter(pl.col("status") == "ok")
        cut = read.filter((pl.col("cut") == 1) & pl.col("analysis").is_not_null()).height
        if cut:
            out.append(f"{judge}: {cut} of its {read.height} verdicts followed an analysis cut at analysis_tokens "
                       "(the verdict read after the marker all the same): raise analysis_tokens for finished analyses")
    return out


def unparsed_warnings(verdicts: pl.DataFrame, missing: MissingPolicy = MissingPolicy()) -> list[str]:
    """A line per judge (and question) whose answers often could not be read as a verdict, with what it said most
    and what the agreement tables did with them under the run's missing-answer policy: a judge
    answering "Tie" where ties are off is seen, not only a smaller n. Where none could be read (its
    own error: no result), the line says what it said most or why it had no answer (a recording
    keyed by other ids than the data's), which the error alone left to verdicts.parquet."""
    if not {"judge", "status", "raw"} <= set(verdicts.columns):
        return []
    done = {"drop": "the agreement tables leave them out",
            "label": f'the agreement tables count each as {missing.label!r} (missing = "label:{missing.label}")',
            "wrong": 'the agreement tables count each as wrong (missing = "wrong")'}[missing.kind]
    out = []
    # per question where a run asks several (a rubric): one question losing a third of its answers
    # was under the share pooled over four questions, and unsaid (a hostile pass)
    several = "question" in verdicts.columns and verdicts["question"].n_unique() > 1
    for key, v in verdicts.group_by(["judge", "question"] if several else ["judge"], maintain_order=True):
        judge = f"{key[0]} (question {key[1]!r})" if several else key[0]
        answered, bad = answered_and_unread(v)
        if 0 < bad.height and bad.height >= UNPARSED_WARN * answered.height:
            # what it said, or, for no answer at all, why (a backend's failure: "the recording has no response ...")
            # as said, padding and all: "Yes " is unread where "Yes" is a label, and shown stripped it read as one
            said = pl.col("raw").cast(pl.Utf8).fill_null("").str.slice(0, 40)
            why = pl.col("reason").cast(pl.Utf8) if "reason" in bad.columns else pl.lit(None, pl.Utf8)
            blank = said.str.strip_chars() == ""
            text, failure, n = bad.group_by(said.alias("said"), pl.when(blank).then(why).alias("why"),
                                           maintain_order=True).len() \
                .sort("len", descending=True, maintain_order=True).row(0)
            top = f"no answer: {' '.join(failure.split())[:80]}" if failure else repr(text)
            if bad.height == answered.height:
                first = f" (the first: item {bad['item_id'][0]!r})" if "item_id" in bad.columns else ""
                out.append(f"{judge}: none of its {answered.height} answers could be read as a verdict, most often "
                           f"{top} ({n}){first}")
                continue
            out.append(f"{judge}: {bad.height} of {answered.height} answers ({bad.height / answered.height:.0%}) could "
                       f"not be read as a verdict, most often {top} ({n}); {done} (the report's item viewer shows "
                       "each)")
    return out
