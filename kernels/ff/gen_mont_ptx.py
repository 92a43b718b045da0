#!/usr/bin/env python3
"""Generates kernels/ff/mont_ptx.cuh: device Montgomery multiplication, addition and subtraction
for BLS12-381's Fr (8 x 32-bit limbs) and Fp (12 limbs), and Fp squaring, as PTX carry chains, with the moduli as
immediates. The same instruction lists are run through a small PTX interpreter here and checked
against Python integers before the header is written, so the sequences are verified without a GPU.

    python3 kernels/ff/gen_mont_ptx.py          # check (random + edge cases), then write the header
    python3 kernels/ff/gen_mont_ptx.py --check  # check, and that the committed header is current

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



# ---- squaring: cross products once, doubled; separated Montgomery reduction ("sos") ------------
# a² = 2·Σ_{i<j} a_i·a_j·B^(i+j) + Σ a_i²·B^2i: n(n-1)/2 + n partial products (78 for Fp) instead
# of the n² = 144 of a multiplication. The reduction is then Montgomery's on the 2n-limb square:
# REDC(T_lo) + T_hi, with REDC(T_lo) = (T_lo + Σ m_i·p·B^i) / B^n ≤ p and T_hi < p/2 for these
# moduli, so the sum is < 2p and one conditional subtraction reduces it. The cross products and
# the reduction's m·p rows run as even/odd chains (a product's low and high halves next to each
# other in one chain, so ptxas fuses them into one wide multiply-add), accumulated so that each
# chain's final carry lands in a limb that holds nothing or only earlier carries: no carry ever
# propagates further (asserted for every chain when the sequence is generated).
# A block is a list of instructions inside which the carry flag may be live; blocks become
# separate asm statements.
# (A one-level Karatsuba multiplication built the same way, 108 partial products instead of 144,
# ran slower than the even/odd CIOS: its extra additions land on the multiply-add pipe too. It is in the history, commit 5c34212, and kernels/NOTES.md has the figures.)

class Acc:
    """An accumulator of limbs at absolute positions (register prefix + position) that remembers
    which positions hold a value: an unwritten position reads as the immediate 0."""

    def __init__(self, prefix, written=(), limit=None):
        self.prefix, self.written, self.limit = prefix, set(written), limit
        self.carries = set()  # positions written only by chain carries (small values)

    def reg(self, pos):
        return '%s%d' % (self.prefix, pos)

    def cur(self, pos):
        return self.reg(pos) if pos in self.written else 0

    def chain(self, pairs, blocks):
        """Adds x·y at positions (pos, pos + 1) for each (pos, x, y), pos stepping by 2, in one
        carry chain; the carry lands at the position after the last pair. A chain that only writes
        fresh positions cannot carry. Past `limit` nothing may carry (checked by the interpreter)."""
        ins = []
        fresh = all(p not in self.written and p + 1 not in self.written for p, _, _ in pairs)
        for q, (pos, x, y) in enumerate(pairs):
            ins.append(('mad.lo.cc.u32' if q == 0 else 'madc.lo.cc.u32', self.reg(pos), x, y, self.cur(pos)))
            top = pos + 2
            last = q == len(pairs) - 1
            no_carry = last and (fresh or (self.limit is not None and top >= self.limit))
            ins.append(('madc.hi.u32' if no_carry else 'madc.hi.cc.u32', self.reg(pos + 1), x, y, self.cur(pos + 1)))
            self.written |= {pos, pos + 1}
        self.carries -= {p for pos, _, _ in pairs for p in (pos, pos + 1)}
        if ins[-1][0] == 'madc.hi.cc.u32':
            top = pairs[-1][0] + 2
            # a carry may only land in a fresh limb or one holding earlier carries (a few units),
            # so it never carries on: checked here for every chain, not just for the tested inputs
            assert top not in self.written or top in self.carries, (self.prefix, top)
            ins.append(('addc.u32', self.reg(top), self.cur(top), 0))
            if top not in self.written:
                self.carries.add(top)
            self.written.add(top)
        blocks.append(ins)


def merge_eo(A, B, dst, blocks):
    """dst = A + B over len(dst) limbs; nothing may carry out."""
    m = len(dst)
    ins, started = [], False
    for k in range(m):
        x, y = A.cur(k), B.cur(k)
        if not started and (x == 0 or y == 0):
            ins.append(('mov.u32', dst[k], x if y == 0 else y))
            continue
        code = 'addc.u32' if k == m - 1 else ('addc.cc.u32' if started else 'add.cc.u32')
        ins.append((code, dst[k], x, y))
        started = True
    blocks.append(ins)


def sqr_sos(n, p):
    """Instruction blocks for r = a·a·B^-n mod p (input < p): register a* in, r* out. The cross
    products a_i·a_j (i < j) once each, doubled, plus the squares a_i² on the diagonal:
    n(n-1)/2 + n partial products (78 for Fp) instead of n², then the same reduction."""
    inv = (-pow(p, -1, 2**32)) % 2**32
    a = ['a%d' % j for j in range(n)]
    blocks = []
    # the cross products: row i adds a_i·a_j for j > i at positions i + j; pairs starting at odd
    # positions (j = i+1, i+3, ...) go to Q, at even positions (j = i+2, ...) to P
    P, Q = Acc('P', limit=2 * n), Acc('Q', limit=2 * n)
    for i in range(n - 1):
        Q.chain([(i + j, a[i], a[j]) for j in range(i + 1, n, 2)], blocks)
        if i + 2 < n:
            P.chain([(i + j, a[i], a[j]) for j in range(i + 2, n, 2)], blocks)
    D = ['D%d' % k for k in range(2 * n)]
    merge_eo(P, Q, D, blocks)
    # T = 2·D + Σ a_i²·B^2i (D < B^2n / 2, so doubling cannot carry out)
    T = ['X%d' % k for k in range(n)] + ['T%d' % k for k in range(n, 2 * n)]
    ins = [('add.cc.u32', T[0], D[0], D[0])]
    for k in range(1, 2 * n - 1):
        ins.append(('addc.cc.u32', T[k], D[k], D[k]))
    ins.append(('addc.u32', T[2 * n - 1], D[2 * n - 1], D[2 * n - 1]))
    blocks.append(ins)
    diag = Acc('', written=range(2 * n), limit=2 * n)
    diag.reg = lambda pos: T[pos]
    diag.chain([(2 * i, a[i], a[i]) for i in range(n)], blocks)
    redc_blocks(n, p, blocks)
    return blocks, inv


def redc_blocks(n, p, blocks):
    """Appends the reduction of the 2n-limb T (low half in X0.., high half in T<n>..) to r' < 2p
    in u0..u(n-1) (utop = 0), then r' - p in s* with the borrow mask in bw."""
    pl = limbs(p, n)
    inv = (-pow(p, -1, 2**32)) % 2**32
    T = ['X%d' % k for k in range(n)] + ['T%d' % k for k in range(n, 2 * n)]
    # REDC(T_lo): X starts as T_lo; row i adds m_i·p·B^i, p's even limbs into one accumulator
    # and odd ones into the other (swapping every row, as in the products). m_i comes from limb i
    # of X + Y plus the carry c out of the limbs below (which sum to 0 or B^i): c ∈ {0, 1, 2}.
    X, Y = Acc('X', written=range(n)), Acc('Y')
    for i in range(n):
        if i == 0:
            blocks.append([('mul.lo.u32', 'm', X.reg(0), inv)])
        else:
            # (sums mod B: .cc only to say that wrapping is meant; the flag is not read)
            v = 'v%d' % i  # (scratch names per row, so that each stays inside its asm statement)
            blocks.append([('add.cc.u32', v, X.cur(i), Y.cur(i)), ('add.cc.u32', v, v, 'c'),
                           ('mul.lo.u32', 'm', v, inv)])
        ev, od = (X, Y) if i % 2 == 0 else (Y, X)
        ev.chain([(i + j, 'm', pl[j]) for j in range(0, n, 2)], blocks)
        od.chain([(i + j, 'm', pl[j]) for j in range(1, n, 2)], blocks)
        # the carry out of limb i (now 0 mod B): c' = (X[i] + Y[i] + c) >> 32
        if i == 0:
            blocks.append([('mov.u32', 'c', 0)])  # X[0] + lo(m·p0) is 0: no carry
        else:
            w, k = 'w%d' % i, 'k%d' % i
            blocks.append([('add.cc.u32', w, X.cur(i), Y.cur(i)), ('addc.u32', k, 0, 0),
                           ('add.cc.u32', w, w, 'c'), ('addc.u32', 'c', k, 0)])
    # r' = (X + Y)[n..2n] + c + T_hi: < 2p; then subtract p unless that borrows
    ins = [('add.cc.u32', 'u0', X.cur(n), Y.cur(n))]
    for k in range(1, n):
        ins.append(('addc.cc.u32', 'u%d' % k, X.cur(n + k), Y.cur(n + k)))
    ins.append(('addc.u32', 'utop', X.cur(2 * n), Y.cur(2 * n)))
    blocks.append(ins)
    ins = [('add.cc.u32', 'u0', 'u0', 'c')]
    for k in range(1, n):
        ins.append(('addc.cc.u32', 'u%d' % k, 'u%d' % k, 0))
    ins.append(('addc.u32', 'utop', 'utop', 0))
    blocks.append(ins)
    ins = [('add.cc.u32', 'u0', 'u0', T[n])]
    for k in range(1, n):
        ins.append(('addc.cc.u32', 'u%d' % k, 'u%d' % k, T[n + k]))
    ins.append(('addc.u32', 'utop', 'utop', 0))
    blocks.append(ins)
    ins = [('sub.cc.u32', 's0', 'u0', pl[0])]
    for j in range(1, n):
        ins.append(('subc.cc.u32', 's%d' % j, 'u%d' % j, pl[j]))
    ins.append(('subc.u32', 'bw', 'utop', 0))
    blocks.append(ins)


