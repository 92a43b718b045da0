#!/usr/bin/env python3
"""Generates kernels/ff/mont_ptx.cuh: device Montgomery multiplication, addition and subtraction
for BLS12-381's Fr (8 x 32-bit limbs) and Fp (12 limbs) as PTX carry chains, with the moduli as
immediates. The same instruction lists are run through a small PTX interpreter here and checked
against Python integers before the header is written, so the sequences are verified without a GPU.

    python3 kernels/ff/gen_mont_ptx.py          # check (random + edge cases), then write the header
    python3 kernels/ff/gen_mont_ptx.py --check  # check only

Multiplication: CIOS, one row per limb of b. Both moduli leave the top bit of the top limb clear
(p < R/2), so the running value t stays < 2p and fits N limbs plus one carry limb tN that never
overflows (the "no-carry" variant): each row is four carry chains (lo and hi halves of a·b_i, then
of m·p) and no further carry bookkeeping. One asm statement per row keeps each chain inside a
statement (the carry flag does not survive between statements) and under the operand limit.
The result is < 2p before one conditional subtraction, so outputs are fully reduced (< p).
"""
import random, sys

FR = 0x73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001
FP = 0x1a0111ea397fe69a4b1ba7b6434bacd764774b84f38512bf6730d2a0f6b0f6241eabfffeb153ffffb9feffffffffaaab
M32 = 0xffffffff


def limbs(x, n):
    return [(x >> (32 * i)) & M32 for i in range(n)]


# An instruction: (opcode, dst, src...). Operands are register names (str) or immediates (int).
def mul_rows(n, p):
    pl = limbs(p, n)
    inv = (-pow(p, -1, 2**32)) % 2**32
    rows = []
    for i in range(n):
        ins = []
        b = 'b'
        t = ['t%d' % j for j in range(n + 1)]
        a = ['a%d' % j for j in range(n)]
        if i == 0:
            # t = a·b0: low halves straight in, high halves in one chain
            for j in range(n):
                ins.append(('mul.lo.u32', t[j], a[j], b))
            ins.append(('mad.hi.cc.u32', t[1], a[0], b, t[1]))
            for j in range(1, n - 1):
                ins.append(('madc.hi.cc.u32', t[j + 1], a[j], b, t[j + 1]))
            ins.append(('madc.hi.u32', t[n], a[n - 1], b, 0))
        else:
            # t += a·b_i: high halves first (defines tN), then low halves
            ins.append(('mad.hi.cc.u32', t[1], a[0], b, t[1]))
            for j in range(1, n - 1):
                ins.append(('madc.hi.cc.u32', t[j + 1], a[j], b, t[j + 1]))
            ins.append(('madc.hi.u32', t[n], a[n - 1], b, 0))
            ins.append(('mad.lo.cc.u32', t[0], a[0], b, t[0]))
            for j in range(1, n):
                ins.append(('madc.lo.cc.u32', t[j], a[j], b, t[j]))
            ins.append(('addc.u32', t[n], t[n], 0))
        # m = t0·(-1/p) mod 2^32; t += m·p clears t0
        ins.append(('mul.lo.u32', 'm', t[0], inv))
        if pl[0] == 1:  # Fr: m·p0 = m, no high half
            ins.append(('add.cc.u32', t[0], t[0], 'm'))
        else:
            ins.append(('mad.lo.cc.u32', t[0], 'm', pl[0], t[0]))
        for j in range(1, n):
            ins.append(('madc.lo.cc.u32', t[j], 'm', pl[j], t[j]))
        ins.append(('addc.u32', t[n], t[n], 0))
        first = 1 if pl[0] == 1 else 0
        ins.append(('mad.hi.cc.u32', t[first + 1], 'm', pl[first], t[first + 1]))
        for j in range(first + 1, n - 1):
            ins.append(('madc.hi.cc.u32', t[j + 1], 'm', pl[j], t[j + 1]))
        ins.append(('madc.hi.u32', t[n], 'm', pl[n - 1], t[n]))
        rows.append(ins)  # then t_j <- t_{j+1} (renaming, done by the caller)
    return rows, inv


