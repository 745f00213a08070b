#!/usr/bin/env python3
"""Independent reference for how Kubernetes reads a quantity string, written from
kubernetes/apimachinery pkg/api/resource/quantity.go and suffix.go (ParseQuantity, the
suffixer, Value(), MilliValue()), with exact rational arithmetic (fractions.Fraction).
It shares no code with src/engine/resource.c; tests/unit/test_resource.c's k8s_grid was
computed with it.

  python3 tests/unit/quantity_ref.py grid  # the grid, from a quantity_test.go on stdin
  python3 tests/unit/quantity_ref.py one memory 1.1Gi

kq(s, unit) returns the canonical integer (unit 'milli' for cpu, 'one' for bytes and
counts), or 'ERR' (not a quantity), 'NEG' (negative, which kubequota refuses) or 'BIG'
(beyond int64, where Kubernetes' own accessors overflow and kubequota says too large).
"""
import math
import re
import sys
from fractions import Fraction

SUFFIXES = {'': (10, 0), 'n': (10, -9), 'u': (10, -6), 'm': (10, -3), 'k': (10, 3), 'M': (10, 6),
            'G': (10, 9), 'T': (10, 12), 'P': (10, 15), 'E': (10, 18), 'Ki': (2, 10), 'Mi': (2, 20),
            'Gi': (2, 30), 'Ti': (2, 40), 'Pi': (2, 50), 'Ei': (2, 60)}
MAX = 2**63 - 1


def kq(s, unit):
    s = s.strip(' \t\n\v\f\r')  # Quantity.UnmarshalJSON trims (ASCII part of unicode.IsSpace)
    if s == '':
        return 'ERR'
    m = re.fullmatch(r'([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[+-]?[0-9]*)', s)
    if not m:
        return 'ERR'
    sign, ip, fp, suf = m.group(1), m.group(2), m.group(3) or '', m.group(4)
    if suf in SUFFIXES:
        base, exp = SUFFIXES[suf]
        fmt = 'bin' if base == 2 else 'dec'
    elif len(suf) > 1 and suf[0] in 'eE' and re.fullmatch(r'[+-]?[0-9]+', suf[1:]):
        e = int(suf[1:])  # strconv.ParseInt(..., 10, 64), then int32(...)
        if not -2**63 <= e < 2**63:
            return 'ERR'
        e &= 0xffffffff
        if e >= 2**31:
            e -= 2**32
        base, exp, fmt = 10, e, 'exp'
    else:
        return 'ERR'
    if ip == '' and fp == '':
        # no digits: zero, unless the scale is below nano (inf.Dec then wants a digit)
        return 'ERR' if fmt == 'exp' and exp < -9 else 0
    x = Fraction(int(ip + fp), 10**len(fp))
    if x == 0:
        return 0
    if sign == '-':
        return 'NEG'
    if exp - len(fp) < -(2**31 - 1):
        return 'ERR'  # kubequota: Kubernetes' int32 scale arithmetic wraps here
    if base == 10 and exp > 400:
        return 'BIG'
    if base == 10 and exp < -400 - len(ip + fp):
        return 1  # far below a nano: rounded up to 1n, then to one unit
    x = x * (Fraction(10)**exp if base == 10 else 2**exp)
    x = Fraction(math.ceil(x * 10**9), 10**9)  # ParseQuantity rounds up to nano
    if fmt == 'bin' and x > MAX:
        x = Fraction(MAX)  # ... and caps a BinarySI amount
    v = math.ceil(x * (1000 if unit == 'milli' else 1))  # MilliValue() / Value()
    return v if v <= MAX else 'BIG'


def grid(src):
    def section(start, end):
        a = src.index(start)
        return src[a:src.index(end, a)]
    ins = re.findall(r'\{"([^"]*)", (?:decQuantity|Quantity\{)',
                     section('func TestQuantityParse(', 'invalid := []string'))
    ins += re.findall(r'\{"([^"]*)", "', section('func TestQuantityParseEmit(', 'for _, item := range table'))
    ins += re.findall(r'\{input: "([^"-][^"]*)"', section('func TestParseQuantity(', 'for _, tt := range tests'))
    seen = set()
    for s in ins:
        if s in seen:
            continue
        seen.add(s)
        c = ['Q_BIG' if v == 'BIG' else 'INT64_C(%d)' % v for v in (kq(s, 'one'), kq(s, 'milli'))]
        print('    {"%s", %s, %s},' % (s, c[0], c[1]))


if __name__ == '__main__':
    if sys.argv[1] == 'grid':
        grid(sys.stdin.read())
    else:
        print(kq(sys.argv[3], 'milli' if sys.argv[2] in ('cpu', 'vcore') else 'one'))
