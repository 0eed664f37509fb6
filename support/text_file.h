// Owns reading the files a user names on the command line (kernel files, kernel lists, imported
// tables) within limits: only regular files (a FIFO would block the open forever, a device such as
// /dev/zero never ends), opened without blocking, read up to a total size and a line length and no
// further, so a wrong path is one clear error, never a hang or gigabytes of memory.
#pragma once

#include <cstddef>
#include <string>

#include "support/status.h"

namespace tessera {

struct TextLimits {
  size_t max_bytes = size_t{16} << 20;  // the whole file; one byte more is an error
  size_t max_line_bytes = 0;            // 0: no line limit (the file may be one line)
  const char* what = "file";            // how errors name it: "kernel file", "kernel list", ...
};

// Opens `path` for reading when it is a regular file: the descriptor (O_CLOEXEC, blocking reads),
// or InvalidArgument naming what it is instead, IOError when it cannot be opened.
Expected<int> openRegularFile(const std::string& path, const std::string& what);

// The whole file within the limits (InvalidArgument naming the limit when it is passed).
Expected<std::string> readTextFile(const std::string& path, const TextLimits& limits);

// A description of a size for messages: "16 MiB", "64 KiB", "100 bytes".
std::string describeBytes(size_t n);

}  // namespace tessera
