// Owns what a comparison across targets shows, for `tessera compare` and for the dashboard's
// Compare page (POST /v1/compare on `tessera serve`): the attributes in print order, each
// target's cell text, the JSON document both print, and the serve side's way from a request (a
// stored key or the kernel's IR text, target names) to that document.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "service/dashboard.h"
#include "ir/ir.h"
#include "search/compare.h"

namespace tessera::cli {

const char* compareSourceName(search::CompareRow::Source s);
// The rows of the side-by-side table, in order (a row shows when any target has a cell for it).
const std::vector<std::string>& compareAttributes();
std::string compareCell(const search::CompareRow& r, const std::string& what, const ir::Kernel& k);
// What `tessera compare --json` prints: kernel, attributes (the table's row order), why, targets.
nlohmann::json compareJson(const search::Comparison& c, const ir::Kernel& k);

// The kernel a stored key names, rebuilt where the key says everything about it (GEMM and
// attention without epilogue or scaling: the rebuilt kernel's workload hash must equal the key's);
// Unsupported naming the way out otherwise (the kernel's IR text).
Expected<ir::Kernel> kernelFromKey(const cache::HardKey& key);

// The kernel behind `workload` from its text in a kernel table (kernel_text.h): any family, fused
// chains and epilogues included. The text came from a client, so it is parsed with the parser's
// limits, verified and hashed again (InvalidArgument, one line, unless it is the kernel of that
// hash); the kernel is named <family>_<first 8 digits> (the text is anonymized).
Expected<ir::Kernel> kernelFromText(const std::string& workload, const std::string& text);

// POST /v1/compare for `tessera serve`: the comparison from the serving store alone (no shared
// cache, no tuning), as compareJson's text. A key's kernel comes from the key where it says
// everything (kernelFromKey), else from the store's kernel table (kernelFromText).
Expected<std::string> serveCompare(cache::RecordStore& store, const cache::CompareRequest& req);

}  // namespace tessera::cli
