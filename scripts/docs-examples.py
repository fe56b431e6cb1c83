#!/usr/bin/python3
"""The example outputs of README.md and docs/*.md, made by the tools themselves.

A fenced block right under a marker line

    <!-- docs-example: loom-plan examples/knn_1m.lir --limit 64MiB | grep ' loop ' -->

holds "$ COMMAND" and what COMMAND prints on stdout (run by bash from the repository root, with
the build's tools first on PATH). Lines right above the marker of the form

    <!-- docs-mask: REGEX -->

mask what else varies in that block (a host's memory size), on top of the masks every block
gets: durations, dates, this machine's host name and CPU name.

  docs-examples.py --build DIR [--check] [FILE.md ...]   (default: README.md docs/*.md)

Without --check each marked block is rewritten with what its command prints now. With --check
nothing is written: each block is compared with the command's output, both masked, and every
block that differs is reported (FILE:LINE, the command, a diff) with exit status 1; a block that
shows a "$ loom-..." command without a marker is reported too, since nothing would keep it
current. Exit status 2: bad usage or a marker that is not followed by a fenced block.
"""
import argparse
import difflib
import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

MARK = re.compile(r"^<!-- docs-example: (.+?) -->\s*$")
MASK = re.compile(r"^<!-- docs-mask: (.+?) -->\s*$")
FENCE = "```"
# What differs from run to run or machine to machine in every block, in this order.
COMMON_MASKS = [
    (re.compile(r"\b\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?Z?)?"), "<date>"),
    # With the blanks before it: a time right-aligned in a column is padded to its length.
    (re.compile(r" *(?<![\w.])-?\d+(\.\d+)?(e[-+]?\d+)? ?(ns|us|µs|ms|s)\b"), " <time>"),
    # Names the rewrites give new values (v3, v12): numbered in the order they are made, which
    # follows the compiler's order of evaluating a call's arguments (GCC and clang differ).
    (re.compile(r"\bv\d+\b"), "v<n>"),
]


def cpu_name():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def machine_masks():
    masks = []
    for name, label in ((cpu_name(), "<cpu>"), (socket.gethostname(), "<host>")):
        if name and len(name) > 3:
            masks.append((re.compile(re.escape(name)), label))
    return masks


class Block:
    def __init__(self, path, line, command, masks, start, end):
        self.path, self.line, self.command = path, line, command
        self.masks = masks  # the block's own, compiled
        self.start, self.end = start, end  # lines of the block's body: [start, end)


def parse(path, lines):
    """The marked blocks of a file, and the unmarked blocks that show a loom command."""
    blocks, unmarked, masks = [], [], []
    i = 0
    while i < len(lines):
        m_mask, m_mark = MASK.match(lines[i]), MARK.match(lines[i])
        if m_mask:
            try:
                masks.append(re.compile(m_mask.group(1)))
            except re.error as e:
                sys.exit(f"{path}:{i + 1}: docs-mask: bad regular expression: {e}")
            i += 1
            continue
        if m_mark:
            if i + 1 >= len(lines) or lines[i + 1].rstrip("\n") != FENCE:
                print(f"{path}:{i + 1}: docs-example: the next line must open a plain ``` block", file=sys.stderr)
                sys.exit(2)
            end = i + 2
            while end < len(lines) and lines[end].rstrip("\n") != FENCE:
                end += 1
            if end >= len(lines):
                print(f"{path}:{i + 2}: docs-example: the block is never closed", file=sys.stderr)
                sys.exit(2)
            blocks.append(Block(path, i + 1, m_mark.group(1), masks, i + 2, end))
            masks, i = [], end + 1
            continue
        masks = []
        if lines[i].startswith(FENCE):
            end = i + 1
            while end < len(lines) and not lines[end].startswith(FENCE):
                end += 1
            if end > i + 1 and re.match(r"^\$ (\S+=\S+ )*(mpirun .*)?loom-", lines[i + 1]):
                unmarked.append(i + 1)
            i = end
        i += 1
    return blocks, unmarked