def sim_sqr_sos(n, p, a):
    return sim_blocks(n, p, sqr_sos(n, p)[0], a, a)


def sim_blocks(n, p, blocks, a, b):
    al, bl = limbs(a, n), limbs(b, n)
    regs = {}
    for j in range(n):
        regs['a%d' % j], regs['b%d' % j] = al[j], bl[j]
    for blk in blocks:
        run(blk, regs)
    assert regs['utop'] == 0, hex(regs['utop'])
    u = sum(regs['u%d' % j] << (32 * j) for j in range(n))
    assert u < 2 * p
    # bw: 0 when u >= p (take s), all ones when u < p (keep u)
    if regs['bw']:
        return u
    return sum(regs['s%d' % j] << (32 * j) for j in range(n))


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


def mutation_check(trials=60):
    """The check must be able to fail: one changed operand in the squaring (an immediate's low
    bit flipped, or a register replaced by another) must be caught by random operands. Returns
    how many of the mutants went undetected."""
    missed = 0
    for n, p in ((8, FR), (12, FP)):
        R = 2 ** (32 * n)
        rinv = pow(R, -1, p)
        for _ in range(trials):
            blocks = [list(b) for b in sqr_sos(n, p)[0]]
            k = random.randrange(len(blocks))
            j = random.randrange(len(blocks[k]))
            op = list(blocks[k][j])
            q = random.randrange(2, len(op))
            if isinstance(op[q], int):
                op[q] ^= 1
            else:
                regs = sorted({x for b in blocks for o in b for x in o[2:] if isinstance(x, str) and x != op[q]})
                op[q] = random.choice(regs)
            blocks[k][j] = tuple(op)
            caught = False
            for _ in range(20):
                a = random.randrange(p)
                try:
                    caught = sim_blocks(n, p, blocks, a, a) != a * a * rinv % p
                except (AssertionError, OverflowError, KeyError):
                    caught = True
                if caught:
                    break
            missed += not caught
    return missed


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
            if sim_sqr_sos(n, p, a) != a * a * rinv % p: fails += 1; print('sqr_sos', n, hex(a))
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


