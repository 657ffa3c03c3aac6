"""Checks of `python3 -m hpml.bench`, run by tests/cli/python.sh under mpirun at 2 ranks
(one process runs every case through hpml.bench.main). argv: files holding
`hpml bench allreduce --csv` and `--json` output of the same build, whose columns and keys
the Python benchmarks must share."""

import contextlib
import io
import json
import os
import re
import sys
import types

from mpi4py import MPI

import hpml
import hpml.bench as hb

world = MPI.COMM_WORLD
root = world.Get_rank() == 0
failures = []


def run(*argv):
    """(exit status, stdout, stderr) of hpml.bench.main(argv) on this rank."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = hb.main(list(argv))
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()


def expect(cond, what):
    if root and not cond:
        failures.append(what)


QUICK = ("--iterations", "3", "--skip", "1")

# OMB-Py's output: two header lines, then '%-10d%18.2f' rows, one per power of two.
for name in ("allreduce", "osu_allreduce", "collective/osu_allreduce.py"):
    code, out, err = run(name, "--max", "16", *QUICK)
    lines = out.splitlines()
    expect(code == 0, "%s: exit %s %s" % (name, code, err))
    if root:
        expect(lines[:2] == ["# OMB Python MPI Allreduce Test", "# Size (B)      Latency (us)"],
               "%s: header %r" % (name, lines[:2]))
        expect([int(x.split()[0]) for x in lines[2:]] == [4, 8, 16], "%s: sizes" % name)
        expect(all(re.fullmatch(r"\d+ +\d+\.\d\d", x) and len(x) == 28 for x in lines[2:]),
               "%s: row format %r" % (name, lines[2:]))
code, out, _ = run("--benchmark", "bcast", "--min", "1", "--max", "4", *QUICK)
expect(root and out.splitlines()[2].startswith("1 ") or not root, "bcast starts at --min 1")

# Validation passes for every dtype, case and buffer kind (64 bytes); for every hpml
# algorithm in f32 from 0 to 64 bytes and at a size that takes the pipelined paths, and
# in bf16.
ONCE = ("--iterations", "1", "--skip", "0")
RUNS = [(d, "mpi4py,hpml", 64, 64) for d in hpml.DTYPE_NAMES] + \
    [("f32", "all", 0, 64), ("bf16", "all", 64, 64), ("f32", "all", 1 << 18, 1 << 18)]
for case in ("allreduce", "reduce", "reduce_scatter", "bcast", "allgather", "alltoall",
             "gather", "scatter"):
    for dt, impl, lo, hi in RUNS:
        buf = "numpy" if dt in ("f32", "bf16", "i64") else "bytearray"
        if case in ("gather", "scatter"):
            impl = "mpi4py"
        code, out, err = run(case, "--impl", impl, "-c", "-T", dt, "--buffer", buf,
                             "--min", str(lo), "--max", str(hi), *ONCE)
        expect(code == 0 and "Fail" not in out, "%s -T %s: exit %s %s%s"
               % (case, dt, code, out[-300:], err))
        expect(not root or out.count("Pass") >= 1, "%s -T %s: no Pass column" % (case, dt))
for case in ("allreduce", "bcast"):
    code, out, err = run(case, "--impl", "hpml,hpml:ring" if case == "allreduce" else "hpml",
                         "--bind", "-c", "--max", "65536", *QUICK)
    expect(code == 0 and "Fail" not in out, "%s --bind: %s %s" % (case, out, err))

# --align: the buffers start where asked, and validation passes on them.
for buf in ("numpy", "bytearray"):
    code, out, err = run("allreduce", "--impl", "mpi4py,hpml", "-c", "--align", "64",
                         "--buffer", buf, "--max", "65536", *QUICK)
    expect(code == 0 and "Fail" not in out, "--align 64 --buffer %s: %s %s" % (buf, out, err))
    for align in (64, 4096):
        for count in (1, 1000, 1 << 18):
            fake = types.SimpleNamespace(args=types.SimpleNamespace(buffer=buf, align=align))
            b, view = hb.Bench.alloc(fake, count, 0)
            expect(view.ctypes.data % align == 0 and view.size == count and
                   len(memoryview(b).cast("B")) == 4 * count,
                   "--align %d --buffer %s: %d elements at %#x"
                   % (align, buf, count, view.ctypes.data))

# Validation can fail: a broken allreduce is caught (exit 1, Fail, a detail in JSON).
real = hpml.Comm.allreduce


def broken(self, sendbuf, recvbuf=None, *a, **k):
    r = real(self, sendbuf, recvbuf, *a, **k)
    memoryview(r).cast("B")[-1:] = b"\x7f"
    return r


hpml.Comm.allreduce = broken
code, out, err = run("allreduce", "--impl", "mpi4py,hpml", "-c", "--min", "8", "--max", "8",
                     "--json", *QUICK)
hpml.Comm.allreduce = real
if root:
    doc = json.loads(out)
    v = {r["impl"]: r.get("validation") for r in doc["results"]}
    expect(code == 1 and v == {"mpi4py": "pass", "hpml": "fail"}, "broken hpml: %s %s" % (code, v))
    expect("validation_detail" in doc["results"][1] and "element 1" in
           doc["results"][1]["validation_detail"], "broken hpml: detail %s" % doc["results"][1])
    expect("validation failed" in err, "broken hpml: stderr %r" % err)

# CSV and JSON in `hpml bench`'s schema.
code, out, _ = run("allreduce", "--impl", "mpi4py,hpml", "-c", "--csv", "-f", "--max", "8",
                   *QUICK)
with open(sys.argv[1]) as f:
    c_csv = f.read().splitlines()
if root:
    rows = out.splitlines()
    expect(rows[0] == c_csv[0], "CSV header %r, hpml bench: %r" % (rows[0], c_csv[0]))
    expect(len(rows) == 5 and all(len(r.split(",")) == len(c_csv[0].split(",")) for r in rows),
           "CSV rows %r" % rows)
    expect(rows[1].startswith("allreduce,mpi4py,f32,2,4,3,") and rows[1].endswith(",pass"),
           "CSV row %r" % rows[1])
code, out, _ = run("allreduce", "--impl", "all", "-z", "--json", "--max", "8", *QUICK)
with open(sys.argv[2]) as f:
    c_json = json.load(f)
if root:
    doc = json.loads(out)
    expect(set(doc) == set(c_json), "JSON keys %s, hpml bench: %s" % (set(doc), set(c_json)))
    expect(set(doc["results"][0]) <= set(c_json["results"][0]) | {"percentiles_us"},
           "JSON row keys %s, hpml bench: %s" % (set(doc["results"][0]), set(c_json["results"][0])))
    import jsonschema
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                           "hpml.schema.json")) as f:
        schema = json.load(f)
    errs = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]
    expect(not errs, "the JSON record does not follow docs/hpml.schema.json: %s" % errs[:3])
    expect(set(doc["results"][0]) - {"percentiles_us"} <= set(c_json["results"][0]) | {"min_us"},
           "JSON row keys %s" % set(doc["results"][0]))
    expect(doc["implementations"][:2] == ["mpi4py", "hpml"] and
           "hpml:ring" in doc["implementations"], "JSON impls %s" % doc["implementations"])
    expect(set(doc["results"][0]["percentiles_us"]) == {"p50", "p90", "p99"}, "percentiles")
# i8 goes to MPI as hpml bench's default (OMB's mpi_char) does: the same MPI datatype.
code, out, _ = run("allreduce", "-T", "i8", "--json", "--max", "8", *QUICK)
if root:
    py_type = json.loads(out)["mpi_datatype"] if code == 0 else None
    expect(c_json["dtype"] == "i8" and py_type is not None and
           py_type.replace(".", "_") == c_json["mpi_datatype"],
           "i8: Python passes %s, hpml bench %s" % (py_type, c_json["mpi_datatype"]))

# Point-to-point (mpi4py) and cases hpml lacks.
for name, title, metric in (("latency", "OMB Python MPI Latency Test", "Latency (us)"),
                            ("multi_lat", "OMB Python MPI Multi Latency Test", "Latency (us)"),
                            ("bw", "OMB-Py MPI Bandwidth Test", "Bandwidth (MB/s)"),
                            ("bibw", "OMB-Py MPI Bi-Directional Bandwidth Test",
                             "Bandwidth (MB/s)")):
    code, out, err = run(name, "--max", "1024", "--iterations", "4", "--skip", "1",
                         "--window", "4")
    if root:
        lines = out.splitlines()
        expect(code == 0 and lines[0] == "# " + title and lines[1] == "# %-8s%18s" %
               ("Size (B)", metric), "%s: %s %r %s" % (name, code, lines[:2], err))
        expect(all(float(x.split()[1]) >= 0 for x in lines[2:]) and float(lines[-1].split()[1]) > 0
               and len(lines) >= 12,
               "%s: rows %r" % (name, lines[2:]))
code, out, err = run("gather", "--impl", "all", "--max", "4", *QUICK)
expect(code == 0 and (not root or "hpml has no gather: mpi4py only" in err), "gather all")
code, out, err = run("scatter", "--impl", "all", "-c", "--max", "4", *QUICK)
expect(code == 0 and (not root or "# hpml has no scatter: mpi4py only" in out), "scatter all")
code, out, _ = run("allreduce", "--pickle", "--buffer", "numpy", "--max", "64", *QUICK)
expect(code == 0, "--pickle")

# The ML workloads: hpml's estimators against scikit-learn, timed, with their agreement.
LIMITS = {"kmeans": {"labels_equal_pct": (100, 100), "max_centre_diff": (0, 1e-9)},
          "knn": {"indices_equal_pct": (100, 100), "max_distance_diff": (0, 1e-9)},
          "pca": {"max_component_diff": (0, 1e-9)},
          "linreg": {"max_coef_diff": (0, 1e-9)},
          "ridge": {"max_coef_diff": (0, 1e-9)},
          "logreg": {"max_coef_diff": (0, 1e-2), "predictions_equal_pct": (99, 100)}}
for name, limits in LIMITS.items():
    code, out, err = run(name, "--rows", "600", "--cols", "6", "--repeat", "1", "--json")
    if root:
        doc = json.loads(out)
        expect(code == 0 and doc["benchmark"] == name and doc["rows"] == 600 and
               doc["hpml_s"] > 0 and doc["sklearn_s"] > 0 and doc["speedup"] > 0,
               "%s: %s %r %s" % (name, code, out, err))
        for key, (lo, hi) in limits.items():
            expect(lo <= doc["agreement"][key] <= hi, "%s: %s = %s" % (name, key,
                                                                      doc["agreement"][key]))
code, out, _ = run("pca", "--rows", "300", "--cols", "5", "--repeat", "1")
expect(not root or (out.startswith("# hpml Python PCA Test") and
                    re.match(r"2 +\d+\.\d{4} +\d+\.\d{4} +\d+\.\d\d  max_component_diff=",
                             out.splitlines()[2])), "pca text %r" % out)

# Bad options: exit 2 and one message, on every rank alike.
for argv, msg in (
    (["nosuch"], "unknown benchmark 'nosuch'"),
    (["allreduce", "--buffer", "cupy"], "GPU memory: hpml is CPU-only"),
    (["allreduce", "-T", "u32"], "-T: unsupported dtype 'u32'"),
    (["allreduce", "--impl", "hpml:bruck"], "'hpml:bruck' is not"),
    (["latency", "--impl", "hpml"], "hpml has no latency benchmark"),
    (["allreduce", "--impl", "hpml", "--pickle"], "--pickle is for mpi4py"),
    (["allreduce", "--min", "64", "--max", "8"], "--min <= --max"),
    (["reduce", "--bind"], "only allreduce and bcast"),
    (["allreduce", "-z", "120"], "percentiles must be in"),
    (["allreduce", "--align", "48"], "--align must be a power of two (or 0), not 48"),
    ([], "which benchmark?"),
    (["kmeans", "--rows", "1"], "need --rows >= ranks"),
    (["allreduce", "--min", "abc"], "argument --min: invalid int value: 'abc'"),
):
    code, out, err = run(*argv)
    expect(code == 2 and (msg in err if root else err == "") and out == "",
           "%s: exit %s, stderr %r" % (argv, code, err))

bad = world.allreduce(len(failures))
if root:
    print("\n".join(failures) if failures else "hpml.bench: all checks passed")
sys.exit(1 if bad else 0)