def mul_rows_eo(n, p, start_with_carry=False):
    """Even/odd CIOS: t = E + 2^32·O, where E takes the products of even-indexed limbs (lo at
    position j, hi at j+1) and O those of odd-indexed limbs, so that the low and high halves of
    one product sit next to each other in one carry chain and ptxas fuses each pair into a single
    wide multiply-add with carry in and out (IMAD.WIDE.U32.X). After a row's reduction E[0] = 0 and
    the division by 2^32 swaps the roles: the old O becomes the new E (aligned at position 0), the
    old E[2..] becomes the new O (position 1 up), and the old E[1] is added at position 0 at the
    start of the next row, its carry entering the new O's chain at position 1.
    Returns (rows, final) where rows are lists of instructions over register names x0..x(2n+1),
    'a<j>', 'b' (this row's limb of b) and 'm'; final: the instructions that merge into r0..r(n-1)
    (checked < 2^(32n)) via 'rtop'."""
    pl = limbs(p, n)
    inv = (-pow(p, -1, 2**32)) % 2**32
    E = ['x%d' % k for k in range(n + 1)]
    O = ['x%d' % k for k in range(n + 1, 2 * n + 2)]
    fold = None
    rows = []

    def pairs_chain(acc, js, mul_by, mulconst, carry_in):
        """acc[k] for the chain positions: products x_j·y, lo at acc[2q], hi at acc[2q+1]."""
        ins = []
        for q, j in enumerate(js):
            x = mulconst[j] if mulconst is not None else 'a%d' % j
            first = q == 0 and not carry_in
            ins.append(('mad.lo.cc.u32' if first else 'madc.lo.cc.u32', acc[2 * q], mul_by, x, acc[2 * q]))
            ins.append(('madc.hi.cc.u32', acc[2 * q + 1], mul_by, x, acc[2 * q + 1]))
        return ins

    even = list(range(0, n, 2))
    odd = list(range(1, n, 2))
    for i in range(n):
        ins = []
        if i == 0:
            for q, j in enumerate(even):
                ins.append(('mul.lo.u32', E[2 * q], 'a%d' % j, 'b'))
                ins.append(('mul.hi.u32', E[2 * q + 1], 'a%d' % j, 'b'))
            ins.append(('mov.u32', E[n], 0))
            for q, j in enumerate(odd):
                ins.append(('mul.lo.u32', O[2 * q], 'a%d' % j, 'b'))
                ins.append(('mul.hi.u32', O[2 * q + 1], 'a%d' % j, 'b'))
            ins.append(('mov.u32', O[n], 0))
        else:
            # fold the previous row's E[1] in at position 0; its carry starts O's chain
            ins.append(('add.cc.u32', E[0], E[0], fold))
            ins += pairs_chain(O, odd, 'b', None, True)
            ins.append(('addc.u32', O[n], 0, 0))  # O[n] is the old E[1]: overwrite
            if start_with_carry:
                ins.append(('add.cc.u32', E[n], E[n], 0))
            ins += pairs_chain(E, even, 'b', None, start_with_carry)
            ins.append(('addc.u32', E[n], E[n], 0))
        ins.append(('mul.lo.u32', 'm', E[0], inv))
        if pl[0] == 1:  # Fr: m·p0 = m with no high half
            ins.append(('add.cc.u32', E[0], E[0], 'm'))
            ins.append(('addc.cc.u32', E[1], E[1], 0))
            ins += pairs_chain(E[2:], even[1:], 'm', pl, True)
        else:
            if start_with_carry:
                ins.append(('add.cc.u32', E[n], E[n], 0))
            ins += pairs_chain(E, even, 'm', pl, start_with_carry)
        ins.append(('addc.u32', E[n], E[n], 0))
        if start_with_carry:
            ins.append(('add.cc.u32', O[n], O[n], 0))
        ins += pairs_chain(O, odd, 'm', pl, start_with_carry)
        ins.append(('addc.u32', O[n], O[n], 0))
        rows.append((ins, list(E), list(O)))
        fold = E[1]
        E, O = O, E[2:] + [E[0], E[1]]
    # t = E + fold (position 0) + 2^32·O
    fin = [('add.cc.u32', 'r0', E[0], fold)]
    for k in range(1, n):
        fin.append(('addc.cc.u32', 'r%d' % k, E[k], O[k - 1]))
    fin.append(('addc.u32', 'rtop', E[n], O[n - 1]))
    return rows, fin, inv


