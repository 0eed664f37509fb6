// Owns the inline-PTX text of the register-A wgmma (see wgmma_ptx.h) and its recognition.
#include "codegen/nvidia/wgmma_ptx.h"

#include <cstdio>

namespace tessera::codegen {

std::string wgmmaRegAPtx(const WgmmaRegA& w) {
  const int acc = w.n / 2;
  const char* t = w.bf16 ? "bf16" : "f16";
  std::string s = "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\nwgmma.mma_async.sync.aligned.m64n" + std::to_string(w.n) +
                  "k16.f32." + t + "." + t + " {";
  for (int i = 0; i < acc; ++i) s += (i ? ", $" : "$") + std::to_string(i);
  s += "}, {";
  for (int i = 0; i < 4; ++i) s += (i ? ", $" : "$") + std::to_string(acc + i);
  s += "}, $" + std::to_string(acc + 4) + ", p, 1, 1, " + (w.bMnMajor ? "1" : "0") + ";\n}\n";
  return s;
}

std::string wgmmaRegAConstraints(int n) {
  const int acc = n / 2;
  std::string s;
  for (int i = 0; i < acc; ++i) s += "=f,";
  s += "r,r,r,r,l";
  for (int i = 0; i < acc; ++i) s += "," + std::to_string(i);
  return s;
}

std::optional<WgmmaRegA> parseWgmmaRegAPtx(std::string_view text) {
  const std::string_view key = "wgmma.mma_async.sync.aligned.m64n";
  const size_t at = text.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  int n = 0;
  char type[8] = {};
  const std::string rest(text.substr(at + key.size(), 32));
  if (std::sscanf(rest.c_str(), "%dk16.f32.%4[a-z0-9]", &n, type) != 2 || n < 8 || n > 256 || n % 8) return std::nullopt;
  for (bool mn : {false, true}) {
    WgmmaRegA w{n, std::string_view(type) == "bf16", mn};
    if (wgmmaRegAPtx(w) == text) return w;
  }
  return std::nullopt;
}

}  // namespace tessera::codegen
