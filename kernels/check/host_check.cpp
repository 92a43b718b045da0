// Host-side check of the field and curve arithmetic in kernels/ff and kernels/ec (no GPU needed).
// Reads one operation per line from stdin (numbers as hex of their Montgomery-form integers),
// prints the results; kernels/check/host_check.py drives it and compares with Python integers.
// Build: g++ -O2 -std=c++17 -o /tmp/host_check kernels/check/host_check.cpp
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include "../ec/jacobian.cuh"

template <int N, class T>
static T parse(const std::string& hex) {
    T r = T::zero();
    int len = (int)hex.size();
    for (int i = 0; i < len; i++) {
        char ch = hex[len - 1 - i];
        u32 v = (ch >= '0' && ch <= '9') ? ch - '0' : (ch | 32) - 'a' + 10;
        r.l[i / 8] |= v << (4 * (i % 8));
    }
    return r;
}
template <int N, class T>
static std::string show(const T& x) {
    std::string s;
    char buf[16];
    for (int i = N - 1; i >= 0; i--) { snprintf(buf, sizeof buf, "%08x", x.l[i]); s += buf; }
    return s;
}
static fp_t fp(std::istream& in) { std::string h; in >> h; return parse<12, fp_t>(h); }
static fr_t fr(std::istream& in) { std::string h; in >> h; return parse<8, fr_t>(h); }
static fp2_t fp2(std::istream& in) { fp2_t r; r.c0 = fp(in); r.c1 = fp(in); return r; }
static std::string s(const fp_t& x) { return show<12>(x); }
static std::string s(const fp2_t& x) { return show<12>(x.c0) + " " + show<12>(x.c1); }
template <class F> F rd(std::istream& in);
template <> fp_t rd<fp_t>(std::istream& in) { return fp(in); }
template <> fp2_t rd<fp2_t>(std::istream& in) { return fp2(in); }
template <class F> jacobian_t<F> jac(std::istream& in) { jacobian_t<F> p; p.x = rd<F>(in); p.y = rd<F>(in); p.z = rd<F>(in); return p; }
template <class F> affine_t<F> aff(std::istream& in) { affine_t<F> p; p.x = rd<F>(in); p.y = rd<F>(in); return p; }
template <class F> std::string sj(const jacobian_t<F>& p) { return s(p.x) + " " + s(p.y) + " " + s(p.z); }

template <class F>
static bool curve_op(const std::string& op, std::istream& in) {
    if (op == "add") { auto p = jac<F>(in); auto q = jac<F>(in); std::cout << sj(p.add(q)) << "\n"; }
    else if (op == "madd") { auto p = jac<F>(in); auto q = aff<F>(in); std::cout << sj(p.add_affine(q)) << "\n"; }
    else if (op == "dbl") { auto p = jac<F>(in); std::cout << sj(p.dbl()) << "\n"; }
    else return false;
    return true;
}

int main() {
    std::string line;
    while (std::getline(std::cin, line)) {
        std::istringstream in(line);
        std::string op;
        in >> op;
        if (op == "frmul") { auto a = fr(in), b = fr(in); std::cout << show<8>(a * b) << "\n"; }
        else if (op == "fradd") { auto a = fr(in), b = fr(in); std::cout << show<8>(a + b) << "\n"; }
        else if (op == "frsub") { auto a = fr(in), b = fr(in); std::cout << show<8>(a - b) << "\n"; }
        else if (op == "frfrom") { auto a = fr(in); std::cout << show<8>(a.from_mont()) << "\n"; }
        else if (op == "fpmul") { auto a = fp(in), b = fp(in); std::cout << s(a * b) << "\n"; }
        else if (op == "fpadd") { auto a = fp(in), b = fp(in); std::cout << s(a + b) << "\n"; }
        else if (op == "fpsub") { auto a = fp(in), b = fp(in); std::cout << s(a - b) << "\n"; }
        else if (op == "fpneg") { auto a = fp(in); std::cout << s(-a) << "\n"; }
        else if (op == "fp2mul") { auto a = fp2(in), b = fp2(in); std::cout << s(a * b) << "\n"; }
        else if (op == "fp2sqr") { auto a = fp2(in); std::cout << s(a.sqr()) << "\n"; }
        else if (op.rfind("g1", 0) == 0) { curve_op<fp_t>(op.substr(2), in); }
        else if (op.rfind("g2", 0) == 0) { curve_op<fp2_t>(op.substr(2), in); }
        else { std::cout << "?\n"; }
        std::cout.flush();
    }
}