def sim_mul_eo(n, p, a, b, swc=False):
    rows, fin, _ = mul_rows_eo(n, p, swc)
    al, bl = limbs(a, n), limbs(b, n)
    regs = {'x%d' % k: random.getrandbits(32) for k in range(2 * n + 2)}  # garbage: row 0 writes first
    for j in range(n):
        regs['a%d' % j] = al[j]
    for i, (ins, E, O) in enumerate(rows):
        regs['b'] = bl[i]
        run(ins, regs)
        assert regs[E[0]] == 0
    run(fin, regs)
    assert regs['rtop'] == 0
    tv = sum(regs['r%d' % j] << (32 * j) for j in range(n))
    assert tv < 2 * p
    regs2 = {'t%d' % j: regs['r%d' % j] for j in range(n)}
    run(sub_p(n, p), regs2)
    return tv if regs2['bw'] else sum(regs2['r%d' % j] << (32 * j) for j in range(n))


def sub_p(n, p):
    """r = t - p and a borrow mask (0 or all ones) in 'bw'."""
    pl = limbs(p, n)
    ins = [('sub.cc.u32', 'r0', 't0', pl[0])]
    for j in range(1, n):
        ins.append(('subc.cc.u32', 'r%d' % j, 't%d' % j, pl[j]))
    ins.append(('subc.u32', 'bw', 0, 0))
    return ins


def add_ins(n):
    ins = [('add.cc.u32', 't0', 'a0', 'b0')]
    for j in range(1, n):
        ins.append(('addc.cc.u32', 't%d' % j, 'a%d' % j, 'b%d' % j))
    return ins[:-1] + [('addc.u32', 't%d' % (n - 1), 'a%d' % (n - 1), 'b%d' % (n - 1))]


def sub_ins(n):
    ins = [('sub.cc.u32', 't0', 'a0', 'b0')]
    for j in range(1, n):
        ins.append(('subc.cc.u32', 't%d' % j, 'a%d' % j, 'b%d' % j))
    ins.append(('subc.u32', 'bw', 0, 0))
    return ins


def addp_masked(n, p):
    """t += p & bw."""
    pl = limbs(p, n)
    ins = [('and.b32', 'q%d' % j, 'bw', pl[j]) for j in range(n)]
    ins.append(('add.cc.u32', 't0', 't0', 'q0'))
    for j in range(1, n - 1):
        ins.append(('addc.cc.u32', 't%d' % j, 't%d' % j, 'q%d' % j))
    ins.append(('addc.u32', 't%d' % (n - 1), 't%d' % (n - 1), 'q%d' % (n - 1)))
    return ins


# ---- interpreter -------------------------------------------------------------------------------
def run(ins, regs, wraps=False):
    cf = None  # carry flag; None = undefined (reading it is an error)
    val = lambda x: x if isinstance(x, int) else regs[x]
    for op in ins:
        code, d, *s = op
        v = [val(x) for x in s]
        parts = code.split('.')
        base = parts[0]
        cc = 'cc' in parts
        if base in ('madc', 'addc', 'subc'):
            assert cf is not None, op
            cin = cf
        else:
            cin = 0
        if base in ('mad', 'madc', 'mul'):
            prod = v[0] * v[1]
            h = (prod >> 32) if 'hi' in parts else (prod & M32)
            r = h + (v[2] if base != 'mul' else 0) + cin
            out, cout = r & M32, r >> 32
            assert cout <= 1
        elif base in ('add', 'addc'):
            r = v[0] + v[1] + cin
            out, cout = r & M32, r >> 32
        elif base in ('sub', 'subc'):
            r = v[0] - v[1] - cin
            out, cout = r & M32, 1 if r < 0 else 0
        elif base == 'mov':
            out, cout = v[0], None
        elif base == 'and':
            out, cout = v[0] & v[1], None
        else:
            raise ValueError(code)
        if not cc and base not in ('and', 'mov'):
            # a non-.cc instruction with a carry-in consumes the flag; nothing after may use it
            # until a new .cc sets it; keep it simple: mark undefined
            cf = None
            # check no silent overflow where the algorithm claims none
            if base in ('madc', 'addc', 'mad', 'add') and cout and not wraps:
                raise OverflowError(op)
        elif cc:
            cf = cout
        regs[d] = out
    return regs


