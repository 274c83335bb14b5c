"""meshcomm-diagnose: which rank is stuck, where, and since when.

Usage::

    meshcomm-diagnose DIR            # or: python3 -m meshcomm.diagnose DIR

Reads the flight recorder dumps of a job (``DIR/rank_<R>.jsonl``, written
on a failed operation, on SIGUSR1, or by ``dump_flight_recorder``; see
docs/errors.md, "Diagnosing a hang") and prints, per group, the last
operation each rank entered and finished, the ranks that are behind or
absent and what the others wait in (and for how long), operations whose
signatures differ between ranks at the same sequence number, failed
operations, and the ranks that left no dump at all.

Exit status: 0 when nothing is wrong, 1 when it finds a hang, a mismatch,
a failure or a missing rank, 2 when the input cannot be read (a missing
directory, or an empty, truncated or foreign file; the readable files are
still diagnosed).

The module needs nothing but the standard library.
"""

import json
import os
import re
import sys

__all__ = ["diagnose", "main", "Diagnosis"]

_FORMAT = "meshcomm-flight-recorder"
_FILE = re.compile(r"^rank_(\d+)\.jsonl$")
# All ranks waiting in the same operation is how a collective looks while it
# runs; only after this long is it reported as stuck.
_STUCK_S = 5.0
_RECORD_FIELDS = ("id", "group_id", "group", "kind", "seq", "op", "dtype", "count", "bytes",
                  "state", "enqueued_at", "started_at", "finished_at")

EXIT_OK, EXIT_PROBLEM, EXIT_UNREADABLE = 0, 1, 2


class _Unreadable(Exception):
    pass


class Diagnosis:
    """What diagnose() found: `lines` to print and the exit `status`."""

    def __init__(self):
        self.lines = []
        self.status = EXIT_OK

    def problem(self, line):
        self.lines.append(line)
        self.status = max(self.status, EXIT_PROBLEM)

    def info(self, line):
        self.lines.append(line)

    def unreadable(self, line):
        self.lines.append(line)
        self.status = EXIT_UNREADABLE

    @property
    def text(self):
        return "\n".join(self.lines)


def _size(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:g} {unit}" if unit == "B" else f"{n:.3g} {unit}"
        n /= 1024
    return f"{n} B"


def _ranks(ranks):
    """'rank 2', 'ranks 0,1,3', 'ranks 0-31,33-63'."""
    ranks = sorted(ranks)
    word = "rank" if len(ranks) == 1 else "ranks"
    spans = []
    for r in ranks:
        if spans and spans[-1][1] == r - 1:
            spans[-1][1] = r
        else:
            spans.append([r, r])
    text = []
    for first, last in spans:
        if last - first >= 2:
            text.append(f"{first}-{last}")
        else:
            text.extend(str(r) for r in range(first, last + 1))
    return f"{word} {','.join(text)}"


