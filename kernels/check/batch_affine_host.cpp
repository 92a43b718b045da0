// Host check of the production batch-affine bucket phase (kernels/msm/batch_affine.cuh) with the
// production fix-up (msm_gX_bucket_fixup): the kernel bodies run on the host (host_shims.h),
// launched in the order and with the arguments src/backend/cuda/affine_buckets.rs gives them,
// on G1 and G2, and every bucket is compared with a plain XYZZ sum of its entries. Needs no GPU;
// tests/batch_affine_host.rs builds and runs it in CI.
//
//   g++ -O2 -std=c++17 -o /tmp/bah_check kernels/check/batch_affine_host.cpp && /tmp/bah_check
//
// Cases: buckets of 0 to 40 entries with a few of hundreds (so rounds run several times and
// buckets cross many slices), the identity among the bases, a point beside its negation (the
// identity comes out of a round) and beside itself (doublings); slices of 1 entry to all of
// them; 4, 7 and 32 outputs a thread; inversion trees of groups of 16 and of 3 (more levels);
// a later pass accumulating into earlier buckets; a slice too sparse for the round buffers,
// which must be refused. Negative twins: one entry's sign flipped, and one bucket's end moved,
// must each change a bucket. Prints "PASS" and exits 0, or prints what differed and exits 1.
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "host_shims.h"
#include "../msm/msm.cu"
#include "generators.h"

template <class F> struct curve;
template <> struct curve<fp_t> {
    static affine_t<fp_t> generator() { affine_t<fp_t> g; g.x = generator_limbs(G1X); g.y = generator_limbs(G1Y); return g; }
    static constexpr const char* name = "G1";
    static constexpr auto fwd_entries = msm_g1_affine_fwd_entries;
    static constexpr auto fwd_points = msm_g1_affine_fwd_points;
    static constexpr auto bwd_entries = msm_g1_affine_bwd_entries;
    static constexpr auto bwd_points = msm_g1_affine_bwd_points;
    static constexpr auto finish_entries = msm_g1_affine_finish_entries;
    static constexpr auto finish_points = msm_g1_affine_finish_points;
    static constexpr auto tree_up = msm_g1_affine_tree_up;
    static constexpr auto tree_down = msm_g1_affine_tree_down;
    static constexpr auto tree_top = msm_g1_affine_tree_top;
    static constexpr auto fixup = msm_g1_bucket_fixup;
};
template <> struct curve<fp2_t> {
    static affine_t<fp2_t> generator() {
        affine_t<fp2_t> g;
        g.x.c0 = generator_limbs(G2X0); g.x.c1 = generator_limbs(G2X1);
        g.y.c0 = generator_limbs(G2Y0); g.y.c1 = generator_limbs(G2Y1);
        return g;
    }
    static constexpr const char* name = "G2";
    static constexpr auto fwd_entries = msm_g2_affine_fwd_entries;
    static constexpr auto fwd_points = msm_g2_affine_fwd_points;
    static constexpr auto bwd_entries = msm_g2_affine_bwd_entries;
    static constexpr auto bwd_points = msm_g2_affine_bwd_points;
    static constexpr auto finish_entries = msm_g2_affine_finish_entries;
    static constexpr auto finish_points = msm_g2_affine_finish_points;
    static constexpr auto tree_up = msm_g2_affine_tree_up;
    static constexpr auto tree_down = msm_g2_affine_tree_down;
    static constexpr auto tree_top = msm_g2_affine_tree_top;
    static constexpr auto fixup = msm_g2_bucket_fixup;
};

template <class F>
static affine_t<F> to_affine(const xyzz_t<F>& p) {
    affine_t<F> r;
    if (p.is_inf()) { r.x = F::zero(); r.y = F::zero(); return r; }
    const F iz3 = field_inverse(p.zzz), iz = p.zz * iz3;
    r.x = p.x * iz.sqr();
    r.y = p.y * iz3;
    return r;
}
template <class F>
static bool same(const xyzz_t<F>& a, const xyzz_t<F>& b) {
    const affine_t<F> p = to_affine(a), q = to_affine(b);
    return p.x == q.x && p.y == q.y;
}

