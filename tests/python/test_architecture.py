"""What docs/ARCHITECTURE.md says an addition touches, checked on the tree.

A transport kind lives in its folder under src/transport/ plus one line of
transport/registry.cc; an on-host kind adds a folder under src/host/ plus
one line of host/registry.cc. An operation of an existing family is named
in five files outside its family's folder. Each holds only while no other
file of the library, the binding or the tools names the kind or the
operation: these tests list the files that do, so a claim fails here the
day it stops being true.
"""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCANNED = ("src", "python/src", "tools")
SOURCES = (".h", ".cc")

# What names each kind's code, and the folders allowed to.
KINDS = {
    "shm": (re.compile(r"\bShm(Domain|Op|Transport|Segment)\b|transport/shm/|host/shm/|"
                       r"setUpSharedMemoryLink|shmCollectives"),
            ("src/transport/shm/", "src/host/shm/")),
    "tcp": (re.compile(r"\bTcp(Transport|Link)\b|transport/tcp/|setUpTcpLink"),
            ("src/transport/tcp/",)),
}
REGISTRIES = ("src/transport/registry.cc", "src/host/registry.cc")


def source_files():
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix in SOURCES:
                yield path.relative_to(ROOT).as_posix(), path.read_text()


def test_only_a_kinds_folders_and_the_registries_name_it():
    for kind, (names, folders) in KINDS.items():
        outside = [rel for rel, text in source_files()
                   if names.search(text) and rel not in REGISTRIES
                   and not rel.startswith(folders)]
        assert not outside, (f"the {kind} kind is named outside its folders {folders} and the "
                             f"registries: {outside}; adding a kind would have to touch them "
                             "(docs/ARCHITECTURE.md, 'Where to change what')")


def table_entries(registry, table):
    text = (ROOT / registry).read_text()
    body = re.search(table + r"\[\] = \{(.*?)\n\s*\};", text, re.S)
    assert body, f"{registry}: table {table} not found"
    return re.findall(r"^\s*\{", body.group(1), re.M)


def kind_folders(top):
    return sorted(p.name for p in (ROOT / top).iterdir() if p.is_dir())


def test_every_kind_folder_has_one_registry_line():
    transports = kind_folders("src/transport")
    assert len(table_entries("src/transport/registry.cc", "kKinds")) == len(transports), transports
    on_host = kind_folders("src/host")
    assert len(table_entries("src/host/registry.cc", "kKinds")) == len(on_host), on_host
    # Every on-host kind is also a transport kind: its link offers the domain.
    assert set(on_host) <= set(transports), (on_host, transports)


def test_the_guide_names_files_that_exist():
    guide = (ROOT / "docs/ARCHITECTURE.md").read_text()
    section = guide[guide.index("## Where to change what"):]
    named = set(re.findall(r"`((?:src/|include/|python/|tools/|tests/)?[\w/]+\.(?:h|cc|py))`",
                           section))
    assert named
    missing = []
    for name in named:
        candidates = [ROOT / name, ROOT / "src" / name]
        if not any(c.exists() for c in candidates):
            missing.append(name)
    assert not missing, f"docs/ARCHITECTURE.md names files that do not exist: {sorted(missing)}"


def test_every_environment_variable_is_documented():
    """docs/configuration.md says it lists every variable meshcomm reads:
    every MESHCOMM_ name the library, its Python package and its tools spell
    as a string must stand there."""
    spelled = set()
    for folder in ("src", "python/src", "python/meshcomm", "tools"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".cc", ".h", ".py") or (path.parent.name == "tools" and path.is_file()):
                spelled |= set(re.findall(r"[\"'](MESHCOMM_[A-Z0-9_]+)[\"'=]", path.read_text(errors="replace")))
    documented = set(re.findall(r"\bMESHCOMM_[A-Z0-9_]+\b", (ROOT / "docs/configuration.md").read_text()))
    missing = sorted(spelled - documented)
    assert spelled, "found no MESHCOMM_ variable in the sources: the search is broken"
    assert not missing, f"read by meshcomm but missing from docs/configuration.md: {missing}"


# The family folder of each wire family (collectives/operations.h, Opcode).
FAMILY_FOLDERS = {
    "kAllReduce": "all_reduce", "kBroadcast": "broadcast", "kReduce": "reduce",
    "kAllGather": "all_gather", "kReduceScatter": "reduce_scatter", "kGather": "gather_scatter",
    "kScatter": "gather_scatter", "kAllToAll": "all_to_all", "kBarrier": "barrier",
}
# The files 'Where to change what' says a new operation adds a line to,
# beside its Python function.
OPERATION_FILES = {"src/collectives/operations.h", "src/runtime/operation_methods.h",
                   "include/meshcomm/process_group.h", "src/runtime/process_group.cc"}


def operations():
    """(enum name, Python name, family) of every operation of the table."""
    text = (ROOT / "src/collectives/operations.h").read_text()
    found = re.findall(r'Operation::(k\w+),\s*\.name = "(\w+)",\s*\.family = Opcode::(k\w+)', text)
    assert len(found) >= 19, found
    return found


def files_naming(enum, name):
    method = name.split("_")[0] + "".join(w.title() for w in name.split("_")[1:])
    pattern = re.compile(rf"Operation::{enum}\b|O::{enum}\b|&P::{method}\b|\b{method}\(|"
                         rf"[\"']{name}[\"']|def {name}\b")
    found = set()
    for top in ("src", "include", "python", "tools"):
        for path in (ROOT / top).rglob("*"):
            if path.suffix in (".h", ".cc", ".py") and pattern.search(path.read_text(errors="ignore")):
                found.add(str(path.relative_to(ROOT)))
    return found


def test_an_operation_of_a_family_is_named_in_five_files_outside_its_folder():
    """The forms of a family's operation (all_gather_into_tensor_uneven,
    scatter_tensor, ...), as a new one would be: besides its folder, only
    the op list, the method table, the public method (header and one line)
    and its Python function name it. The torch backend's front, which maps
    torch's own operations onto these, is apart."""
    def family_name(family):  # kAllGather -> all_gather
        return re.sub(r"(?<!^)([A-Z])", r"_\1", family[1:]).lower()

    forms = [(e, n, f) for e, n, f in operations()
             if f in FAMILY_FOLDERS and n != family_name(f)]
    assert len(forms) >= 7, forms
    for enum, name, family in forms:
        outside = {f for f in files_naming(enum, name)
                   if not f.startswith(f"src/collectives/{FAMILY_FOLDERS[family]}/")
                   and not f.startswith(("python/meshcomm/torch/", "python/src/torch/"))}
        python = {f for f in outside if f.startswith("python/meshcomm/")}
        assert len(python) == 1, (name, python)
        assert outside - python == OPERATION_FILES, (
            f"{name} is named outside its family's folder in {sorted(outside)}; "
            "docs/ARCHITECTURE.md ('A new operation') says five files")