def environment(build, scratch):
    """The tools' environment: this build's tools, no developer settings that change a run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOOM_", "POCL_", "OMPI_"))}
    env["PATH"] = os.path.abspath(build) + os.pathsep + env.get("PATH", "/usr/bin:/bin")
    cache = os.path.join(os.path.abspath(build), "test-cache")
    env.update({
        "POCL_CACHE_DIR": os.path.join(cache, "pocl"),
        "LOOM_CACHE_DIR": os.path.join(cache, "loom"),
        "LOOM_STAGE_HISTORY": "0",
        # mpirun in a container, as tests/mpi.cmake runs it: as root, ranks on this machine only,
        # shared memory without cross-memory attach. None of it changes what a rank prints.
        "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        "OMPI_MCA_plm": "isolated", "OMPI_MCA_rmaps_base_oversubscribe": "1",
        "OMPI_MCA_btl": "self,vader", "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
        "OMPI_MCA_mpi_yield_when_idle": "1",
        "TMPDIR": scratch,
    })
    return env


def run(block, env, scratch):
    """What the block's command prints, as the block's lines; None (and a message) on failure."""
    # Outputs a command writes (--out-dir) land in a scratch folder that sees the tree's examples
    # and docs.
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", block.command], cwd=scratch, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    if proc.returncode != 0:
        print(f"{block.path}:{block.line}: docs-example '{block.command}' failed (exit {proc.returncode}):\n"
              f"{proc.stderr.strip()}", file=sys.stderr)
        return None
    out = [f"$ {block.command}\n"] + [line.rstrip() + "\n" for line in proc.stdout.splitlines()]
    return out


def masked(lines, masks):
    text = []
    for line in lines:
        line = line.rstrip()
        for pattern, label in masks:
            line = pattern.sub(label, line)
        text.append(line)
    return text


def compare(b, lines, out, common, shown):
    """1 (and the difference on stderr) where the block differs from `out`, both masked; else 0."""
    masks = common + [(m, "<masked>") for m in b.masks]
    have, want = masked(lines[b.start:b.end], masks), masked(out, masks)
    if have == want:
        return 0
    diff = difflib.unified_diff(have, want, "the block", "what it prints now", lineterm="", n=1)
    print(f"{shown}:{b.line}: docs-example '{b.command}' no longer matches what the tool prints "
          f"(masked; scripts/update-docs.sh rewrites it):\n  " + "\n  ".join(diff), file=sys.stderr)
    return 1


def process(path, shown, common, env, scratch, check):
    """Checks or rewrites the marked blocks of one file; the number of blocks that failed."""
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    blocks, unmarked = parse(path, lines)
    failures = 0
    for line in unmarked:
        print(f"{shown}:{line + 1}: a block shows a loom command's output without a docs-example "
              "marker above it: nothing keeps it current", file=sys.stderr)
        failures += check
    for b in reversed(blocks):  # from the end, so earlier blocks' lines stay where they are
        if re.search(r"\bmpirun\b", b.command) and not shutil.which("mpirun", path=env["PATH"]):
            print(f"{shown}:{b.line}: skipped: no mpirun (openmpi-bin) for '{b.command}'")
            continue
        out = run(b, env, scratch)
        if out is None:
            failures += 1
        elif check:
            failures += compare(b, lines, out, common, shown)
        else:
            lines[b.start:b.end] = out
    if not check:
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(lines)
    print(f"docs-examples: {shown}: {len(blocks)} example block(s) {'checked' if check else 'written'}")
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--build", required=True, help="the build folder holding loom-run, loom-plan, ...")
    ap.add_argument("--check", action="store_true", help="compare, write nothing")
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not os.path.isfile(os.path.join(args.build, "loom-run")):
        print(f"docs-examples: {args.build}: no loom-run there (build the tools first)", file=sys.stderr)
        return 2
    files = args.files or [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    common = COMMON_MASKS + machine_masks()
    scratch = tempfile.mkdtemp(prefix="loom-docs-")
    failures = 0
    try:
        for name in ("examples", "docs"):  # what commands read: graphs, and graphs in the docs
            os.symlink(os.path.join(root, name), os.path.join(scratch, name))
        env = environment(args.build, scratch)
        for path in files:
            failures += process(path, os.path.relpath(path, root), common, env, scratch, args.check)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if failures:
        print(f"docs-examples: {failures} example block(s) out of date or failing", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
