#!/usr/bin/env bash
# Write the base seed files of tests/fuzz/corpus/<name>/ (valid and invalid files of every
# kind each reader takes), with NumPy and the hpml binary. The committed corpus also
# holds the minimised inputs of past findings (named after what they found), which this
# script leaves alone. Run from anywhere; HPML defaults to build/openmpi/bin/hpml.
#
#   tests/fuzz/make-corpus.sh
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
c=$repo/tests/fuzz/corpus
HPML=${HPML:-$repo/build/openmpi/bin/hpml}
mkdir -p "$c"/{npy,idx,csv,spec,model,tuning,checkpoint}

/usr/bin/python3 - "$c" <<'EOF'
import gzip, struct, sys
import numpy as np

c = sys.argv[1]
rng = np.random.default_rng(20)

def save(name, a, **kw):
    np.save(f"{c}/npy/{name}", a, **kw)

# .npy: every dtype, both byte orders, Fortran order, 0-D to 4-D, v2/v3 headers.
save("f4_2d.npy", rng.random((3, 4), dtype=np.float32))
save("f8_1d.npy", np.array([0.5, -1.0, np.nan, np.inf, 1e300]))
save("i2_be.npy", np.arange(6, dtype=">i2").reshape(2, 3))
save("u8_fortran_3d.npy", np.asfortranarray(np.arange(24, dtype=np.uint8).reshape(2, 3, 4)))
save("bool.npy", np.array([[True, False], [False, True]]))
save("f2.npy", np.array([1.5, -2.0, 65504.0], dtype=np.float16))
save("i8_0d.npy", np.array(7, dtype=np.int64))
save("u8_4d.npy", np.arange(16, dtype=">u8").reshape(2, 2, 2, 2))
save("empty.npy", np.zeros((0, 5), np.float32))
save("i1_labels.npy", np.array([0, 3, 1, 2], dtype=np.int8))
with open(f"{c}/npy/v2.npy", "wb") as f:
    np.lib.format.write_array(f, np.arange(4, dtype=np.int32), version=(2, 0))
with open(f"{c}/npy/v3.npy", "wb") as f:
    np.lib.format.write_array(f, np.arange(3, dtype=np.uint32), version=(3, 0))
good = open(f"{c}/npy/f4_2d.npy", "rb").read()
open(f"{c}/npy/bad_truncated.npy", "wb").write(good[:-5])
open(f"{c}/npy/bad_magic.npy", "wb").write(b"\x93NUMPZ" + good[6:])
open(f"{c}/npy/bad_key.npy", "wb").write(good.replace(b"'shape'", b"'shapf'"))
save("bad_complex.npy", np.array([1 + 2j], dtype=np.complex64))
save("bad_structured.npy", np.zeros(2, dtype=[("a", "<i4"), ("b", "<f4")]))

# IDX: the MNIST family's types, plain and gzip, and broken headers.
def idx(name, a, code, gz=False):
    data = bytes([0, 0, code, a.ndim]) + b"".join(struct.pack(">I", d) for d in a.shape)
    data += a.astype(a.dtype.newbyteorder(">")).tobytes()
    open(f"{c}/idx/{name}", "wb").write(gzip.compress(data, mtime=0) if gz else data)
    return data