// Sorted entries over `nb` buckets: bucket b's entries are entries[ends[b-1] .. ends[b]).
struct Problem {
    unsigned nb = 0;
    std::vector<u32> entries, ends;
    unsigned total() const { return nb ? ends[nb - 1] : 0; }
};

// Bucket sizes: mostly 0..40, a few of several hundred; base 0 is the identity; in some buckets
// an entry is followed by its negation or by itself.
static Problem make_problem(std::mt19937_64& rng, unsigned nb, unsigned bases, unsigned max_small, bool sparse) {
    Problem p;
    p.nb = nb;
    for (unsigned b = 0; b < nb; b++) {
        unsigned m = sparse ? (rng() % 4 == 0 ? 0 : 1) : (unsigned)(rng() % (max_small + 1));
        if (!sparse && rng() % 37 == 0) m = 200 + (unsigned)(rng() % 400);
        if (sparse && b == nb / 2) m = 200;  // one large bucket, so that rounds are needed
        for (unsigned i = 0; i < m; i++) {
            u32 e = (u32)(rng() % bases) | (rng() % 2 ? 0x80000000u : 0);
            if (i > 0 && rng() % 9 == 0) e = p.entries.back() ^ 0x80000000u;  // P + (−P)
            else if (i > 0 && rng() % 9 == 0) e = p.entries.back();           // P + P
            p.entries.push_back(e);
        }
        p.ends.push_back((u32)p.entries.size());
    }
    return p;
}

template <class F>
static std::vector<affine_t<F>> make_bases(unsigned n) {
    std::vector<affine_t<F>> out(n);
    const affine_t<F> g = curve<F>::generator();
    xyzz_t<F> acc = xyzz_t<F>::from_affine(g);
    out[0].x = F::zero();  // the identity
    out[0].y = F::zero();
    for (unsigned i = 1; i < n; i++) {
        out[i] = to_affine(acc);
        acc = acc.add_affine(g).add_affine(g).add_affine(g);  // odd multiples, all distinct
    }
    return out;
}

template <class F>
static std::vector<xyzz_t<F>> reference(const std::vector<affine_t<F>>& bases, const Problem& p) {
    std::vector<xyzz_t<F>> out(p.nb, xyzz_t<F>::inf());
    for (unsigned b = 0; b < p.nb; b++)
        for (u32 i = b ? p.ends[b - 1] : 0; i < p.ends[b]; i++) out[b] = out[b].add_affine(load_entry(bases.data(), p.entries[i]));
    return out;
}

struct Knobs {
    unsigned slice, K, g;
};

// AFFINE_FINISH_POINTS of msm.rs: rounds stop once no bucket of a slice holds more; the second
// argument overrides it (tests/batch_affine_host.rs passes the crate's).
static u32 finish_points = 4;

static void host_exclusive_scan(u32* v, unsigned n, u32* total) {
    u32 run = 0;
    for (unsigned i = 0; i < n; i++) { const u32 x = v[i]; v[i] = run; run += x; }
    *total = run;
}