def emit_blocks(fname, n, blocks, square=False):
    """A device function r = a·b from instruction blocks over named registers: a<j> is a[j], b<j>
    is b[j], every other register a local u32; one asm statement per block."""
    def cname(x):
        if isinstance(x, str) and x[0] in 'ab' and x[1:].isdigit():
            return '%s[%s]' % (x[0], x[1:])
        return x
    # registers used inside one block only are that asm statement's own (.reg); the rest are
    # C locals, as are the results the C code reads at the end (u*, s*, bw)
    where = {}
    for k, blk in enumerate(blocks):
        for op in blk:
            for x in op[1:]:
                if isinstance(x, str) and cname(x) == x:
                    where.setdefault(x, set()).add(k)
    final = {'u%d' % j for j in range(n)} | {'s%d' % j for j in range(n)} | {'bw'}
    inner = {x for x, ks in where.items() if len(ks) == 1 and x not in final}
    locals_ = [x for x in where if x not in inner]
    args = 'u32* r, const u32* a' if square else 'u32* r, const u32* a, const u32* b'
    out = ['__device__ __forceinline__ void %s(%s) {\n' % (fname, args)]
    for k in range(0, len(locals_), 16):
        out.append('    u32 %s;\n' % ', '.join(locals_[k:k + 16]))
    for blk in blocks:
        written, read_first = [], []
        for code, d, *srcs in blk:
            for x in srcs:
                if isinstance(x, str) and x not in written and x not in read_first:
                    read_first.append(x)
            if d not in written:
                written.append(d)
        own = [x for x in written + read_first if x in inner]
        outs = [(cname(x), '+r' if x in read_first else '=r') for x in written if x not in inner]
        ins_ro = [cname(x) for x in read_first if x not in written and x not in inner]
        ren = rename(blk, cname)
        out.append(emit_asm(ren, outs, ins_ro, locals_=own))
    for j in range(n):
        out.append('    r[%d] = bw ? u%d : s%d;\n' % (j, j, j))
    out.append('}\n\n')
    return ''.join(out)


