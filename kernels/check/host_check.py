#!/usr/bin/env python3
"""Drives host_check.cpp with random field elements and points and checks every answer against
plain Python integers. Usage: python3 kernels/check/host_check.py /tmp/host_check"""
import random, subprocess, sys

P = 0x1a0111ea397fe69a4b1ba7b6434bacd764774b84f38512bf6730d2a0f6b0f6241eabfffeb153ffffb9feffffffffaaab
R = 0x73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001
RP, RR = 2**384 % P, 2**256 % R

class F2:
    def __init__(s, a, b=0): s.a, s.b = a % P, b % P
    def __add__(s, o): o = f2(o); return F2(s.a + o.a, s.b + o.b)
    def __sub__(s, o): o = f2(o); return F2(s.a - o.a, s.b - o.b)
    def __mul__(s, o): o = f2(o); return F2(s.a * o.a - s.b * o.b, s.a * o.b + s.b * o.a)
    def __neg__(s): return F2(-s.a, -s.b)
    def __eq__(s, o): o = f2(o); return s.a == o.a and s.b == o.b
    def inv(s): d = pow(s.a * s.a + s.b * s.b, -1, P); return F2(s.a * d, -s.b * d)
def f2(x): return x if isinstance(x, F2) else F2(x)

def inv(x): return x.inv() if isinstance(x, F2) else pow(x, -1, P)
def mod(x): return x if isinstance(x, F2) else x % P

def aff_add(p, q):
    if p is None: return q
    if q is None: return p
    (x1, y1), (x2, y2) = p, q
    if mod(x1 - x2) == 0 or (isinstance(x1, F2) and x1 == x2):
        if mod(y1 + y2) == 0 or (isinstance(y1, F2) and (y1 + y2) == F2(0)): return None
        l = mod(x1 * x1 * 3 * inv(mod(y1 * 2)))
    else:
        l = mod((y2 - y1) * inv(mod(x2 - x1)))
    x3 = mod(l * l - x1 - x2)
    return (x3, mod(l * (x1 - x3) - y1))

def mul(p, k):
    acc = None
    while k:
        if k & 1: acc = aff_add(acc, p)
        p = aff_add(p, p); k >>= 1
    return acc

G1 = (0x17f1d3a73197d7942695638c4fa9ac0fc3688c4f9774b905a14e3a3f171bac586c55e83ff97a1aeffb3af00adb22c6bb,
      0x08b3f481e3aaa0f1a09e30ed741d8ae4fcf5e095d5d00af600db18cb2c04b3edd03cc744a2888ae40caa232946c5e7e1)
G2 = (F2(0x024aa2b2f08f0a91260805272dc51051c6e47ad4fa403b02b4510b647ae3d1770bac0326a805bbefd48056c8c121bdb8,
         0x13e02b6052719f607dacd3a088274f65596bd0d09920b61ab5da61bbdc7f5049334cf11213945d57e5ac7d055d042b7e),
      F2(0x0ce5d527727d6e118cc9cdc6da2e351aadfd9baa8cbdd3a76d429a695160d12c923ac9cc3baca289e193548608b82801,
         0x0606c4a02ea734cc32acd2b02bc28b99cb3e287e85a763af267492ab572e99ab3f370d275cec1da1aaa9075ff05f79be))
assert (G1[1] ** 2 - G1[0] ** 3 - 4) % P == 0
assert G2[1] * G2[1] == G2[0] * G2[0] * G2[0] + F2(4, 4)

def hx(v, m=P): return '%x' % v
def enc(v):  # Montgomery form, as hex
    if isinstance(v, F2): return enc(v.a) + ' ' + enc(v.b)
    return hx(v * RP % P)
def dec(words, is2):
    ri = pow(RP, -1, P)
    if is2: return F2(int(words[0], 16) * ri, int(words[1], 16) * ri), words[2:]
    return int(words[0], 16) * ri % P, words[1:]

