// Owns the host feature extractor: the knob features plus quantities derived from (kernel,
// config, target) that explain CPU performance across shapes — tile footprints relative to the
// caches, register-tile arithmetic intensity and register pressure, vector utilization, trip
// counts and padding waste. Derived values are computed the way host codegen applies the knobs
// (clamped tiles, balanced KC), so the model sees what actually runs.
#include <algorithm>
#include <cmath>

#include "costmodel/features.h"

namespace tessera::costmodel {
namespace {

int64_t roundUp(int64_t v, int64_t m) { return m <= 0 ? v : (v + m - 1) / m * m; }
int64_t ceilDiv(int64_t a, int64_t b) { return b <= 0 ? 0 : (a + b - 1) / b; }
float lg(double v) { return v > 0 ? float(std::log2(v)) : -1.f; }

int64_t knob(const ir::Config& c, const char* name, int64_t def) {
  auto it = c.values.find(name);
  if (it == c.values.end()) return def;
  if (const auto* i = std::get_if<int64_t>(&it->second)) return *i;
  return def;
}
std::string knobStr(const ir::Config& c, const char* name) {
  auto it = c.values.find(name);
  if (it == c.values.end()) return "";
  if (const auto* s = std::get_if<std::string>(&it->second)) return *s;
  return "";
}

int64_t elemBytes(const std::string& dtype) {
  std::string first = dtype.substr(0, dtype.find(':'));
  return first == "f16" || first == "bf16" ? 2 : first == "f64" ? 8 : 4;
}

int64_t dim(const std::vector<int64_t>& s, size_t i) { return i < s.size() ? std::max<int64_t>(1, s[i]) : 1; }

class HostFeatures : public FeatureExtractor {
 public:
  HostFeatures(const WorkloadDesc& w, const ir::Space& space, const TargetDesc& t)
      : base_(makeKnobFeatures(space)), target_(t) {
    lanes_ = std::max(4, t.simdBits / 32);
    elem_ = elemBytes(w.dtype);
    const auto& s = w.shape;
    if (w.family == "gemm") {
      family_ = ir::Family::Gemm;
      size_t o = s.size() >= 4 ? 1 : 0;  // [batch,] M, N, K
      batch_ = o ? dim(s, 0) : 1;
      m_ = dim(s, o);
      n_ = dim(s, o + 1);
      kdim_ = dim(s, o + 2);
    } else if (w.family == "elementwise") {
      family_ = ir::Family::Elementwise;
      inner_ = s.empty() ? 1 : dim(s, s.size() - 1);
      for (int64_t d : s) numel_ *= std::max<int64_t>(1, d);
      // The key does not say how many operands there are: one read and one written stream (the
      // feature is constant within a workload; across workloads it orders them by size).
      bytes_ = 2.0 * double(numel_) * double(elem_);
    } else {
      family_ = ir::Family::Attention;
      heads_ = dim(s, 0) * dim(s, 1);
      seqq_ = dim(s, 3);
      seqkv_ = dim(s, 4);
      hd_ = dim(s, 5);
      causal_ = w.layout == "causal";
    }
  }

  std::vector<std::string> names() const override {
    std::vector<std::string> n = base_->names();
    for (const char* d : derivedNames()) n.push_back(d);
    return n;
  }

  std::vector<float> extract(const ir::Config& c) const override {
    std::vector<float> f = base_->extract(c);
    std::vector<float> d;
    switch (family_) {
      case ir::Family::Gemm: d = gemm(c); break;
      case ir::Family::Elementwise: d = elementwise(c); break;
      case ir::Family::Attention: d = attention(c); break;
    }
    d.resize(kDerived, 0.f);  // one layout for every family: models can share data
    f.insert(f.end(), d.begin(), d.end());
    return f;
  }

 private:
  static constexpr size_t kDerived = 16;
  static std::vector<const char*> derivedNames() {
    return {"d0_problem_log2", "d1_l1_ratio", "d2_l2_ratio", "d3_l3_ratio", "d4_intensity", "d5_vec_util",
            "d6_vregs_ratio", "d7_trips_outer_log2", "d8_trips_inner_log2", "d9_pad_waste", "d10_packed",
            "d11_kc_frac", "d12_aux1", "d13_aux2", "d14_aux3", "d15_aux4"};
  }

  std::vector<float> gemm(const ir::Config& c) const {
    // Every schedule but plain packs its panels (blis, bf16dot and amx too); d10 tells them apart.
    const std::string sched = knobStr(c, "schedule");
    bool packed = sched != "plain";
    float schedCode = sched == "plain" ? 0.f : sched == "packed" ? 1.f : sched == "blis" ? 2.f : sched == "bf16dot" ? 3.f : sched == "kvec" ? 5.f : sched == "nvec" ? 6.f : 4.f;
    int64_t MR = knob(c, "MR", 8), NR = knob(c, "NR", 32), MC = knob(c, "MC", 64), NC = knob(c, "NC", 512),
            KC = knob(c, "KC", 256), KU = knob(c, "KU", 1);
    int64_t mc = packed ? std::min(MC, roundUp(m_, MR)) : std::min(MC, m_);
    int64_t nc = packed ? std::min(NC, roundUp(n_, NR)) : std::min(NC, n_);
    int64_t kc = std::min(KC, kdim_);
    kc = ceilDiv(kdim_, ceilDiv(kdim_, std::max<int64_t>(kc, 1)));
    int64_t mr = packed ? MR : std::min(MR, mc), nr = packed ? NR : std::min(NR, nc);
    double nvec = double(ceilDiv(nr, lanes_));
    double regs = double(mr) * nvec + nvec + 1;
    double padded = double(roundUp(m_, mr)) * double(roundUp(n_, nr));
    return {lg(double(m_) * double(n_) * double(kdim_) * double(batch_)),
            float(double(kc * nr + mr * kc) * elem_ / double(std::max<int64_t>(target_.l1dBytes, 1))),
            float(double(mc * kc) * elem_ / double(std::max<int64_t>(target_.l2Bytes, 1))),
            float(double(kc * nc) * elem_ / double(std::max<int64_t>(target_.l3Bytes, 1))),
            float(double(mr * nr) / double(mr + nr)),
            float(double(nr) / (nvec * lanes_)),
            float(regs / std::max(1, target_.vectorRegisters)),
            lg(double(ceilDiv(m_, mc) * ceilDiv(n_, nc) * ceilDiv(kdim_, kc))),
            lg(double(ceilDiv(mc, mr) * ceilDiv(nc, nr))),
            float(padded / (double(m_) * double(n_)) - 1.0),
            schedCode,
            float(double(kc) / double(kdim_)),
            float(KU),
            lg(double(m_)),
            lg(double(n_)),
            lg(double(kdim_))};
  }