def _record_problem(record):
    """What is wrong with a record's fields, or None."""
    def number(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    def integer(v):
        return isinstance(v, int) and not isinstance(v, bool)

    if record["kind"] not in ("collective", "p2p"):
        return f"unknown kind {record['kind']!r}"
    if record["state"] not in ("enqueued", "started", "completed", "failed"):
        return f"unknown state {record['state']!r}"
    if not (record["seq"] is None or integer(record["seq"])):
        return "its seq is not a number"
    if record["seq"] is None and record["state"] != "enqueued":
        return "a started operation without a seq"
    for key in ("id", "group_id", "count", "bytes"):
        if not integer(record[key]):
            return f"its {key} is not a number"
    for key in ("op", "dtype", "group"):
        if not isinstance(record[key], str):
            return f"its {key} is not a string"
    for key in ("enqueued_at", "started_at", "finished_at"):
        if not (record[key] is None or number(record[key])):
            return f"its {key} is not a time"
    for key in ("root", "peer"):
        if record.get(key) is not None and not integer(record[key]):
            return f"its {key} is not a rank"
    return None


def _load(path):
    """(header, records) of one dump; raises _Unreadable saying why."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise _Unreadable(f"cannot read it: {e.strerror or e}")
    if not data.strip():
        raise _Unreadable("it is empty (the process may have died while writing it)")
    text = data.decode("utf-8", "replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    try:
        header = json.loads(lines[0])
    except ValueError:
        raise _Unreadable("not a meshcomm flight recorder dump (its first line is not JSON)")
    if not isinstance(header, dict) or header.get("format") != _FORMAT:
        raise _Unreadable("not a meshcomm flight recorder dump (its first line has no "
                          f"\"format\": \"{_FORMAT}\")")
    for key in ("rank", "world_size", "dumped_at", "groups"):
        if key not in header:
            raise _Unreadable(f"its header has no \"{key}\"")
    if not text.endswith("\n"):
        raise _Unreadable(f"it is truncated (line {len(lines)} is cut off)")
    records = []
    for number, line in enumerate(lines[1:], start=2):
        try:
            record = json.loads(line)
        except ValueError:
            raise _Unreadable(f"line {number} is not JSON (a truncated or altered file)")
        if not isinstance(record, dict) or any(k not in record for k in _RECORD_FIELDS):
            raise _Unreadable(f"line {number} is not an operation record")
        problem = _record_problem(record)
        if problem:
            raise _Unreadable(f"line {number}: {problem}")
        records.append(record)
    try:
        header["groups"] = {int(g["id"]): (str(g["name"]), [int(r) for r in g["world_ranks"]])
                            for g in header["groups"]}
        header["rank"] = int(header["rank"])
        header["world_size"] = int(header["world_size"])
        header["dumped_at"] = float(header["dumped_at"])
        if header["world_size"] <= header["rank"] or header["rank"] < 0:
            raise ValueError("rank outside the world")
    except (TypeError, KeyError, ValueError, AttributeError):
        raise _Unreadable("its header is malformed")
    return header, records


def _describe(record):
    """'all_reduce #42 (float32, 4 MiB)'"""
    what = f"{record['op']} #{record['seq']}"
    details = []
    if record["kind"] == "p2p":
        if record.get("peer") is not None:
            details.append(("to" if record["op"] == "send" else "with" if record["op"] ==
                            "batch_isend_irecv" else "from") + f" rank {record['peer']}")
        details.append(_size(record["bytes"]))
    else:
        if record["op"] not in ("barrier",):
            details.append(str(record["dtype"]))
            details.append(_size(record["bytes"]))
        if record.get("root") is not None:
            details.append(f"root {record['root']}")
    return what + (f" ({', '.join(details)})" if details else "")


def _signature(record):
    return (record["op"], record["dtype"], record["count"], record.get("root"))


class _RankView:
    """One rank's records of one group."""

    def __init__(self, rank, header, records):
        self.rank = rank
        self.dumped_at = header["dumped_at"]
        self.records = records
        coll = [r for r in records if r["kind"] == "collective" and r["seq"] is not None]
        self.by_seq = {r["seq"]: r for r in coll}
        self.entered = max((r["seq"] for r in coll), default=None)
        done = [r for r in coll if r["state"] == "completed"]
        self.finished = max(done, key=lambda r: r["seq"], default=None)
        self.running = [r for r in records if r["state"] == "started"]
        self.failed = [r for r in records if r["state"] == "failed"]
        self.queued = [r for r in records if r["state"] == "enqueued"]

    def waited(self, record):
        return max(0.0, self.dumped_at - float(record["started_at"] or self.dumped_at))


def _group_views(dumps):
    """{group name: (world ranks, {rank: _RankView})} over every dump."""
    groups = {}
    for rank, (header, records) in sorted(dumps.items()):
        latest = {}
        for gid, (name, members) in sorted(header["groups"].items()):
            latest[name] = (gid, members)
        for name, (gid, members) in latest.items():
            mine = [r for r in records if r["group_id"] == gid]
            entry = groups.setdefault(name, (members, {}))
            entry[1][rank] = _RankView(rank, header, mine)
    return groups


def _diagnose_group(name, members, views, missing, out):
    present = {r: v for r, v in views.items()}
    absent = [r for r in members if r not in present and r in missing]
    out.info(f"group {name} ({len(members)} ranks):")
    # The last collective each rank entered and finished, ranks alike together.
    alike = {}
    for r in members:
        v = present.get(r)
        if v is None:
            alike.setdefault("no dump", []).append(r)
            continue
        entered = "-" if v.entered is None else f"#{v.entered}"
        finished = "-" if v.finished is None else f"#{v.finished['seq']}"
        alike.setdefault(f"entered {entered}, finished {finished}", []).append(r)
    out.info("  " + "; ".join(f"{_ranks(ranks)}: {what}" for what, ranks in alike.items()))

    found = False
    # Signatures that differ at the same sequence number.
    seqs = set()
    for v in present.values():
        seqs.update(v.by_seq)
    for seq in sorted(seqs):
        sigs = {}
        for r, v in present.items():
            rec = v.by_seq.get(seq)
            if rec is not None:
                sigs.setdefault(_signature(rec), []).append((r, rec))
        if len(sigs) > 1:
            parts = [f"{_ranks(r for r, _ in holders)} called {_describe(holders[0][1])}"
                     for holders in sigs.values()]
            out.problem(f"  mismatch at #{seq}: " + "; ".join(parts))
            found = True

    # Where each rank stopped: a collective it waits in, or the one that
    # failed on it. The furthest one: who is in it, and who is not there.
    stopped = {}
    for r, v in present.items():
        for rec in v.running + v.failed:
            if rec["kind"] == "collective":
                stopped.setdefault(rec["seq"], []).append((r, rec, v))
    if stopped:
        seq = max(stopped)
        holders = stopped[seq]
        rec = holders[0][1]
        if len({_signature(x) for _, x, _ in holders}) > 1:
            rec = None  # the ranks disagree about #seq: the mismatch line says how
        in_it = [r for r, _, _ in holders]
        running = [(r, v.waited(x)) for r, x, v in holders if x["state"] == "started"]
        gave_up = [(r, float(x["finished_at"] or 0) - float(x["started_at"] or 0))
                   for r, x, v in holders if x["state"] == "failed"]
        what = _describe(rec) if rec is not None else f"#{seq}"
        parts = []
        if running:
            since = max(w for _, w in running)
            parts.append(f"{_ranks(r for r, _ in running)} wait"
                         f"{'s' if len(running) == 1 else ''} in {what} since {since:.1f} s")
        if gave_up:
            after = max(w for _, w in gave_up)
            parts.append(f"{_ranks(r for r, _ in gave_up)} failed in {what} after {after:.1f} s")
        behind = []
        for r in members:
            if r in in_it:
                continue
            v = present.get(r)
            if v is None:
                behind.append(f"rank {r} left no dump")
                continue
            own = [x for x in v.running if x["kind"] == "collective"]
            if own:
                x = own[0]
                behind.append(f"rank {r} waits in {_describe(x)} since {v.waited(x):.1f} s")
            elif v.entered is not None and v.entered >= seq:
                continue  # it passed #seq already (its dump is later)
            else:
                last = v.finished
                did = (f"last finished {last['op']} #{last['seq']}" if last is not None
                       else "finished no collective")
                elsewhere = [x for x in v.running if x["kind"] == "p2p"]
                tail = ""
                if elsewhere:
                    x = elsewhere[0]
                    tail = f" (it waits in {_describe(x)} since {v.waited(x):.1f} s)"
                behind.append(f"rank {r} {did} and never entered #{seq}{tail}")
        line = "  " + "; ".join(parts)
        if behind:
            out.problem(line + "; " + "; ".join(behind))
            found = True
        elif gave_up:
            out.problem(line)
            found = True
        elif since >= _STUCK_S:
            out.problem(line + "; every rank is in it, so the operation itself is stuck "
                        "(a network or shared-memory problem?)")
            found = True
        else:
            out.info(line + " (every rank is in it: running)")

    # Point-to-point operations in flight.
    for r, v in sorted(present.items()):
        for rec in v.running:
            if rec["kind"] == "p2p":
                wait = v.waited(rec)
                line = f"  rank {r} waits in {_describe(rec)} since {wait:.1f} s"
                if wait >= _STUCK_S:
                    out.problem(line)
                    found = True
                else:
                    out.info(line)
    # The first failure, which the others' errors usually follow from.
    failures = [(float(rec["finished_at"] or 0), r, rec)
                for r, v in present.items() for rec in v.failed]
    if failures:
        _, r, rec = min(failures, key=lambda f: (f[0], f[1]))
        error = str(rec.get("error") or "no message").split("\n")[0]
        others = sorted({fr for _, fr, _ in failures} - {r})
        also = f" ({_ranks(others)} failed too)" if others else ""
        out.problem(f"  first error, on rank {r}: {error}{also}")
        found = True
    if not found and not absent:
        out.info("  no problem found")
    return found


def diagnose(directory):
    """Diagnoses the dumps in `directory`; returns a Diagnosis."""
    out = Diagnosis()
    try:
        names = sorted(os.listdir(directory))
    except OSError as e:
        out.unreadable(f"meshcomm-diagnose: cannot read {directory}: {e.strerror or e}")
        return out
    files = [(int(m.group(1)), n) for n in names if (m := _FILE.match(n))]
    if not files:
        out.unreadable(f"meshcomm-diagnose: no flight recorder dumps (rank_<R>.jsonl) in "
                       f"{directory}")
        return out
    dumps = {}
    for rank, name in sorted(files):
        path = os.path.join(directory, name)
        try:
            header, records = _load(path)
        except _Unreadable as e:
            out.unreadable(f"meshcomm-diagnose: {path}: {e}")
            continue
        if header["rank"] != rank or header["rank"] in dumps:
            out.unreadable(f"meshcomm-diagnose: {path}: its header says rank {header['rank']}; "
                           "is it a dump of another job, or renamed?")
            continue
        dumps[header["rank"]] = (header, records)
    if not dumps:
        return out

    sizes = {h["world_size"] for h, _ in dumps.values()}
    world = max(sizes)
    if len(sizes) > 1:
        out.problem(f"the dumps disagree about the world size ({sorted(sizes)}): are they "
                    "from one job?")
    missing = [r for r in range(world) if r not in dumps]
    oldest = min(h["dumped_at"] for h, _ in dumps.values())
    newest = max(h["dumped_at"] for h, _ in dumps.values())
    out.info(f"{len(dumps)} of {world} ranks left a dump in {directory}"
             + (f" (taken {newest - oldest:.1f} s apart)" if newest - oldest >= 1 else ""))
    if missing:
        out.problem(f"no dump from {_ranks(missing)}: stopped, killed or exited, never "
                    "joined, or running with MESHCOMM_FLIGHT_RECORDER=0 (a live process "
                    "writes one on SIGUSR1)")
    for name, (members, views) in sorted(_group_views(dumps).items(),
                                         key=lambda item: (len(item[1][0]) != world, item[0])):
        _diagnose_group(name, members, views, set(missing), out)
    return out


def _emit(text):
    """Prints text; a reader that went away (`| head`) is no error."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def main(argv=None):
    """The command's entry point; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv in (["-h"], ["--help"]):
        _emit(__doc__.strip())
        return EXIT_OK
    if len(argv) != 1:
        sys.stderr.write("usage: meshcomm-diagnose DIR (the directory of the rank_<R>.jsonl "
                         "dumps; --help says more)\n")
        return EXIT_UNREADABLE
    result = diagnose(argv[0])
    _emit(result.text)
    return result.status


if __name__ == "__main__":
    sys.exit(main())