// The bucket phase as affine_buckets.rs runs it (outputs a thread fixed at k.K, tree groups at
// k.g), then the fix-up with chunks of a slice. pass: where the buckets are written (buckets
// itself for a first pass); accumulate: a later pass. False when a round outgrew its buffer.
template <class F>
static bool affine_phase(const std::vector<affine_t<F>>& bases, const Problem& p, const Knobs& k, bool accumulate,
                         std::vector<xyzz_t<F>>& pass, std::vector<xyzz_t<F>>& buckets) {
    typedef curve<F> C;
    const unsigned total = p.total(), slices = (total + k.slice - 1) / k.slice;
    std::vector<u32> bounds(2 * slices);
    msm_affine_slice_buckets(p.ends.data(), p.nb, total, k.slice, slices, bounds.data());
    const unsigned even_cap = k.slice / 8 * 5 + 8, odd_cap = k.slice / 16 * 7 + 8;  // affine_round_capacities
    std::vector<F> X[2] = {std::vector<F>(even_cap), std::vector<F>(odd_cap)};
    std::vector<F> Y[2] = {std::vector<F>(even_cap), std::vector<F>(odd_cap)};
    std::vector<F> prefix(even_cap + 32), prod(even_cap / 4 + 1);
    std::vector<xyzz_t<F>> spills(slices, xyzz_t<F>::inf());
    for (unsigned s = 0; s < slices; s++) {
        const u32 b_lo = bounds[2 * s], nb = bounds[2 * s + 1] - b_lo + 1;
        const u32 e0 = s * k.slice, e1 = std::min(e0 + k.slice, total);
        std::vector<u32> ends[2] = {std::vector<u32>(nb), std::vector<u32>(nb)};
        u32 most = 0, items = 0;
        msm_affine_clip(p.ends.data(), b_lo, nb, e0, e1, ends[0].data(), ends[1].data(), &most);
        const u32* entries = p.entries.data() + e0;
        unsigned round = 0;
        while (most > finish_points) {
            std::vector<u32>& in = ends[round & 1];
            std::vector<u32>& out = ends[(round + 1) & 1];
            if (round > 0) msm_affine_halve(in.data(), nb, out.data());
            host_exclusive_scan(out.data(), nb, &items);
            msm_affine_ends(in.data(), nb, out.data());
            if (items > (round & 1 ? odd_cap : even_cap)) return false;
            const u32 K = k.K, T = (items + K - 1) / K, prev = (round + 1) & 1, o = round & 1;
            if (round == 0) C::fwd_entries(bases.data(), entries, in.data(), out.data(), nb, items, K, T, prefix.data(), prod.data());
            else C::fwd_points(X[prev].data(), Y[prev].data(), in.data(), out.data(), nb, items, K, T, prefix.data(), prod.data());
            // the inversion tree, levels as affine_tree_levels gives them
            std::vector<std::vector<F>> pre_levels, up_levels;
            std::vector<F*> values{prod.data()};
            std::vector<u32> counts{T};
            while (counts.back() > k.g) {
                const u32 groups = (counts.back() + k.g - 1) / k.g;
                pre_levels.emplace_back(counts.back());
                up_levels.emplace_back(groups);
                C::tree_up(values.back(), counts.back(), k.g, pre_levels.back().data(), up_levels.back().data());
                values.push_back(up_levels.back().data());
                counts.push_back(groups);
            }
            std::vector<F> top_pre(k.g), top_up(1);
            C::tree_top(values.back(), counts.back(), k.g, top_pre.data(), top_up.data());
            for (size_t l = pre_levels.size(); l-- > 0;)
                C::tree_down(values[l], counts[l], k.g, pre_levels[l].data(), up_levels[l].data());
            if (round == 0) C::bwd_entries(bases.data(), entries, in.data(), out.data(), nb, items, K, T, prefix.data(), prod.data(), X[o].data(), Y[o].data());
            else C::bwd_points(X[prev].data(), Y[prev].data(), in.data(), out.data(), nb, items, K, T, prefix.data(), prod.data(), X[o].data(), Y[o].data());
            most = (most + 1) / 2;
            round++;
        }
        const unsigned last = (round + 1) & 1;
        if (round == 0) C::finish_entries(bases.data(), entries, ends[0].data(), nb, p.ends.data(), b_lo, e0, pass.data(), &spills[s]);
        else C::finish_points(X[last].data(), Y[last].data(), ends[round & 1].data(), nb, p.ends.data(), b_lo, e0, pass.data(), &spills[s]);
    }
    C::fixup(p.ends.data(), p.nb, k.slice, accumulate ? 1u : 0u, pass.data(), buckets.data(), spills.data());
    return true;
}