  std::vector<float> elementwise(const ir::Config& c) const {
    int64_t vw = knob(c, "VW", lanes_), un = knob(c, "UNROLL", 1), nt = knob(c, "NT", 0), chunk = knob(c, "CHUNK", 0),
            rows = knob(c, "ROWS", 1);
    int64_t tile = vw * un;
    // The inner loop walks a column block (CHUNK > 0) or a whole row; its trip count and masked
    // tail are per block: a block of exactly one tile runs without a loop at all.
    int64_t span = chunk > 0 ? std::min(chunk, inner_) : inner_;
    double util = double(std::min(vw, lanes_)) / double(lanes_);
    double waste = double(roundUp(span, tile)) / double(std::max<int64_t>(span, 1)) - 1.0;
    return {lg(double(numel_)),
            float(double(tile) * 4 / double(std::max<int64_t>(target_.l1dBytes, 1))),
            float(bytes_ / double(std::max<int64_t>(target_.l2Bytes, 1))),
            float(bytes_ / double(std::max<int64_t>(target_.l3Bytes, 1))),
            float(double(span) * double(elem_) / double(std::max<int64_t>(target_.l1dBytes, 1))),
            float(util),
            float(double(un) * double(ceilDiv(vw, lanes_)) * 3 / std::max(1, target_.vectorRegisters)),
            lg(double(numel_ / std::max<int64_t>(inner_, 1))),
            lg(double(ceilDiv(span, tile))),
            float(waste),
            float(nt),
            chunk > 0 ? 1.f : 0.f,
            float(un),
            lg(double(inner_)),
            lg(double(ceilDiv(inner_, span))),
            float(rows)};
  }

  std::vector<float> attention(const ir::Config& c) const {
    int64_t BQ = knob(c, "BQ", 48), BK = knob(c, "BK", 128), MR1 = knob(c, "MR1", 8), NR1 = knob(c, "NR1", 32),
            MR2 = knob(c, "MR2", 6), NR2 = knob(c, "NR2", 64);
    double v1 = double(ceilDiv(NR1, lanes_)), v2 = double(ceilDiv(NR2, lanes_));
    double regs = std::max(MR1 * v1 + v1 + 1, MR2 * v2 + v2 + 1);
    double scratch = double(BQ * BK + 2 * BQ * hd_) * 4;  // S/P block, Q block, accumulator
    double kvblock = double(2 * BK * hd_) * 4;
    double qpad = double(roundUp(seqq_, BQ)) / double(std::max<int64_t>(seqq_, 1)) - 1.0;
    return {lg(double(heads_) * double(seqq_) * double(seqkv_) * double(hd_)),
            float(scratch / double(std::max<int64_t>(target_.l1dBytes, 1))),
            float((scratch + kvblock) / double(std::max<int64_t>(target_.l2Bytes, 1))),
            float(double(seqkv_ * hd_ * 8) / double(std::max<int64_t>(target_.l3Bytes, 1))),
            float(double(MR1 * NR1) / double(MR1 + NR1)),
            float(double(std::min<int64_t>(NR2, hd_)) / (v2 * lanes_)),
            float(regs / std::max(1, target_.vectorRegisters)),
            lg(double(ceilDiv(seqq_, BQ))),
            lg(double(ceilDiv(seqkv_, BK))),
            float(qpad),
            causal_ ? 1.f : 0.f,
            float(double(MR2 * NR2) / double(MR2 + NR2)),
            float(knob(c, "U1", 1)),
            float(knob(c, "U2", 1)),
            lg(double(hd_)),
            lg(double(seqkv_))};
  }

  std::unique_ptr<FeatureExtractor> base_;
  TargetDesc target_;
  ir::Family family_;
  int64_t lanes_ = 16;
  int64_t m_ = 1, n_ = 1, kdim_ = 1, batch_ = 1, elem_ = 4;
  int64_t inner_ = 1, numel_ = 1;
  double bytes_ = 0;
  int64_t seqq_ = 1, seqkv_ = 1, hd_ = 1, heads_ = 1;
  bool causal_ = false;
};

}  // namespace

std::unique_ptr<FeatureExtractor> makeHostFeatures(const WorkloadDesc& w, const ir::Space& space, const TargetDesc& t) {
  return std::make_unique<HostFeatures>(w, space, t);
}

}  // namespace tessera::costmodel