def sim_mul(n, p, a, b):
    rows, _ = mul_rows(n, p)
    al, bl = limbs(a, n), limbs(b, n)
    t = {}
    for i, ins in enumerate(rows):
        regs = dict(('a%d' % j, al[j]) for j in range(n))
        regs['b'] = bl[i]
        for j in range(n + 1):
            regs['t%d' % j] = t.get(j, 0xdeadbeef if i == 0 else None)
        run(ins, regs)
        assert regs['t0'] == 0
        t = {j: regs['t%d' % (j + 1)] for j in range(n)}
    tv = sum(t[j] << (32 * j) for j in range(n))
    assert tv < 2 * p
    regs = {'t%d' % j: t[j] for j in range(n)}
    run(sub_p(n, p), regs)
    r = tv if regs['bw'] else sum(regs['r%d' % j] << (32 * j) for j in range(n))
    return r


def sim_add(n, p, a, b):
    al, bl = limbs(a, n), limbs(b, n)
    regs = {**{'a%d' % j: al[j] for j in range(n)}, **{'b%d' % j: bl[j] for j in range(n)}}
    run(add_ins(n), regs)
    run(sub_p(n, p), regs)
    src = 't' if regs['bw'] else 'r'
    return sum(regs['%s%d' % (src, j)] << (32 * j) for j in range(n))


def sim_sub(n, p, a, b):
    al, bl = limbs(a, n), limbs(b, n)
    regs = {**{'a%d' % j: al[j] for j in range(n)}, **{'b%d' % j: bl[j] for j in range(n)}}
    run(sub_ins(n), regs)
    run(addp_masked(n, p), regs, wraps=True)  # a - b + p wraps past 2^(32n) by design
    return sum(regs['t%d' % j] << (32 * j) for j in range(n))


