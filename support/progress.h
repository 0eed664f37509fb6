// Owns the live progress line: rewritten in place on a terminal, one plain line per update
// otherwise (logs and CI stay readable).
#pragma once

#include <cstdio>
#include <string>
#include <unistd.h>

namespace tessera {

class ProgressLine {
 public:
  explicit ProgressLine(FILE* out = stderr) : out_(out), tty_(isatty(fileno(out)) != 0) {}
  bool isTty() const { return tty_; }
  void update(const std::string& text) {
    if (tty_) {
      std::string padded = text;
      if (padded.size() < last_) padded.append(last_ - padded.size(), ' ');
      last_ = text.size();
      std::fprintf(out_, "\r%s", padded.c_str());
    } else {
      std::fprintf(out_, "%s\n", text.c_str());
    }
    std::fflush(out_);
  }
  // Ends the in-place line (no-op when not a terminal).
  void finish() {
    if (tty_ && last_) std::fprintf(out_, "\n");
    last_ = 0;
    std::fflush(out_);
  }

 private:
  FILE* out_;
  bool tty_;
  size_t last_ = 0;
};

}  // namespace tessera
