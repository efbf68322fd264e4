"""Fixture status and churn: staleness, awkward-case coverage, groups, what changed between
two."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone

from abtest.core.groups import CaseGroups, case_groups, group_summary
from abtest.core.models import AWKWARD_TAGS
from abtest.core.fixture_set import Fixture

# the golden-set kinds and the share of a fixture each should have
GOLDEN_SHARES = {"factual": 0.40, "multi_chunk": 0.20, "out_of_scope": 0.15, "edge": 0.15,
                 "temporal": 0.10}


def fixture_groups(fx: Fixture, group_by: str | None = None) -> CaseGroups:
    """The fixture's case groups (abtest.core.groups); a `group_by` field some case lacks is a
    UserError naming the case and the field."""
    return case_groups(fx.iter_cases(), group_by, file=str(fx.path / "cases.jsonl"))


def fixture_status(fx: Fixture, *, today: datetime | None = None,
                   group_by: str | None = None) -> dict:
    """Age against the refresh schedule, coverage of the golden-set kinds, and the groups the
    cases form (`groups`: abtest.core.groups.group_summary under `group_by`)."""
    today = today or datetime.now(timezone.utc)
    age_days = (today - fx.manifest.captured()).total_seconds() / 86400
    n = len(fx.cases)
    cats: Counter[str] = Counter(c.category or "uncategorised" for c in fx.cases)
    tags = Counter(t for c in fx.cases for t in (c.tags or []))
    warnings: list[str] = []
    stale = fx.manifest.stale_at(today)
    if stale:
        warnings.append(f"stale: captured {age_days:.0f} days ago, refresh every "
                        f"{fx.manifest.refresh_every_days} days (run `abtest capture` again and "
                        f"review `abtest fixtures diff`)")
    categories: dict[str, dict[str, float | None]] = {}
    for cat, share in GOLDEN_SHARES.items():
        have = cats.get(cat, 0)
        categories[cat] = {"n": have, "share": have / n if n else 0.0, "target_share": share}
        if have == 0:
            warnings.append(f"no {cat} cases (golden-set target {share:.0%})")
    if cats.get("uncategorised"):
        categories["uncategorised"] = {"n": cats["uncategorised"], "share": cats["uncategorised"] / n,
                                       "target_share": None}
    awkward = {t: tags.get(t, 0) for t in AWKWARD_TAGS}
    for t, v in awkward.items():
        if v == 0:
            warnings.append(f"no {t} cases (awkward-case coverage)")
    n_unans = sum(1 for c in fx.cases if not c.answerable)
    if n_unans == 0:
        warnings.append("no unanswerable cases: refusal behaviour cannot be measured")
    next_refresh = fx.manifest.due()
    return {"name": fx.name, "path": str(fx.path), "n_cases": n, "answerable": n - n_unans,
            "unanswerable": n_unans, "captured_at": fx.manifest.captured_at,
            "age_days": round(age_days, 1), "refresh_every_days": fx.manifest.refresh_every_days,
            "next_refresh": next_refresh.date().isoformat(), "stale": stale,
            "corpus_version": fx.manifest.corpus_version, "retriever": fx.manifest.retriever,
            "cases_sha256": fx.cases_sha256, "categories": categories, "awkward_tags": awkward,
            "groups": group_summary(fixture_groups(fx, group_by)), "warnings": warnings}


def fixture_diff(old: Fixture, new: Fixture) -> dict:
    """Churn between two captures, so a refresh is a reviewed event."""
    a, b = old.by_id(), new.by_id()
    added = sorted(set(b) - set(a))
    removed = sorted(set(a) - set(b))
    changed = []
    for cid in sorted(set(a) & set(b)):
        ca = {c.id: c.text for c in a[cid].context}
        cb = {c.id: c.text for c in b[cid].context}
        ch_add = sorted(set(cb) - set(ca))
        ch_rem = sorted(set(ca) - set(cb))
        ch_txt = sorted(i for i in set(ca) & set(cb) if ca[i] != cb[i])
        order = [c.id for c in a[cid].context] != [c.id for c in b[cid].context]
        if ch_add or ch_rem or ch_txt or order or a[cid].question != b[cid].question:
            changed.append({"id": cid, "chunks_added": ch_add, "chunks_removed": ch_rem,
                            "text_changed": ch_txt, "order_changed": order and not (ch_add or ch_rem),
                            "question_changed": a[cid].question != b[cid].question})
    common = len(set(a) & set(b))
    return {"old": {"name": old.name, "cases_sha256": old.cases_sha256,
                    "corpus_version": old.manifest.corpus_version, "captured_at": old.manifest.captured_at},
            "new": {"name": new.name, "cases_sha256": new.cases_sha256,
                    "corpus_version": new.manifest.corpus_version, "captured_at": new.manifest.captured_at},
            "added": added, "removed": removed, "changed": changed, "n_common": common,
            "context_changed_share": (len(changed) / common) if common else 0.0}
