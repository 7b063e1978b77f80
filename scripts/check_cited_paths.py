#!/usr/bin/env python3
"""Lists the repository paths cited in comments and docs that do not exist.

A citation is a token like `core/model/model.hpp`, `plan/`, `tests/kernels/cuda/test_cuda_fp8.cpp`
or a markdown link `[x](img/y.svg)`: a path whose first component is one of the repository's
top-level folders (or, for links, a path relative to the citing file). Globs (`*`), placeholders
(`<dir>`, `{a,b}`), paths under build or temporary folders and anything outside the repository
(`/usr/...`, `torchtitan/...`) are not citations.

    python3 scripts/check_cited_paths.py            # every tracked source, script and doc
    python3 scripts/check_cited_paths.py --logs     # also the dated logs in bench/results/
    python3 scripts/check_cited_paths.py FILE...    # only these files

A citation without a suffix (`executors/mpi_executor`) names a module: it exists when a file of
that stem does. Paths git ignores (outputs such as `bench/results/bench.md`), paths in string
literals of code (data, not citations) and the few names in NOT_PATHS are skipped. The dated logs
(bench/results/YYYY-MM-DD-*.md) and their legend cite the tree of their date, so they are left out
unless asked for. Prints `file:line: path` per missing citation and exits 1 if there is any.
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.realpath(os.path.join(os.path.dirname(__file__), ".."))
SUFFIXES = (".cpp", ".hpp", ".h", ".cu", ".cuh", ".md", ".sh", ".lua", ".py", ".txt", ".toml", ".cmake", ".patch")
# A path token: components of word characters, dots, dashes and '+', separated by '/'.
TOKEN = re.compile(r"(?<![\w./$~@-])((?:\.?[\w+-][\w.+-]*/)+(?:[\w+-][\w.+-]*)?)")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
CODE = (".cpp", ".hpp", ".h", ".cu", ".cuh", ".py")
MODULE_SUFFIXES = (".cpp", ".hpp", ".h", ".cu", ".cuh", ".py", ".sh", ".md", ".lua")
# Tokens that look like repository paths and are not: names of other things, and files a user
# or a run creates (the examples of the docs).
NOT_PATHS = {
    "kernels/cuda/portable",  # a ctest name (tests/CMakeLists.txt)
    "runs/sft/run-2",  # a run dir in a docs example
    "hf/model.safetensors",  # files an `export --format hf` writes under its output folder
    "hf/config.json",
    "family/mixtral.cpp",  # the file a new family adds (docs/architecture.md, "Adding a model family")
    "family/mixtral.hpp",
}


def tracked(logs):
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for f in out.splitlines():
        if not (f.endswith(SUFFIXES) or os.path.basename(f) in ("README", "CMakeLists.txt", "run")):
            continue
        if not logs and (re.match(r"bench/results/\d{4}-\d\d-\d\d-.*\.md$", f) or f == "bench/results/README.md"):
            continue
        yield f


def top_level():
    return {e for e in os.listdir(ROOT) if os.path.isdir(os.path.join(ROOT, e)) and e not in (".git",)
            and not e.startswith("build")}


def citations(path, tops):
    """Yields (line number, cited path, path to check) for each citation in the file."""
    here = os.path.dirname(path)
    try:
        lines = open(os.path.join(ROOT, path), encoding="utf-8").read().split("\n")
    except (UnicodeDecodeError, FileNotFoundError):
        return
    for n, line in enumerate(lines, 1):
        seen = set()
        if path.endswith(".md"):
            for m in LINK.finditer(line):
                target = m.group(1)
                if re.match(r"[a-z]+:", target) or target.startswith("/"):
                    continue  # a URL or an absolute path
                seen.add(m.start(1))
                yield n, target, os.path.normpath(os.path.join(here, target))
        for m in TOKEN.finditer(line):
            if m.start(1) in seen:
                continue
            tok = m.group(1).rstrip(".")
            first = tok.split("/", 1)[0]
            if first not in tops or "/" not in tok:
                continue
            rest = line[m.end(1):m.end(1) + 1]
            if rest in ("*", "<", "{", "$"):
                continue  # a glob or a placeholder continues the path
            if path.endswith(CODE) and line[max(0, m.start(1) - 1):m.start(1)] == '"':
                continue  # a string literal: data the code handles, not a citation
            if tok.rstrip("/") in NOT_PATHS:
                continue
            yield n, tok, tok.rstrip("/")


def exists(target):
    full = os.path.join(ROOT, target)
    if os.path.exists(full) or any(os.path.exists(full + x) for x in MODULE_SUFFIXES):
        return True
    ignored = subprocess.run(["git", "check-ignore", "-q", target], cwd=ROOT).returncode == 0
    return ignored  # an output location (bench/results/bench.md): not in the tree by design


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--logs", action="store_true", help="also check the dated logs in bench/results/")
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    tops = top_level()
    files = args.files or list(tracked(args.logs))
    missing = 0
    for f in files:
        for n, cited, target in citations(f, tops):
            if not exists(target):
                print(f"{f}:{n}: {cited}")
                missing += 1
    print(f"{missing} cited path(s) missing in {len(files)} file(s)", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
