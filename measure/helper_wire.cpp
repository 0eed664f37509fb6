// Owns the wire form between a tuning process and its measuring helper (measure_helper.h): the
// target description and the trial results as JSON, and the length-prefixed frames on the pipes.
#include "measure/helper_wire.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tessera::measure {

using nlohmann::json;

json targetToJson(const TargetDesc& t) {
  json mma = json::array();
  for (const auto& m : t.mma)
    mma.push_back({{"dtype", m.dtype}, {"m", m.m}, {"n", m.n}, {"k", m.k}, {"kind", m.kind}, {"peak_share", m.peakShare}});
  return {{"name", t.name}, {"vendor", int(t.vendor)}, {"arch", t.arch}, {"model", t.model}, {"units", t.units},
          {"cores", t.cores}, {"isa", t.isa}, {"simd_bits", t.simdBits}, {"vector_registers", t.vectorRegisters},
          {"l1d", t.l1dBytes}, {"l2", t.l2Bytes}, {"l3", t.l3Bytes}, {"l1d_ways", t.l1dWays}, {"l2_ways", t.l2Ways},
          {"l3_ways", t.l3Ways}, {"line", t.cacheLineBytes}, {"fma_latency", t.fmaLatency},
          {"fma_per_cycle", t.fmaPerCycle}, {"peak_f32", t.peakGflopsF32}, {"peak_f16", t.peakGflopsF16},
          {"peak_bf16", t.peakGflopsBF16}, {"bw", t.memBandwidthGBs}, {"bw_all", t.memBandwidthAllCoresGBs}, {"copy_doubt", t.copyDoubt},
          {"warp", t.warpSize}, {"max_threads_per_block", t.maxThreadsPerBlock}, {"regs_per_sm", t.regsPerSM},
          {"max_regs_per_thread", t.maxRegsPerThread}, {"operand_regs", t.operandRegsPerThread},
          {"smem_per_block", t.smemPerBlock}, {"smem_per_sm", t.smemPerSM}, {"max_blocks_per_sm", t.maxBlocksPerSM},
          {"max_warps_per_sm", t.maxWarpsPerSM}, {"l2_gpu", t.l2Bytes_gpu}, {"clock_ghz", t.clockGHz}, {"mma", mma},
          {"smem_opt_in", t.smemPerBlockOptIn}, {"smem_reserved", t.smemReservedPerBlock},
          {"reg_granule", t.regAllocGranule}, {"simds_per_unit", t.simdsPerUnit}, {"regs_per_simd", t.regsPerSimd},
          {"max_waves_per_simd", t.maxWavesPerSimd}, {"sgprs_per_simd", t.sgprsPerSimd},
          {"max_sgprs_per_wave", t.maxSgprsPerWave}, {"l1_bytes_per_clock", t.l1BytesPerClock},
          {"l1_line", t.l1LineBytes}};
}

Expected<TargetDesc> targetFromJson(const json& j) {
  try {
    TargetDesc t;
    t.name = j.at("name").get<std::string>();
    int v = j.at("vendor").get<int>();
    if (v < 0 || v > int(Vendor::Amd)) return makeError(ErrorCode::InvalidArgument, "target: unknown vendor");
    t.vendor = Vendor(v);
    t.arch = j.at("arch").get<std::string>();
    t.model = j.at("model").get<std::string>();
    j.at("units").get_to(t.units);
    j.at("cores").get_to(t.cores);
    j.at("isa").get_to(t.isa);
    j.at("simd_bits").get_to(t.simdBits);
    j.at("vector_registers").get_to(t.vectorRegisters);
    j.at("l1d").get_to(t.l1dBytes);
    j.at("l2").get_to(t.l2Bytes);
    j.at("l3").get_to(t.l3Bytes);
    j.at("l1d_ways").get_to(t.l1dWays);
    j.at("l2_ways").get_to(t.l2Ways);
    j.at("l3_ways").get_to(t.l3Ways);
    j.at("line").get_to(t.cacheLineBytes);
    j.at("fma_latency").get_to(t.fmaLatency);
    j.at("fma_per_cycle").get_to(t.fmaPerCycle);
    j.at("peak_f32").get_to(t.peakGflopsF32);
    j.at("peak_f16").get_to(t.peakGflopsF16);
    j.at("peak_bf16").get_to(t.peakGflopsBF16);
    j.at("bw").get_to(t.memBandwidthGBs);
    j.at("bw_all").get_to(t.memBandwidthAllCoresGBs);
    j.at("copy_doubt").get_to(t.copyDoubt);
    j.at("warp").get_to(t.warpSize);
    j.at("max_threads_per_block").get_to(t.maxThreadsPerBlock);
    j.at("regs_per_sm").get_to(t.regsPerSM);
    j.at("max_regs_per_thread").get_to(t.maxRegsPerThread);
    j.at("operand_regs").get_to(t.operandRegsPerThread);
    j.at("smem_per_block").get_to(t.smemPerBlock);
    j.at("smem_per_sm").get_to(t.smemPerSM);
    j.at("max_blocks_per_sm").get_to(t.maxBlocksPerSM);
    j.at("max_warps_per_sm").get_to(t.maxWarpsPerSM);
    j.at("l2_gpu").get_to(t.l2Bytes_gpu);
    j.at("clock_ghz").get_to(t.clockGHz);
    for (const auto& m : j.at("mma"))
      t.mma.push_back({m.at("dtype").get<std::string>(), m.at("m").get<int>(), m.at("n").get<int>(), m.at("k").get<int>(),
                       m.at("kind").get<std::string>(), m.at("peak_share").get<double>()});
    j.at("smem_opt_in").get_to(t.smemPerBlockOptIn);
    j.at("smem_reserved").get_to(t.smemReservedPerBlock);
    j.at("reg_granule").get_to(t.regAllocGranule);
    j.at("simds_per_unit").get_to(t.simdsPerUnit);
    j.at("regs_per_simd").get_to(t.regsPerSimd);
    j.at("max_waves_per_simd").get_to(t.maxWavesPerSimd);
    j.at("sgprs_per_simd").get_to(t.sgprsPerSimd);
    j.at("max_sgprs_per_wave").get_to(t.maxSgprsPerWave);
    j.at("l1_bytes_per_clock").get_to(t.l1BytesPerClock);
    j.at("l1_line").get_to(t.l1LineBytes);
    return t;
  } catch (const json::exception& e) {
    return makeError(ErrorCode::InvalidArgument, std::string("target: ") + e.what());
  }
}