img = idx("images-idx3-ubyte", rng.integers(0, 256, (2, 3, 3), dtype=np.uint8), 0x08)
idx("labels-idx1-ubyte", np.array([1, 0, 9], dtype=np.uint8), 0x08)
idx("i8-idx2", np.array([[-1, 2], [3, -4]], dtype=np.int8), 0x09)
idx("i16-idx1", np.array([-300, 300], dtype=np.int16), 0x0B)
idx("i32-idx2", np.arange(6, dtype=np.int32).reshape(3, 2), 0x0C)
idx("f32-idx2", rng.random((2, 2), dtype=np.float32), 0x0D)
idx("f64-idx1", np.array([np.nan, 1.25, -np.inf]), 0x0E)
idx("images-idx3-ubyte.gz", rng.integers(0, 256, (2, 3, 3), dtype=np.uint8), 0x08, gz=True)
idx("labels-idx1-ubyte.gz", np.array([4, 2], dtype=np.uint8), 0x08, gz=True)
open(f"{c}/idx/bad_truncated-ubyte", "wb").write(img[:-3])
open(f"{c}/idx/bad_type-ubyte", "wb").write(bytes([0, 0, 0x0A, 1, 0, 0, 0, 1, 7]))
open(f"{c}/idx/bad_ndim-ubyte", "wb").write(bytes([0, 0, 0x08, 200]) + bytes(8))
z = gzip.compress(img, mtime=0)
open(f"{c}/idx/bad_gz_trailer.gz", "wb").write(z[:-4] + struct.pack("<I", len(img) + 1))
open(f"{c}/idx/bad_gz_truncated.gz", "wb").write(z[: len(z) // 2])

# CSV: the dialects the reader detects, and malformed files.
def csv(name, text):
    open(f"{c}/csv/{name}", "wb").write(text if isinstance(text, bytes) else text.encode())

csv("header.csv", "x1,x2,label\n1.5,-2,0\n3e4,0x1p-3,1\n")
np.savetxt(f"{c}/csv/savetxt.csv", rng.random((3, 3)))
csv("semicolon.csv", "a;b\n1;2\n3;4\n")
csv("tab.csv", "1\t2\t3\n4\t5\t6\n")
csv("quoted.csv", '"a","b"\n"1","2"\n 3 , "4" \n')
csv("bom_crlf.csv", "\ufeffh1,h2\r\n1,2\r\n\r\n3,4\r\n")
csv("comments.csv", "# made by hand\n\n1,2\n# middle\n3,4\n\n")
csv("nonfinite.csv", "x,nan\n1,nan\n-inf,Infinity\n1e999,2\n")
csv("int64.csv", "9007199254740993,-9223372036854775808\n1,2\n")
csv("unnamed_first.csv", ",a,b\n0,1,2\n")
csv("long_field.csv", "0." + "1" * 200 + "\n0.5\n0.25\n")
csv("bad_unterminated.csv", '1,2\n3,"4\n')
csv("bad_ragged.csv", "1,2,3\n4,5\n")
csv("bad_word.csv", "1,2\n3,abc\n")
csv("bad_empty_field.csv", "1,,3\n")
csv("bad_nul.csv", b"1,2\n\x003,4\n")
csv("empty.csv", "")
# More rows than one scan checkpoint (1024), with blank and comment lines between them.
csv("checkpoints.csv", "a,b\n" + "".join(
    f"{i % 10},{i % 7}\n" + ("\n" if i % 300 == 0 else "") + ("# c\n" if i % 500 == 7 else "")
    for i in range(2100)))

# Regressions: inputs of fixed loader defects (the fuzz targets' minimised findings are
# committed as crash_* and not made here).
csv("regress_long_header.csv", "0." + "1" * 126 + "\n0.5\n0.25\n")
csv("regress_quote_text.csv", '1,"2"x\n')
csv("regress_nul_data.csv", b"1,2\n3,4\x00\n")
csv("regress_claim.csv", ",".join(["1"] * 400) + "\n" + "1\n" * 300)
open(f"{c}/idx/regress_gz_claim.gz", "wb").write(
    gzip.compress(bytes([0, 0, 8, 2, 0, 1, 0, 0, 0, 1, 0, 0]), mtime=0))
EOF

# Model specs: presets and spec text with every layer word and option.
spec() { printf '%s' "$2" >"$c/spec/$1"; }
spec preset_lenet lenet
spec preset_mlp mlp
spec preset_cnn cnn
spec preset_small_cnn small-cnn
spec all_words 'conv 6 5x5 s2 pad same relu | pool 2 s1 | flatten | dropout 0.5 | dense 10 relu | relu | fc 3'
spec separators "$(printf 'conv 4 3 pad1\n\nmaxpool 2; linear 10\n')"
spec pad_forms 'conv 2 3x3 pad 1 | conv 2 3 padsame | conv 2 3 same s2 | dense 4'
spec bad_kernel 'conv 8 3x5 | dense 10'
spec bad_window 'pool 64 | dense 10'
spec bad_dropout 'dense 10 | dropout 1.5'
spec bad_trailing 'dense 10 |'
spec bad_word 'dense 10 | softmax'
spec regress_pad_overflow 'conv 1 1 pad999999999 | conv 1 1 pad999999999'
spec regress_flatten_overflow 'conv 999999999 1 | flatten'
spec regress_params 'dense 999999999 | dense 999999999 | dense 2'
spec regress_canonical "$(for i in $(seq 40); do printf 'conv 1 1|'; done)dropout 0.9999999 | dense 3"

# Tuning files as `hpml tune` writes them, and broken ones.
tune() { printf '%s' "$2" >"$c/tuning/$1"; }
tune tuned.txt "hpml-tuning 1
# written by hpml tune: 2 ranks, 1 node(s)
# collective  ranks nodes max_bytes algorithm
allreduce      2 1 8192 recursive_doubling
allreduce      2 1 inf shm
bcast          2 1 inf binomial
reduce         2 1 32K mpi
reduce         2 1 inf shm
allgather      2 1 inf bruck
reduce_scatter 2 1 inf ring
"
tune wildcards.txt "hpml-tuning 1
allreduce * * 4096 rd
allreduce 4 * 1M rabenseifner
allreduce * 2 1G hier
allreduce * * inf Ring   # case and aliases
bcast 3 * 64k scatter-allgather
bcast * * inf chain
"
tune bad_header.txt "hpml-tuning 2
allreduce * * inf ring
"
tune bad_algo.txt "hpml-tuning 1
bcast * * inf ring
"
tune bad_fields.txt "hpml-tuning 1
allreduce * inf ring
"
tune bad_size.txt "hpml-tuning 1
allreduce 0 * 99999999999999999999G ring
"
tune empty.txt ""

# Model files saved by `hpml train --save` (small models, so each file is a few KB), and
# damaged copies.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$HPML" train --model 'pool 4 | dense 10' --epochs 1 --train-limit 256 --test-limit 64 \
    --save "$c/model/pool_dense.hpml" --no-progress >/dev/null
"$HPML" train --model 'conv 2 3x3 relu | pool 4 | dropout 0.25 | dense 10' --epochs 1 \
    --train-limit 256 --test-limit 64 --no-normalize --save "$c/model/conv.hpml" \
    --no-progress >/dev/null
head -c 100 "$c/model/conv.hpml" >"$c/model/bad_truncated.hpml"
/usr/bin/python3 - "$c/model" <<'EOF'
import struct, sys, zlib
d = sys.argv[1]
b = bytearray(open(f"{d}/pool_dense.hpml", "rb").read())
b[60] ^= 0xFF  # a parameter byte: the CRC no longer matches
open(f"{d}/bad_crc.hpml", "wb").write(b)

# Regressions, each with a valid CRC: "HPMLMODL" u32 version, i32 c h w, f32 mean std,
# u32 spec length, spec, u64 nparams, nparams f32, u32 CRC32.
def model(name, shape, mean, std, spec, np_, params):
    body = b"HPMLMODL" + struct.pack("<I3iffI", 1, *shape, mean, std, len(spec)) + spec
    body += struct.pack("<Q", np_) + struct.pack(f"<{len(params)}f", *params)
    open(f"{d}/{name}", "wb").write(body + struct.pack("<I", zlib.crc32(body)))
w = [0.5, -1.0, 2.0, 0.25]
model("regress_nan_param.hpml", (1, 1, 3), 0, 1, b"dense 1", 4, [0.5, float("nan"), 2, 0.25])
model("regress_inf_mean.hpml", (1, 1, 3), float("inf"), 1, b"dense 1", 4, w)
model("regress_shape_wraps.hpml", (4194304, 2097152, 2097152), 0, 1, b"dense 1", 1, w[:1])
model("regress_spec_claim.hpml", (1, 28, 28), 0, 1, b"dense 999999999", 4, w)
model("regress_bad_spec.hpml", (1, 1, 3), 0, 1, b"dense 1 | bogus", 4, w)

# .npz models (src/nn/npz_model.c, src/io/npz.c) as NumPy writes them: stored, deflated
# (ZIP64 extra fields), and a bare state_dict (no spec: refused).
import numpy as np
r = np.random.default_rng(5)
sd = {"0.weight": r.standard_normal((2, 1, 3, 3)).astype(np.float32),
      "0.bias": np.float32([0.1, -0.2]),
      "4.weight": r.standard_normal((3, 8)).astype(np.float32), "4.bias": np.zeros(3, np.float32)}
meta = dict(hpml_spec=np.str_("conv 2 3x3 pad1 relu | pool 2 | dense 3"),
            hpml_input_shape=np.int32([1, 4, 4]), hpml_mean=np.float32(0.5),
            hpml_std=np.float32(0.25))
np.savez(f"{d}/npz_stored.npz", **sd, **meta)
np.savez_compressed(f"{d}/npz_deflate.npz", **sd, **meta)
np.savez(f"{d}/npz_statedict.npz", **sd)
# The same archive with ZIP64 end records (as zipfile writes past 65535 members or 4 GiB).
raw = open(f"{d}/npz_deflate.npz", "rb").read()
e = raw.rfind(b"PK\x05\x06")
_, _, _, nd, n, cdsize, cdoff, _ = struct.unpack("<IHHHHIIH", raw[e:e + 22])
z64 = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, nd, n, cdsize, cdoff)
loc = struct.pack("<IIQI", 0x07064B50, 0, e, 1)
end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
open(f"{d}/npz_zip64_end.npz", "wb").write(raw[:e] + z64 + loc + end)
EOF
# Checkpoints (fuzz_checkpoint.c's model, 'dense 3 relu | dense 2' on 1x2x2 samples): SGD
# with momentum and Adam, from one rank and from two (every rank's sums), mid-epoch, and
# damaged copies.
mkdir -p "$c/checkpoint"
/usr/bin/python3 - "$tmp" <<'EOF'
import sys
import numpy as np
r = np.random.default_rng(3)
np.save(f"{sys.argv[1]}/x.npy", r.integers(0, 255, (40, 2, 2), dtype=np.uint8))
np.save(f"{sys.argv[1]}/y.npy", r.integers(0, 2, 40).astype(np.int64))
EOF
ck() { # name ranks optimizer
    rm -rf "$tmp/ck"
    mpirun.openmpi --allow-run-as-root --oversubscribe -np "$2" "$HPML" train \
        --model 'dense 3 relu | dense 2' --train-images "$tmp/x.npy" --train-labels "$tmp/y.npy" \
        --batch 8 --epochs 2 --optimizer "$3" --checkpoint "$tmp/ck" --checkpoint-every 3 \
        --max-steps 3 --no-progress >/dev/null
    cp "$tmp/ck/checkpoint.hpml" "$c/checkpoint/$1"
}
ck sgd_1rank.ckpt 1 sgd
ck sgd_2ranks.ckpt 2 sgd
ck adam_2ranks.ckpt 2 adam
head -c 60 "$c/checkpoint/sgd_1rank.ckpt" >"$c/checkpoint/bad_truncated.ckpt"
/usr/bin/python3 - "$c/checkpoint" <<'EOF'
import sys
d = sys.argv[1]
b = bytearray(open(f"{d}/sgd_2ranks.ckpt", "rb").read())
b[40] ^= 0xFF  # inside the header: the CRC no longer matches
open(f"{d}/bad_crc.ckpt", "wb").write(b)
EOF
du -sh "$c"