def check(count=1000):
    fails = 0
    for n, p in ((8, FR), (12, FP)):
        R = 2 ** (32 * n)
        rinv = pow(R, -1, p)
        edge = [0, 1, 2, p - 1, p - 2, R % p, (R * R) % p, p // 2, 2**(32 * n - 33)]
        pairs = [(x, y) for x in edge for y in edge]
        pairs += [(random.randrange(p), random.randrange(p)) for _ in range(count)]
        for a, b in pairs:
            if sim_mul(n, p, a, b) != a * b * rinv % p: fails += 1; print('mul', n, hex(a), hex(b))
            for swc in (False, True):
                if sim_mul_eo(n, p, a, b, swc) != a * b * rinv % p: fails += 1; print('mul_eo', n, hex(a), hex(b))
            if sim_add(n, p, a, b) != (a + b) % p: fails += 1; print('add', n, hex(a), hex(b))
            if sim_sub(n, p, a, b) != (a - b) % p: fails += 1; print('sub', n, hex(a), hex(b))
        print('n=%d: %d cases checked' % (n, len(pairs)))
    return fails


# ---- emitter -----------------------------------------------------------------------------------
def emit_asm(ins, outs, ins_ro, locals_=()):
    """One asm statement. outs: [(name, constraint)], ins_ro: names read only."""
    names = [o for o, _ in outs] + list(ins_ro)
    idx = {nm: '%%%d' % k for k, nm in enumerate(names)}
    def opnd(x):
        if isinstance(x, int): return '0x%x' % x
        return idx.get(x, '_' + x)
    lines = []
    for l in locals_:
        lines.append('.reg .u32 _%s;' % l)
    for code, d, *s in ins:
        lines.append('%s %s, %s;' % (code, opnd(d), ', '.join(opnd(x) for x in s)))
    body = '\n'.join('        "%s\\n\\t"' % l for l in lines)
    oc = ', '.join('"%s"(%s)' % (c, nm) for nm, c in outs)
    ic = ', '.join('"r"(%s)' % nm for nm in ins_ro)
    return '    asm("{\\n\\t"\n%s\n        "}"\n        : %s\n        : %s);\n' % (body, oc, ic)


def rename(ins, f):
    """Maps every operand (not the opcode) through f."""
    return [(code, *[f(x) for x in ops]) for code, *ops in ins]


def reg_map(**prefixes):
    """Operand renamer: a register 'x7' with prefix x mapped to prefixes['x'] % 7."""
    def f(x):
        if isinstance(x, str) and x[0] in prefixes and x[1:].isdigit():
            return prefixes[x[0]] % int(x[1:])
        return x
    return f


def emit_mul_eo(fname, n, p, swc):
    rows, fin, inv = mul_rows_eo(n, p, swc)
    xs = ['x%d' % k for k in range(2 * n + 2)]
    out = ['__device__ __forceinline__ void %s(u32* r, const u32* a, const u32* b) {\n' % fname]
    out.append('    u32 %s;\n' % ', '.join(xs))
    a_names = ['a[%d]' % j for j in range(n)]
    fa = reg_map(a='a[%d]')
    for i, (ins, E, O) in enumerate(rows):
        ren = rename(ins, lambda x: 'b[%d]' % i if x == 'b' else fa(x))
        outs = [(x, '=r' if i == 0 else '+r') for x in xs]
        out.append('    // row %d\n' % i)
        out.append(emit_asm(ren, outs, a_names + ['b[%d]' % i], locals_=('m',)))
    out.append('    // t = E + 2^32·O merged (< 2p), then subtract p unless that borrows\n')
    out.append('    u32 t[%d], s[%d], bw;\n' % (n, n))
    used = sorted({x for op in fin for x in op[2:] if isinstance(x, str) and x[0] == 'x'}, key=lambda x: int(x[1:]))
    fr = rename(fin, reg_map(r='t[%d]'))  # the top limb 'rtop' is zero: a scratch register
    out.append(emit_asm(fr, [('t[%d]' % j, '=r') for j in range(n)], used, locals_=('rtop',)))
    sp = rename(sub_p(n, p), reg_map(t='t[%d]', r='s[%d]'))
    out.append(emit_asm(sp, [('s[%d]' % j, '=r') for j in range(n)] + [('bw', '=r')], ['t[%d]' % j for j in range(n)]))
    for j in range(n):
        out.append('    r[%d] = bw ? t[%d] : s[%d];\n' % (j, j, j))
    out.append('}\n\n')
    return ''.join(out)


def emit_field(name, n, p):
    rows, inv = mul_rows(n, p)
    out = []
    out.append('// %s: %d limbs, p = 0x%x\n' % (name, n, p))
    # multiplication
    out.append(emit_mul_eo('%s_mul_eo' % name, n, p, False))
    out.append(emit_mul_eo('%s_mul_eo_cc' % name, n, p, True))
    out.append('// Row-by-row CIOS with separate low and high chains (the first version, kept for comparison)\n')
    out.append('__device__ __forceinline__ void %s_mul_rows(u32* r, const u32* a, const u32* b) {\n' % name)
    out.append('    u32 %s;\n' % ', '.join('t%d' % j for j in range(n + 1)))
    a_names = ['a[%d]' % j for j in range(n)]
    for i, ins in enumerate(rows):
        # row i's register t_j is the variable t((j + i) mod (n + 1)): the shift is a renaming
        slot = lambda j: 't%d' % ((j + i) % (n + 1))
        f = reg_map(a='a[%d]')
        ren = rename(ins, lambda x: slot(int(x[1:])) if isinstance(x, str) and x[0] == 't' else
                     ('b[%d]' % i if x == 'b' else f(x)))
        if i == 0:
            outs = [(slot(j), '=r') for j in range(n + 1)]
        else:
            outs = [(slot(j), '+r') for j in range(n)] + [(slot(n), '=r')]
        out.append('    // row %d\n' % i)
        out.append(emit_asm(ren, outs, a_names + ['b[%d]' % i], locals_=('m',)))
    final = ['t%d' % ((j + n) % (n + 1)) for j in range(n)]
    out.append('    // t < 2p: subtract p unless that borrows\n')
    out.append('    u32 s[%d], bw;\n' % n)
    sp = rename(sub_p(n, p), lambda x: final[int(x[1:])] if isinstance(x, str) and x[0] == 't' else reg_map(r='s[%d]')(x))
    out.append(emit_asm(sp, [('s[%d]' % j, '=r') for j in range(n)] + [('bw', '=r')], final))
    for j in range(n):
        out.append('    r[%d] = bw ? %s : s[%d];\n' % (j, final[j], j))
    out.append('}\n\n')
    # addition: a + b < 2p < 2^(32n), then subtract p unless that borrows
    out.append('__device__ __forceinline__ void %s_add_ptx(u32* r, const u32* a, const u32* b) {\n' % name)
    out.append('    u32 t[%d], s[%d], bw;\n' % (n, n))
    ai = rename(add_ins(n), reg_map(t='t[%d]', a='a[%d]', b='b[%d]'))
    out.append(emit_asm(ai, [('t[%d]' % j, '=r') for j in range(n)],
                        ['a[%d]' % j for j in range(n)] + ['b[%d]' % j for j in range(n)]))
    sp = rename(sub_p(n, p), reg_map(t='t[%d]', r='s[%d]'))
    out.append(emit_asm(sp, [('s[%d]' % j, '=r') for j in range(n)] + [('bw', '=r')], ['t[%d]' % j for j in range(n)]))
    for j in range(n):
        out.append('    r[%d] = bw ? t[%d] : s[%d];\n' % (j, j, j))
    out.append('}\n\n')
    # subtraction: a - b, plus p when that borrowed
    out.append('__device__ __forceinline__ void %s_sub_ptx(u32* r, const u32* a, const u32* b) {\n' % name)
    out.append('    u32 bw;\n')
    si = rename(sub_ins(n), reg_map(t='r[%d]', a='a[%d]', b='b[%d]'))
    out.append(emit_asm(si, [('r[%d]' % j, '=r') for j in range(n)] + [('bw', '=r')],
                        ['a[%d]' % j for j in range(n)] + ['b[%d]' % j for j in range(n)]))
    ap = addp_masked(n, p)
    qs = sorted({x for op in ap for x in op[1:] if isinstance(x, str) and x[0] == 'q'})
    ap = rename(ap, reg_map(t='r[%d]'))
    out.append(emit_asm(ap, [('r[%d]' % j, '+r') for j in range(n)], ['bw'], locals_=qs))
    out.append('}\n\n')
    return ''.join(out)


def main():
    random.seed()
    fails = check()
    if fails:
        print('FAILED: %d' % fails)
        sys.exit(1)
    if '--check' in sys.argv:
        return
    hdr = ('// GENERATED by kernels/ff/gen_mont_ptx.py (which also verifies these instruction sequences\n'
           '// against Python integers): do not edit by hand. Device-only PTX carry-chain arithmetic for\n'
           '// BLS12-381 Fr and Fp; mont.cuh uses it under __CUDA_ARCH__.\n#pragma once\n\n')
    path = __file__.rsplit('/', 1)[0] + '/mont_ptx.cuh'
    with open(path, 'w') as f:
        f.write(hdr + emit_field('fr', 8, FR) + emit_field('fp', 12, FP))
    print('wrote', path)


if __name__ == '__main__':
    main()