def to_jac(pt, is2):
    if pt is None: return (F2(1) if is2 else 1, F2(1) if is2 else 1, F2(0) if is2 else 0)
    z = F2(random.randrange(1, P), random.randrange(P)) if is2 else random.randrange(1, P)
    z2 = mod(z * z)
    return (mod(pt[0] * z2), mod(pt[1] * z2 * z), z)
def from_jac(words, is2):
    x, words = dec(words, is2); y, words = dec(words, is2); z, words = dec(words, is2)
    if (z == F2(0)) if is2 else z == 0: return None
    zi = inv(z); zi2 = mod(zi * zi)
    return (mod(x * zi2), mod(y * zi2 * zi))

proc = subprocess.Popen([sys.argv[1]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
def ask(line):
    proc.stdin.write(line + '\n'); proc.stdin.flush()
    return proc.stdout.readline().split()

fails = 0
def check(name, ok):
    global fails
    if not ok: fails += 1; print('FAIL', name)

edge = [0, 1, 2, P - 1, P - 2, 2**381 - 1 - P if 2**381 > P else 5]
for i in range(300):
    a = random.randrange(P) if i >= 36 else edge[i % 6]
    b = random.randrange(P) if i >= 36 else edge[i // 6]
    check('fpmul', dec(ask('fpmul %s %s' % (enc(a), enc(b))), False)[0] == a * b % P)
    check('fpadd', dec(ask('fpadd %s %s' % (enc(a), enc(b))), False)[0] == (a + b) % P)
    check('fpsub', dec(ask('fpsub %s %s' % (enc(a), enc(b))), False)[0] == (a - b) % P)
    check('fpneg', dec(ask('fpneg %s' % enc(a)), False)[0] == (-a) % P)
    ra, rb = a % R, b % R
    er = lambda v: hx(v * RR % R)
    got = int(ask('frmul %s %s' % (er(ra), er(rb)))[0], 16)
    check('frmul', got == ra * rb * RR % R)
    check('fradd', int(ask('fradd %s %s' % (er(ra), er(rb)))[0], 16) == (ra + rb) * RR % R)
    check('frsub', int(ask('frsub %s %s' % (er(ra), er(rb)))[0], 16) == (ra - rb) * RR % R)
    check('frfrom', int(ask('frfrom %s' % er(ra))[0], 16) == ra)
    x, y = F2(a, b), F2(random.randrange(P), random.randrange(P))
    check('fp2mul', dec(ask('fp2mul %s %s' % (enc(x), enc(y))), True)[0] == x * y)
    check('fp2sqr', dec(ask('fp2sqr %s' % enc(x)), True)[0] == x * x)

def jstr(j): return ' '.join(enc(c) for c in j)
def astr(p, is2):
    if p is None: return ' '.join(['0'] * (4 if is2 else 2))
    return enc(p[0]) + ' ' + enc(p[1])
for g, tag, is2, reps in ((G1, 'g1', False, 20), (G2, 'g2', True, 8)):
    for i in range(reps):
        p = mul(g, random.randrange(1, R)); q = mul(g, random.randrange(1, R))
        negp = (p[0], mod(-p[1]))
        cases = [(p, q), (p, p), (p, negp), (None, q), (p, None), (None, None)]
        for (u, v) in cases:
            want = aff_add(u, v)
            got = from_jac(ask('%sadd %s %s' % (tag, jstr(to_jac(u, is2)), jstr(to_jac(v, is2)))), is2)
            check(tag + 'add', got == want)
            got = from_jac(ask('%smadd %s %s' % (tag, jstr(to_jac(u, is2)), astr(v, is2))), is2)
            check(tag + 'madd', got == want)
        got = from_jac(ask('%sdbl %s' % (tag, jstr(to_jac(p, is2)))), is2)
        check(tag + 'dbl', got == aff_add(p, p))
print('host_check: %d failures' % fails)
sys.exit(1 if fails else 0)