def emit_field(name, n, p):
    rows, inv = mul_rows(n, p)
    out = []
    out.append('// %s: %d limbs, p = 0x%x\n' % (name, n, p))
    # multiplication
    out.append(emit_mul_eo('%s_mul_eo' % name, n, p, False))
    out.append(emit_mul_eo('%s_mul_eo_cc' % name, n, p, True))
    if name == 'fp':  # (Fr is never squared on the device)
        out.append('// Squaring: the cross products once, doubled, plus the diagonal; then the reduction\n')
        out.append(emit_blocks('%s_sqr_sos' % name, n, sqr_sos(n, p)[0], square=True))
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
    missed = mutation_check()
    # a few mutants are equivalent (they change a value that is provably zero, or a scratch
    # register that is rewritten before use); most must be caught
    print('mutants: %d of %d survived' % (missed, 2 * 60))
    if missed > 12:
        print('FAILED: the check misses changed instruction sequences')
        fails += 1
    if fails:
        print('FAILED: %d' % fails)
        sys.exit(1)
    hdr = ('// GENERATED by kernels/ff/gen_mont_ptx.py (which also verifies these instruction sequences\n'
           '// against Python integers): do not edit by hand. Device-only PTX carry-chain arithmetic for\n'
           '// BLS12-381 Fr and Fp; mont.cuh uses it under __CUDA_ARCH__.\n#pragma once\n\n')
    path = __file__.rsplit('/', 1)[0] + '/mont_ptx.cuh'
    text = hdr + emit_field('fr', 8, FR) + emit_field('fp', 12, FP)
    if '--check' in sys.argv:
        # the committed header must be what these checked sequences generate
        with open(path) as f:
            if f.read() != text:
                print('FAILED: %s is not what this generator writes; run it without --check' % path)
                sys.exit(1)
        print('%s matches the checked sequences' % path)
        return
    with open(path, 'w') as f:
        f.write(text)
    print('wrote', path)


if __name__ == '__main__':
    main()
