"""Read, write, seal and verify fixture sets.

A fixture is the foundation of every claim, so it is written atomically (temp folder +
rename), sealed with sha256 per case and in total, and re-verified before every run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from abtest.errors import UserError, pydantic_error_line
from abtest.core.records import json_object, text_lines
from abtest.core.models import Case, CaseHash, FixtureManifest
from pydantic import ValidationError


def canonical_json(obj) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    return sha256_bytes(text.encode("utf-8"))


def case_line(case: Case) -> str:
    return canonical_json(case.model_dump(mode="json", exclude_none=True))


class Fixture:
    """A loaded, verified fixture set.

    A verified fixture keeps only its case ids: `iter_cases()` streams cases.jsonl again and
    checks every line against its sealed sha256 as it goes, so a run over 100,000 cases holds
    no case it is not working on, and a file edited after loading is refused, not used.
    `cases` parses everything (small fixtures, reports).
    """

    def __init__(self, path: Path, manifest: FixtureManifest, cases: list[Case] | None = None,
                 *, ids: list[str] | None = None):
        self.path = path
        self._cases = list(cases) if cases is not None else None
        self._ids = [c.id for c in self._cases] if self._cases is not None else list(ids or [])
        self._sealed = b""
        if self._cases is None:
            # the per-line seals as 32-byte digests back to back: 3 MB at 100,000 cases, where
            # the manifest's objects take ~50 MB (the held manifest then has no case list)
            self._sealed = b"".join(bytes.fromhex(h.sha256) for h in manifest.cases)
            manifest = manifest.model_copy(update={"cases": []})
        self.manifest = manifest

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def cases_sha256(self) -> str:
        return self.manifest.cases_sha256

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def cases(self) -> list[Case]:
        if self._cases is None:
            self._cases = list(self.iter_cases())
        return self._cases

    def iter_cases(self, want: set[str] | None = None) -> Iterable[Case]:
        if self._cases is not None:
            yield from (c for c in self._cases if want is None or c.id in want)
            return
        cpath = self.path / "cases.jsonl"
        i = 0
        for n, line in text_lines(cpath):
            if not line.strip():
                continue
            if i >= len(self._ids) or hashlib.sha256(line.encode("utf-8")).digest() != \
                    self._sealed[32 * i:32 * i + 32]:
                raise UserError("cases.jsonl changed while in use (its sealed sha256 no longer "
                                "matches); start again", file=str(cpath), where=f"line {n}")
            if want is None or self._ids[i] in want:
                yield Case.model_validate_json(line)
            i += 1

    def ids(self) -> list[str]:
        return list(self._ids)

    def by_id(self, ids: Iterable[str] | None = None) -> dict[str, Case]:
        """All cases by id, or only those named (without parsing the rest)."""
        if ids is None:
            return {c.id: c for c in self.cases}
        return {c.id: c for c in self.iter_cases(set(ids))}


def iter_parsed_cases(path: Path) -> Iterable[Case]:
    """Validated cases one at a time; duplicate ids refused."""
    for _, _, case in _case_lines(path):
        yield case


def _case_lines(path: Path) -> Iterable[tuple[int, str, Case]]:
    """(line number, line, case), duplicate ids refused.

    Each line goes straight to pydantic's JSON parser (faster than json.loads and then
    validating the dict); a line it refuses is re-read the slow way for the one-line error."""

    seen: dict[str, int] = {}
    for n, line in text_lines(path):
        if not line.strip():
            continue
        try:
            case = Case.model_validate_json(line)
        except ValidationError:
            case = _case_from_line(path, n, line)
        if case.id in seen:
            raise UserError(f"duplicate case id {case.id!r} (first on line {seen[case.id]})",
                            file=str(path), where=f"line {n}", field="id")
        seen[case.id] = n
        yield n, line, case


def _case_from_line(path: Path, n: int, line: str) -> Case:
    """json.loads then validate: the same checks, with errors named by line, case and field."""

    obj = json_object(path, n, line)
    where = f"line {n}" + (f" (case {obj['id']})" if isinstance(obj.get("id"), str) else "")
    try:
        return Case.model_validate(obj)
    except ValidationError as exc:
        raise pydantic_error_line(exc, file=str(path), where=where) from None


def parse_cases(path: Path) -> list[Case]:
    return list(iter_parsed_cases(path))


def load_fixture(path: str | os.PathLike, *, verify: bool = True) -> Fixture:
    path = Path(path)
    if not path.is_dir():
        raise UserError("fixture folder not found", file=str(path))
    mpath = path / "manifest.json"
    cpath = path / "cases.jsonl"
    if not cpath.exists():
        raise UserError("cases.jsonl missing in fixture folder", file=str(path))
    if not mpath.exists():
        raise UserError("manifest.json missing: seal the fixture with `abtest fixtures seal`",
                        file=str(path))
    manifest = read_manifest(mpath)
    if not verify:  # reports and review: every case is wanted, as objects
        cases = parse_cases(cpath)
        return Fixture(path, manifest, cases)
    expected = {h.id: h.sha256 for h in manifest.cases}
    ids: list[str] = []
    for _, raw, case in _case_lines(cpath):
        want = expected.get(case.id)
        if want is None:
            raise UserError("case not in the manifest (added after sealing)", file=str(cpath),
                            where=f"case {case.id}")
        # a sealed line is canonical JSON, so its own bytes hash to the seal; only a line that
        # does not is re-serialised, to tell an edit from a reformat (refused below)
        if sha256_text(raw) != want and sha256_text(case_line(case)) != want:
            raise UserError("case content does not match its sealed sha256 (tampered or "
                            "edited; re-capture or re-seal deliberately)", file=str(cpath),
                            where=f"case {case.id}")
        ids.append(case.id)
    _verify_totals(cpath, manifest, len(ids), set(expected) - set(ids))
    if [h.id for h in manifest.cases] != ids:  # streaming relies on the manifest's order
        raise UserError("cases.jsonl is not in the manifest's order (reordered after sealing)",
                        file=str(cpath))
    return Fixture(path, manifest, ids=ids)  # every seal matched a digest above: valid hex


def _verify_totals(cpath: Path, manifest: FixtureManifest, n: int, missing: set[str]) -> None:
    if missing:
        raise UserError(f"case(s) removed after sealing: {', '.join(sorted(missing))}", file=str(cpath))
    if n != manifest.n_cases:
        raise UserError(f"n_cases is {manifest.n_cases} but cases.jsonl has {n}",
                        file=str(cpath.parent / "manifest.json"), field="n_cases")
    h = hashlib.sha256()
    with open(cpath, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    if h.hexdigest() != manifest.cases_sha256:
        raise UserError("cases.jsonl bytes do not match cases_sha256 (reformatted or reordered after "
                        "sealing)", file=str(cpath))


def read_manifest(mpath: Path, *, cases: bool = True) -> FixtureManifest:
    """The manifest, validated; cases=False skips its per-case seals (10,000 objects) for
    readers that only want its dates and names."""

    try:
        data = json.loads(mpath.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"invalid JSON ({exc})", file=str(mpath)) from None
    if not cases and isinstance(data, dict) and isinstance(data.get("cases"), list):
        data["cases"] = []
    try:
        manifest = FixtureManifest.model_validate(data)
    except ValidationError as exc:
        raise pydantic_error_line(exc, file=str(mpath)) from None
    _check_manifest_seal(manifest, mpath)
    return manifest


def manifest_digest(manifest: FixtureManifest) -> str:
    """The seal over the manifest's own fields (name, corpus_version, retriever, captured_at,
    refresh_every_days, n_cases, cases_sha256, notes): the report reads them, so an edit to
    any of them is a tamper like an edit to a chunk."""
    fields = manifest.model_dump(mode="json", exclude={"cases", "manifest_sha256"},
                                 exclude_none=True)
    return sha256_text(canonical_json(fields))


def _check_manifest_seal(manifest: FixtureManifest, mpath: Path) -> None:
    if manifest.schema_version < 2:
        raise UserError("sealed by an older abtest, without a seal over the manifest's own "
                        "fields; check corpus_version, retriever and captured_at, then re-seal "
                        f"deliberately: abtest fixtures seal {mpath.parent}", file=str(mpath),
                        field="schema_version")
    if manifest.manifest_sha256 != manifest_digest(manifest):
        raise UserError("manifest fields changed after sealing (name, corpus_version, retriever, "
                        "captured_at, refresh_every_days, n_cases, cases_sha256 or notes no "
                        "longer match manifest_sha256); re-capture or re-seal deliberately",
                        file=str(mpath), field="manifest_sha256")


def now_utc() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def write_fixture(out: str | os.PathLike, cases: list[Case], *, name: str | None = None,
                  corpus_version: str, retriever: str, refresh_every_days: int = 30,
                  force: bool = False, notes: dict | None = None,
                  captured_at: str | None = None) -> Fixture:
    """Write cases.jsonl + manifest.json into a temp folder, then rename into place."""
    out = Path(out)
    if out.exists() and not force:
        raise UserError("fixture already exists; pass {force} to replace it deliberately", file=str(out),
                        opts={"force": True})
    ids = [c.id for c in cases]
    if len(ids) != len(set(ids)):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise UserError(f"duplicate case id {dup!r}", file=str(out))
    cases = sorted(cases, key=lambda c: c.id)
    lines = [case_line(c) for c in cases]
    body = ("\n".join(lines) + "\n").encode("utf-8") if lines else b""
    manifest = FixtureManifest(
        name=name or out.name, corpus_version=corpus_version, retriever=retriever,
        captured_at=captured_at or now_utc(), refresh_every_days=refresh_every_days,
        n_cases=len(cases), cases_sha256=sha256_bytes(body),
        cases=[CaseHash(id=c.id, sha256=sha256_text(line)) for c, line in zip(cases, lines)],
        notes=notes)
    manifest.manifest_sha256 = manifest_digest(manifest)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        (tmp / "cases.jsonl").write_bytes(body)
        (tmp / "manifest.json").write_text(
            json.dumps(manifest.model_dump(mode="json", exclude_none=True), indent=2) + "\n",
            encoding="utf-8")
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Fixture(out, manifest, cases)


def seal_fixture(path: str | os.PathLike, *, name: str | None = None,
                 refresh_every_days: int | None = None) -> Fixture:
    """Seal a hand-written cases.jsonl (canonicalises it and writes manifest.json)."""
    path = Path(path)
    cases = parse_cases(path / "cases.jsonl")
    if not cases:
        raise UserError("no cases to seal", file=str(path / "cases.jsonl"))
    cv = sorted({c.corpus_version for c in cases})
    rv = sorted({c.retriever for c in cases})
    prev = _previous_seal(path)
    if refresh_every_days is None:
        refresh_every_days = prev.get("refresh_every_days", 30)
    return write_fixture(path, cases, name=name or path.name, corpus_version=",".join(cv),
                         retriever=",".join(rv), refresh_every_days=refresh_every_days, force=True,
                         captured_at=prev.get("captured_at"))


def _previous_seal(path: Path) -> dict:
    """Re-sealing cases whose bytes the old manifest still seals (an upgrade from an older
    seal) keeps their capture time and schedule; edited cases were not captured then."""
    try:
        old = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
        body = (path / "cases.jsonl").read_bytes()
    except (OSError, ValueError):
        return {}
    if not isinstance(old, dict) or old.get("cases_sha256") != sha256_bytes(body):
        return {}
    keep = {}
    if isinstance(old.get("captured_at"), str):
        keep["captured_at"] = old["captured_at"]
    days = old.get("refresh_every_days")
    if isinstance(days, int) and not isinstance(days, bool) and days > 0:
        keep["refresh_every_days"] = days
    return keep
