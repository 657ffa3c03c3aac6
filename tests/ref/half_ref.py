#!/usr/bin/python3
"""Reference data for tests/unit/test_half.c, computed independently of hpml.

    /usr/bin/python3 tests/ref/half_ref.py OUTFILE

fp16 comes from NumPy's float16 (round to nearest even). NumPy has no bfloat16, so
bf16 is decided here arithmetically: for each f32 input take the two neighbouring
bf16 values, measure both distances in float64 (exact for these magnitudes) and keep
the nearer, ties to the even mantissa. Nothing here works on rounding bit tricks.

OUTFILE layout, all little-endian uint32:
  "HREF" magic (0x46455248), then four sections, each a count N followed by data:
  1. f16 -> f32: N = 65536 f32 bit patterns, index = f16 bits (NumPy's astype(float32))
  2. f32 -> f16: N records of (f32 bits, expected f16 bits); no NaN inputs
  3. bf16 -> f32: N = 65536 f32 bit patterns, value built as m * 2**e in float64
  4. f32 -> bf16: N records of (f32 bits, expected bf16 bits); no NaN inputs
"""
import struct
import sys

import numpy as np

MAGIC = 0x46455248


def f32_from_bits(u):
    return np.asarray(u, dtype=np.uint32).view(np.float32)


def f32_neighbours(x32):
    """x32 (float32 array) -> (next below, next above) as float32, towards -inf/+inf."""
    return (np.nextafter(x32, np.float32(-np.inf)), np.nextafter(x32, np.float32(np.inf)))


def f16_section():
    h = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    return h.view(np.float16).astype(np.float32).view(np.uint32)


def f32_to_f16_cases():
    """Round trips, midpoints and midpoints +-1 f32 ulp, boundaries, random values."""
    h = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    v = h.view(np.float16)
    finite = np.isfinite(v)
    xs = [v[finite].astype(np.float32), np.array([np.inf, -np.inf], np.float32)]
    # Adjacent positive finite f16 pairs (bits k, k+1 for k in 0 .. 0x7bfe) plus the
    # pair (65504, 65536) where 65536 stands for overflow to Inf.
    lo = np.arange(0, 0x7bff, dtype=np.uint32).astype(np.uint16).view(np.float16)
    lo64 = lo.astype(np.float64)
    hi64 = np.nextafter(lo, np.float16(np.inf)).astype(np.float64)
    lo64 = np.append(lo64, 65504.0)
    hi64 = np.append(hi64, 65536.0)
    mid = ((lo64 + hi64) / 2).astype(np.float32)  # exact: 12 significant bits
    assert np.all(mid.astype(np.float64) == (lo64 + hi64) / 2)
    below, above = f32_neighbours(mid)
    for m in (mid, below, above):
        xs.append(m)
        xs.append(-m)
    # Overflow and underflow boundaries, spelled out even though the midpoints cover them.
    special = np.array([65504, 65519, 65520, 65536, 1e5, 3.4e38, 2.0**-24, 2.0**-25,
                        3 * 2.0**-26, 2.0**-26, 2.0**-14, 2.0**-14 - 2.0**-25, 1e-30,
                        np.float32(1.4e-45), 0.0], np.float32)
    xs += [special, -special, *f32_neighbours(special), *f32_neighbours(-special)]
    # Random f32 bit patterns (fixed seed), NaNs dropped.
    rnd = f32_from_bits(np.random.default_rng(12345).integers(0, 2**32, 200000,
                                                              dtype=np.uint64).astype(np.uint32))
    xs.append(rnd)
    x = np.concatenate(xs).astype(np.float32)
    x = x[~np.isnan(x)]
    with np.errstate(over="ignore"):
        y = x.astype(np.float16)
    return np.stack([x.view(np.uint32), y.view(np.uint16).astype(np.uint32)], axis=1)


def bf16_values(b):
    """bf16 bit patterns (uint32 array < 65536) -> float64 values, from the fields."""
    b = b.astype(np.int64)
    sign = np.where(b & 0x8000, -1.0, 1.0)
    e = (b >> 7) & 0xff
    m = b & 0x7f
    mag = np.where(e == 0, m * 2.0**-133, (m + 128) * np.exp2(e.astype(np.float64) - 134))
    mag = np.where(e == 0xff, np.where(m == 0, np.inf, np.nan), mag)
    return sign * mag


def bf16_section():
    b = np.arange(65536, dtype=np.uint32)
    v = bf16_values(b)
    out = v.astype(np.float32).view(np.uint32).copy()
    nan = np.isnan(v)
    # Expected NaN: sign and payload kept, quiet bit set (the documented contract).
    out[nan] = (b[nan] << 16) | 0x00400000
    return out


def bf16_round(x):
    """f32 array (no NaN) -> bf16 bits by nearest-value search in float64."""
    x64 = x.astype(np.float64)
    mag = np.abs(x64)
    sign = np.signbit(x).astype(np.uint32) << 15
    # Candidates: the largest bf16 magnitude <= |x| (found by searching the sorted
    # table of all non-negative bf16 values) and the next one up.
    table = bf16_values(np.arange(0, 0x7f81, dtype=np.uint32))  # 0 .. +Inf
    table[-1] = 2.0**128  # Inf: RNE treats it as the next value above the largest finite
    k = np.searchsorted(table, mag, side="right") - 1
    k = np.clip(k, 0, 0x7f80)
    lo = table[k]
    hi = table[np.minimum(k + 1, 0x7f80)]
    dlo = mag - lo
    dhi = hi - mag
    up = (dhi < dlo) | ((dhi == dlo) & (k % 2 == 1))
    up &= k < 0x7f80
    res = np.where(up, k + 1, k).astype(np.uint32)
    res = np.where(np.isinf(mag), 0x7f80, res)
    return res | sign


def f32_to_bf16_cases():
    b = np.arange(0, 0x7f80, dtype=np.uint32)  # non-negative finite bf16
    lo = bf16_values(b)
    hi = bf16_values(b + 1)
    hi[-1] = 2.0**128  # above the largest finite value
    mid = ((lo + hi) / 2).astype(np.float32)
    assert np.all(mid.astype(np.float64) == (lo + hi) / 2)
    xs = [bf16_values(np.arange(65536, dtype=np.uint32)).astype(np.float32)]
    below, above = f32_neighbours(mid)
    for m in (mid, below, above):
        xs.append(m)
        xs.append(-m)
    rnd = f32_from_bits(np.random.default_rng(54321).integers(0, 2**32, 200000,
                                                              dtype=np.uint64).astype(np.uint32))
    xs.append(rnd)
    x = np.concatenate(xs).astype(np.float32)
    x = x[~np.isnan(x)]
    return np.stack([x.view(np.uint32), bf16_round(x)], axis=1)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: half_ref.py OUTFILE")
    sections = [f16_section(), f32_to_f16_cases(), bf16_section(), f32_to_bf16_cases()]
    with open(sys.argv[1], "wb") as f:
        f.write(struct.pack("<I", MAGIC))
        for s in sections:
            s = np.ascontiguousarray(s, dtype="<u4")
            n = s.shape[0]
            f.write(struct.pack("<I", n))
            f.write(s.tobytes())


if __name__ == "__main__":
    main()