json trialToJson(const TrialResult& r) {
  return {{"config", json::parse(r.config.toJson())},
          {"status", trialStatusName(r.status)},
          {"message", r.message},
          {"samples", {r.samples.n, r.samples.median_us, r.samples.p20_us, r.samples.p80_us, r.samples.min_us}},
          {"throughput", r.throughput}, {"gflops", r.gflops}, {"gbps", r.gbps}, {"peak_fraction", r.peakFraction},
          {"max_abs_err", r.maxAbsErr}, {"max_rel_err", r.maxRelErr}, {"compile_s", r.compileSeconds},
          {"run_s", r.runSeconds}, {"emulated", r.emulated}};
}

Expected<TrialResult> trialFromJson(const json& j) {
  try {
    TrialResult r;
    TESSERA_ASSIGN(r.config, ir::Config::fromJson(j.at("config").dump()));
    const std::string status = j.at("status").get<std::string>();
    bool known = false;
    for (TrialStatus s : {TrialStatus::Ok, TrialStatus::InvalidConfig, TrialStatus::CompileError, TrialStatus::Timeout,
                          TrialStatus::Crash, TrialStatus::WrongResult})
      if (status == trialStatusName(s)) r.status = s, known = true;
    if (!known) return makeError(ErrorCode::InvalidArgument, "trial: unknown status '" + status + "'");
    r.message = j.at("message").get<std::string>();
    const json& s = j.at("samples");
    r.samples.n = s.at(0).get<int64_t>();
    r.samples.median_us = s.at(1).get<double>();
    r.samples.p20_us = s.at(2).get<double>();
    r.samples.p80_us = s.at(3).get<double>();
    r.samples.min_us = s.at(4).get<double>();
    j.at("throughput").get_to(r.throughput);
    j.at("gflops").get_to(r.gflops);
    j.at("gbps").get_to(r.gbps);
    j.at("peak_fraction").get_to(r.peakFraction);
    j.at("max_abs_err").get_to(r.maxAbsErr);
    j.at("max_rel_err").get_to(r.maxRelErr);
    j.at("compile_s").get_to(r.compileSeconds);
    j.at("run_s").get_to(r.runSeconds);
    j.at("emulated").get_to(r.emulated);
    return r;
  } catch (const json::exception& e) {
    return makeError(ErrorCode::InvalidArgument, std::string("trial: ") + e.what());
  }
}

namespace {

bool writeAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w, n -= size_t(w);
  }
  return true;
}

bool readAll(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r, n -= size_t(r);
  }
  return true;
}

}  // namespace

Status writeFrame(int fd, const json& j) {
  const std::string text = j.dump();
  if (text.size() > kMaxFrameBytes) return makeError(ErrorCode::InvalidArgument, "helper frame too large");
  unsigned char head[4];
  for (int i = 0; i < 4; ++i) head[i] = (unsigned char)(text.size() >> (8 * i));
  if (!writeAll(fd, reinterpret_cast<const char*>(head), 4) || !writeAll(fd, text.data(), text.size()))
    return makeError(ErrorCode::IOError, std::string("the measuring helper's pipe closed (") + std::strerror(errno) + ")");
  return {};
}

Expected<json> readFrame(int fd) {
  unsigned char head[4];
  if (!readAll(fd, reinterpret_cast<char*>(head), 4)) return makeError(ErrorCode::IOError, "the pipe closed");
  size_t n = size_t(head[0]) | size_t(head[1]) << 8 | size_t(head[2]) << 16 | size_t(head[3]) << 24;
  if (n > kMaxFrameBytes) return makeError(ErrorCode::InvalidArgument, "frame too large");
  std::string text(n, '\0');
  if (!readAll(fd, text.data(), n)) return makeError(ErrorCode::IOError, "the pipe closed mid-frame");
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return makeError(ErrorCode::InvalidArgument, "frame is not JSON");
  return j;
}

}  // namespace tessera::measure
