// Owns the names of trial statuses and the mapping from library error categories to them.
#include "measure/trial.h"

namespace tessera::measure {

std::string configKey(const ir::Config& c) { return c.str(); }

const char* trialStatusName(TrialStatus s) {
  switch (s) {
    case TrialStatus::Ok: return "ok";
    case TrialStatus::InvalidConfig: return "invalid-config";
    case TrialStatus::CompileError: return "compile-error";
    case TrialStatus::Timeout: return "timeout";
    case TrialStatus::Crash: return "crash";
    case TrialStatus::WrongResult: return "wrong-result";
  }
  return "crash";
}

TrialStatus trialStatusFromError(ErrorCode c) {
  switch (c) {
    case ErrorCode::InvalidConfig:
    case ErrorCode::InvalidArgument:
    case ErrorCode::Unsupported: return TrialStatus::InvalidConfig;
    case ErrorCode::CompileError:
    case ErrorCode::VerifyError:
    case ErrorCode::ParseError: return TrialStatus::CompileError;
    case ErrorCode::Timeout: return TrialStatus::Timeout;
    case ErrorCode::WrongResult: return TrialStatus::WrongResult;
    default: return TrialStatus::Crash;  // RuntimeError, IOError, Internal, ...: the candidate failed
  }
}

}  // namespace tessera::measure
