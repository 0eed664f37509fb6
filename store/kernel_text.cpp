// Owns the check of a kernel text against the workload it is filed under.
#include "store/kernel_text.h"

#include "support/hash.h"

namespace tessera::cache {

Status checkKernelText(std::string_view workload, std::string_view text) {
  auto bad = [](const std::string& m) { return makeError(ErrorCode::InvalidArgument, m); };
  if (workload.size() != 64 || workload.find_first_not_of("0123456789abcdef") != std::string_view::npos)
    return bad("kernel text: the workload must be 64 lowercase hex digits");
  if (text.empty()) return bad("kernel text: empty");
  if (text.size() > kMaxKernelTextBytes)
    return bad("kernel text: " + std::to_string(text.size()) + " bytes, at most " + std::to_string(kMaxKernelTextBytes));
  for (unsigned char c : text)
    if ((c < 0x20 && c != '\n' && c != '\t') || c > 0x7e) return bad("kernel text: only printable ASCII, tabs and newlines");
  const std::string got = sha256Hex(text);
  if (got != workload)
    return bad("kernel text does not hash to the key's workload (sha256 " + got.substr(0, 12) + "..., the key says " +
               std::string(workload.substr(0, 12)) + "...)");
  return {};
}

}  // namespace tessera::cache
