#!/usr/bin/env python3
"""A model of ntt_dif_inverse_pass(_scaled) and ntt_dit_pass (kernels/ntt/ntt.cu) in plain
Python integers: the same blocks, threads, rounds and element layout (round_layout), radix 4.
It runs the quotient's route for one vector (the DIF passes from the top, the last one scaling
position p by g^brev(p)/n, then the DIT passes without a bit reversal) and checks both halves
against the direct DFT: the coefficients in bit-reversed order, then the coset evaluations. A
twin with the inverse twiddle's sign flipped must fail.
Usage: python3 kernels/check/ntt_dif_model.py [log_tile] [log_n ...]   (default: 10 3 4 5 7 10;
small tiles give multi-pass plans at sizes the direct DFT can check, e.g. 4 5 7 9 10)."""
import random, sys

R = 0x73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001  # Fr
ROUND_BITS = 2
PER_THREAD = 1 << ROUND_BITS


def brev(i, bits):
    return int(format(i, f'0{bits}b')[::-1], 2) if bits else 0


def pass_plan(log_n, log_tile):  # src/backend/cuda/ntt.rs
    first = min(log_n, log_tile)
    plan, rest = [(0, first)], log_n - first
    if rest:
        passes, s = -(-rest // log_tile), first
        for i in range(passes):
            k = rest // passes + (1 if i < rest % passes else 0)
            plan.append((s, k))
            s += k
    return plan


def round_layout(p0, q, log_tile, t):
    used, e_pos = ((1 << q) - 1) << p0, []
    for c in range(ROUND_BITS):
        if c < q:
            e_pos.append(p0 + c)
        else:
            p = next(b for b in range(64) if not (used >> b) & 1)
            e_pos.append(p)
            used |= 1 << p
    l0, tb = 0, 0
    for p in range(log_tile):
        if not (used >> p) & 1:
            l0 |= ((t >> tb) & 1) << p
            tb += 1
    return l0, [sum(((i >> c) & 1) << e_pos[c] for c in range(ROUND_BITS)) for i in range(PER_THREAD)]


def run_pass(data, tw, log_n, s, k, log_tile, dif, scale=None, flip=False):
    n, log_cols = 1 << log_n, log_tile - k
    col_mask, groups, half = (1 << log_cols) - 1, s - log_cols, n // 2
    rounds = -(-k // ROUND_BITS)
    for block in range(n >> log_tile):
        hi, lo0 = block >> groups, (block & ((1 << groups) - 1)) << log_cols
        base, tile = (hi << (s + k)) + lo0, {}
        order = list(range(rounds - 1, -1, -1)) if dif else list(range(rounds))
        for step, r in enumerate(order):
            b = r * ROUND_BITS
            q = min(ROUND_BITS, k - b)
            for t in range(1 << (log_tile - ROUND_BITS)):
                l0, off = round_layout(log_cols + b, q, log_tile, t)
                at = lambda L: base + ((L >> log_cols) << s) + (L & col_mask)
                x = [data[at(l0 | o)] if step == 0 else tile[l0 | o] for o in off]
                for u in (range(q - 1, -1, -1) if dif else range(q)):
                    shift, mid_mask = log_n - 1 - (s + b + u), (1 << (b + u)) - 1
                    for i0 in range(PER_THREAD):
                        if i0 & (1 << u):
                            continue
                        i1, L = i0 | (1 << u), l0 | off[i0]
                        j = (((L >> log_cols) & mid_mask) << s) + lo0 + (L & col_mask)
                        if dif:
                            total = (x[i0] + x[i1]) % R
                            if j:
                                d = x[i0] - x[i1] if flip else x[i1] - x[i0]
                                x[i1] = d * tw[half - (j << shift)] % R
                            else:
                                x[i1] = (x[i0] - x[i1]) % R
                            x[i0] = total
                        else:
                            v = x[i1] * tw[j << shift] % R if j else x[i1]
                            x[i0], x[i1] = (x[i0] + v) % R, (x[i0] - v) % R
                for i, o in enumerate(off):
                    if step == rounds - 1:
                        p = at(l0 | o)
                        data[p] = x[i] * scale(brev(p, log_n)) % R if scale else x[i]
                    else:
                        tile[l0 | o] = x[i]


def check(log_n, log_tile, flip=False):
    n, g = 1 << log_n, 7
    w = pow(g, (R - 1) >> log_n, R)
    tw = [pow(w, e, R) for e in range(n // 2)]
    x = [random.randrange(R) for _ in range(n)]
    n_inv, w_inv = pow(n, R - 2, R), pow(w, R - 2, R)
    data, tile = list(x), min(log_n, log_tile)
    for s, k in reversed(pass_plan(log_n, log_tile)):
        scale = (lambda i: pow(g, i, R) * n_inv % R) if s == 0 else None
        run_pass(data, tw, log_n, s, k, tile, True, scale, flip)
    coeff = [sum(x[k] * pow(w_inv, i * k, R) for k in range(n)) * n_inv % R for i in range(n)]
    bit_reversed = all(data[p] == coeff[brev(p, log_n)] * pow(g, brev(p, log_n), R) % R for p in range(n))
    for s, k in pass_plan(log_n, log_tile):
        run_pass(data, tw, log_n, s, k, tile, False)
    coset = [sum(coeff[i] * pow(g, i, R) * pow(w, i * e, R) for i in range(n)) % R for e in range(n)]
    return bit_reversed and data == coset


if __name__ == '__main__':
    args = [int(a) for a in sys.argv[1:]] or [10, 3, 4, 5, 7, 10]
    log_tile, sizes = args[0], args[1:]
    ok = True
    for log_n in sizes:
        good, twin = check(log_n, log_tile), check(log_n, log_tile, flip=True)
        print(f'2^{log_n}, tiles of 2^{min(log_n, log_tile)}, passes {pass_plan(log_n, log_tile)}: '
              f'{"equal to the DFT" if good else "DIFFERS"}; flipped twin {"rejected" if not twin else "NOT rejected"}')
        ok &= good and not twin
    sys.exit(0 if ok else 1)