static int failures = 0;
static void fail(const std::string& what) {
    printf("FAIL %s\n", what.c_str());
    failures++;
}

template <class F>
static void check_curve(std::mt19937_64& rng) {
    const char* name = curve<F>::name;
    const auto bases = make_bases<F>(97);
    const Problem p = make_problem(rng, 300, 97, 40, false);
    const auto want = reference(bases, p);
    const unsigned total = p.total();
    const Knobs knobs[] = {{total, 4, 16}, {1000, 4, 16}, {64, 7, 3}, {1, 4, 16}, {333, 32, 3}, {4099, 4, 2}};
    for (const Knobs& k : knobs) {
        std::vector<xyzz_t<F>> buckets(p.nb, xyzz_t<F>::inf());
        const std::string what = std::string(name) + ": slices of " + std::to_string(k.slice) + ", " +
                                 std::to_string(k.K) + " outputs a thread, tree groups of " + std::to_string(k.g);
        if (!affine_phase(bases, p, k, false, buckets, buckets)) { fail(what + ": refused"); continue; }
        for (unsigned b = 0; b < p.nb; b++)
            if (!same(buckets[b], want[b])) { fail(what + ": bucket " + std::to_string(b)); break; }
    }
    // a later pass adds into the buckets the first one left
    const Problem q = make_problem(rng, 300, 97, 40, false);
    const auto want_q = reference(bases, q);
    std::vector<xyzz_t<F>> buckets = want, scratch(p.nb, xyzz_t<F>::inf());
    if (!affine_phase(bases, q, Knobs{500, 4, 16}, true, scratch, buckets)) fail(std::string(name) + ": later pass refused");
    for (unsigned b = 0; b < p.nb; b++)
        if (!same(buckets[b], want[b].add(want_q[b]))) { fail(std::string(name) + ": later pass, bucket " + std::to_string(b)); break; }
    // a slice of mostly single entries: round 0 outgrows its buffer and must be refused
    const Problem sparse = make_problem(rng, 4000, 97, 0, true);
    std::vector<xyzz_t<F>> sb(sparse.nb, xyzz_t<F>::inf());
    if (affine_phase(bases, sparse, Knobs{sparse.total(), 4, 16}, false, sb, sb))
        fail(std::string(name) + ": a slice too sparse for its buffers was not refused");
    // negative twins: a flipped sign, a moved bucket end
    for (int twin = 0; twin < 2; twin++) {
        Problem t = p;
        unsigned b = 0;
        while (p.ends[b] - (b ? p.ends[b - 1] : 0) < 3 || (p.entries[p.ends[b] - 1] & 0x7fffffffu) == 0) b++;
        if (twin == 0) t.entries[t.ends[b] - 1] ^= 0x80000000u;
        else t.ends[b] -= 1;
        std::vector<xyzz_t<F>> tb(t.nb, xyzz_t<F>::inf());
        affine_phase(bases, t, Knobs{64, 4, 16}, false, tb, tb);
        bool differs = false;
        for (unsigned i = 0; i < t.nb; i++) differs |= !same(tb[i], want[i]);
        if (!differs) fail(std::string(name) + (twin ? ": a moved bucket end" : ": a flipped sign") + " went unnoticed");
    }
    printf("%s: %zu slicings of %u entries over %u buckets, a later pass, the sparse refusal, 2 twins checked\n", name,
           sizeof knobs / sizeof knobs[0], total, p.nb);
}

int main(int argc, char** argv) {
    const unsigned long long seed = argc > 1 ? strtoull(argv[1], nullptr, 10) : std::random_device{}();
    if (argc > 2) finish_points = (u32)strtoul(argv[2], nullptr, 10);
    printf("seed %llu, rounds until at most %u points a bucket\n", seed, finish_points);
    std::mt19937_64 rng(seed);
    check_curve<fp_t>(rng);
    check_curve<fp2_t>(rng);
    printf("%s (%d failures)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
