#!/usr/bin/python3
"""The files loom-run writes (issue 32): outputs, --stats-json and --trace are written under
temporaries and renamed only once all are complete, so that

  keep      a failing run leaves the files an earlier run wrote as they were;
  long      an output name of 245 characters (its temporary within NAME_MAX) is written;
  sigterm   SIGTERM (or SIGINT) while a large output is written leaves no temporary, and no
  sigint    --out-dir the run created; files that were there before are untouched.

usage: run_files.py CASE LOOM_RUN WORK
"""
import os
import shutil
import signal
import subprocess
import sys
import time

SMALL = """graph small(x: f32[4,3]) {
  y = add x x
  return y
}
"""
# 512 MiB out: its write takes long enough to be caught in the middle.
BIG = """graph big(x: f32[134217728]) {
  y = add x x
  return y
}
"""


def fail(msg, proc=None):
    if proc is not None:
        msg += "\n--- exit %s\n--- stdout:\n%s\n--- stderr:\n%s" % (proc.returncode, proc.stdout, proc.stderr)
    sys.exit("FAIL: " + msg)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def listing(top):
    """Every file and folder under top, relative, sorted."""
    out = []
    for root, dirs, files in os.walk(top):
        for n in dirs + files:
            out.append(os.path.relpath(os.path.join(root, n), top))
    return sorted(out)


def run(tool, *args):
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=300)


def case_keep(tool, work):
    """A run that fails after --stats-json and --trace were written (its --trace folder is
    missing) leaves the earlier files' contents as they were, and no temporary."""
    g = os.path.join(work, "small.lir")
    write(g, SMALL)
    old = {"stats.json": "OLD STATS", "trace.json": "OLD TRACE", "out.safetensors": "OLD OUT"}
    for name, text in old.items():
        write(os.path.join(work, name), text)
    os.mkdir(os.path.join(work, "out"))
    write(os.path.join(work, "out", "y.npy"), "OLD NPY")
    before = listing(work)
    p = run(tool, g, "--random", "1", "--stats-json", os.path.join(work, "stats.json"), "--out",
            os.path.join(work, "out.safetensors"), "--out-dir", os.path.join(work, "out"), "--trace",
            os.path.join(work, "no-such-folder", "trace.json"))
    if p.returncode != 1 or "--trace" not in p.stderr:
        fail("the run should fail on --trace with exit 1", p)
    for name, text in old.items():
        if open(os.path.join(work, name)).read() != text:
            fail("%s was changed by a failing run" % name, p)
    if open(os.path.join(work, "out", "y.npy")).read() != "OLD NPY":
        fail("out/y.npy was changed by a failing run", p)
    if listing(work) != before:
        fail("files left behind: %s" % sorted(set(listing(work)) - set(before)), p)
    # The same run with a folder that exists succeeds and replaces all four.
    p = run(tool, g, "--random", "1", "--stats-json", os.path.join(work, "stats.json"), "--out",
            os.path.join(work, "out.safetensors"), "--out-dir", os.path.join(work, "out"), "--trace",
            os.path.join(work, "trace.json"))
    if p.returncode != 0:
        fail("the run should succeed", p)
    for name in old:
        if open(os.path.join(work, name), "rb").read(3) in (b"OLD",):
            fail("%s was not replaced by a successful run" % name, p)
    if listing(work) != before:
        fail("files left behind: %s" % sorted(set(listing(work)) - set(before)), p)


def case_long(tool, work):
    """Outputs whose names are 245 and 251 characters long (255 with .npy: NAME_MAX), and a
    --stats-json of 250."""
    for n in (245, 251):
        name = "v" * n
        g = os.path.join(work, "long%d.lir" % n)
        write(g, SMALL.replace("y = add x x\n  return y", "%s = add x x\n  return %s" % (name, name)))
        for extra in ([], ["--stats-json", os.path.join(work, "s" * 245 + ".json")]):
            out = os.path.join(work, "out%d" % n)
            p = run(tool, g, "--random", "1", "--out-dir", out, *extra)
            if p.returncode != 0:
                fail("a %d-character output name should be written" % n, p)
            if listing(out) != [name + ".npy"]:
                fail("out%d holds %s" % (n, listing(out)), p)
            shutil.rmtree(out)
    if [f for f in listing(work) if f.startswith(".")]:
        fail("temporaries left: %s" % listing(work))


def case_signal(tool, work, sig):
    """Kills loom-run with `sig` while it writes a 512 MiB output (a temporary of it is seen
    growing) into a folder it created, beside files that were there before."""
    g = os.path.join(work, "big.lir")
    write(g, BIG)
    write(os.path.join(work, "stats.json"), "OLD STATS")
    before = listing(work)
    out = os.path.join(work, "new", "out")
    for attempt in range(3):
        proc = subprocess.Popen([tool, g, "--random", "1", "--out-dir", out, "--stats-json",
                                 os.path.join(work, "stats.json")], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        caught = None
        while proc.poll() is None and caught is None:
            if os.path.isdir(out):
                for n in os.listdir(out):
                    p = os.path.join(out, n)
                    try:
                        if n.startswith(".") and os.path.getsize(p) > (1 << 20):
                            caught = n
                    except OSError:
                        pass
            time.sleep(0.002)
        if caught:
            proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=120)
        if caught:
            break
        shutil.rmtree(os.path.join(work, "new"), ignore_errors=True)
    else:
        sys.exit("FAIL: the output's temporary was never seen being written (3 tries)")
    if proc.returncode != -sig:
        fail("loom-run should end by signal %d, not exit %s\n%s" % (sig, proc.returncode, stderr))
    if os.path.exists(os.path.join(work, "new")):
        fail("the --out-dir the run created is still there: %s (temporary %s seen)" %
             (listing(os.path.join(work, "new")), caught))
    if listing(work) != before:
        fail("left behind: %s" % sorted(set(listing(work)) - set(before)))
    if open(os.path.join(work, "stats.json")).read() != "OLD STATS":
        fail("stats.json was changed by a killed run")


def main():
    case, tool, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    if case == "keep":
        case_keep(tool, work)
    elif case == "long":
        case_long(tool, work)
    elif case == "sigterm":
        case_signal(tool, work, signal.SIGTERM)
    elif case == "sigint":
        case_signal(tool, work, signal.SIGINT)
    else:
        sys.exit("run_files.py: unknown case '%s'" % case)
    print("ok: %s" % case)


main()
