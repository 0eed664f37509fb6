// Owns the host feature extractor: the knob features plus quantities derived from (kernel,
// config, target) that explain CPU performance across shapes — tile footprints relative to the
// caches, register-tile arithmetic intensity and register pressure, vector utilization, trip
// counts and padding waste. Derived values are computed the way host codegen applies the knobs
// (clamped tiles, balanced KC), so the model sees what actually runs.
#include <algorithm>
#include <cmath>

#include "costmodel/features.h"
#include "ir/families.h"

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

class HostFeatures : public FeatureExtractor {
 public:
  HostFeatures(const ir::Kernel& k, const ir::Space& space, const TargetDesc& t)
      : base_(makeKnobFeatures(space)), target_(t), family_(k.family) {
    lanes_ = std::max(4, t.simdBits / 32);
    if (family_ == ir::Family::Gemm) {
      if (auto g = ir::analyzeGemm(k); g.ok()) {
        m_ = g->m;
        n_ = g->n;
        kdim_ = g->k;
        batch_ = std::max<int64_t>(1, g->batch);
        elem_ = ir::byteSize(g->inType);
      }
    } else if (family_ == ir::Family::Elementwise) {
      if (auto r = ir::analyzeElementwise(k); r.ok()) {
        inner_ = r->iter.back();
        for (int64_t d : r->iter) numel_ *= d;
      }
      bytes_ = ir::kernelBytes(k);
    } else if (auto a = ir::analyzeAttention(k); a.ok()) {
      seqq_ = a->spec.seq_q;
      seqkv_ = a->spec.seq_kv;
      hd_ = a->spec.head_dim;
      heads_ = a->spec.heads * a->spec.batch;
      causal_ = a->spec.causal;
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
    bool packed = knobStr(c, "schedule") == "packed";
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
            packed ? 1.f : 0.f,
            float(double(kc) / double(kdim_)),
            float(KU),
            lg(double(m_)),
            lg(double(n_)),
            lg(double(kdim_))};
  }

  std::vector<float> elementwise(const ir::Config& c) const {
    int64_t vw = knob(c, "VW", lanes_), un = knob(c, "UNROLL", 1), nt = knob(c, "NT", 0);
    int64_t tile = vw * un;
    double util = double(std::min(vw, lanes_)) / double(lanes_);
    double waste = double(roundUp(inner_, vw)) / double(std::max<int64_t>(inner_, 1)) - 1.0;
    return {lg(double(numel_)),
            float(double(tile) * 4 / double(std::max<int64_t>(target_.l1dBytes, 1))),
            float(bytes_ / double(std::max<int64_t>(target_.l2Bytes, 1))),
            float(bytes_ / double(std::max<int64_t>(target_.l3Bytes, 1))),
            0.f,
            float(util),
            float(double(un) * double(ceilDiv(vw, lanes_)) * 3 / std::max(1, target_.vectorRegisters)),
            lg(double(numel_ / std::max<int64_t>(inner_, 1))),
            lg(double(ceilDiv(inner_, tile))),
            float(waste),
            float(nt),
            0.f,
            float(un),
            lg(double(inner_)),
            0.f,
            0.f};
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

std::unique_ptr<FeatureExtractor> makeHostFeatures(const ir::Kernel& k, const ir::Space& space, const TargetDesc& t) {
  return std::make_unique<HostFeatures>(k, space, t);
}

}  // namespace tessera::costmodel
