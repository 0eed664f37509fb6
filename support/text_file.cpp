// Owns the bounded reading of user-named files (text_file.h).
#include "support/text_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tessera {

std::string describeBytes(size_t n) {
  if (n >= (size_t{1} << 20) && n % (size_t{1} << 20) == 0) return std::to_string(n >> 20) + " MiB";
  if (n >= 1024 && n % 1024 == 0) return std::to_string(n >> 10) + " KiB";
  return std::to_string(n) + " bytes";
}

Expected<int> openRegularFile(const std::string& path, const std::string& what) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return makeError(ErrorCode::IOError, "cannot read " + what + " '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return makeError(ErrorCode::IOError, "cannot read " + what + " '" + path + "': " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    return makeError(ErrorCode::InvalidArgument, what + " '" + path + "' is " + kind + ", not a regular file");
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

Expected<std::string> readTextFile(const std::string& path, const TextLimits& limits) {
  struct {
    size_t max_bytes, max_line_bytes;
    std::string what;
  } l{limits.max_bytes, limits.max_line_bytes, limits.what};
  TESSERA_ASSIGN(const int fd, openRegularFile(path, l.what));
  std::string out;
  char buf[1 << 16];
  size_t line_start = 0;
  for (;;) {
    const size_t want = std::min(sizeof buf, l.max_bytes + 1 - out.size());
    const ssize_t n = ::read(fd, buf, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return makeError(ErrorCode::IOError, "cannot read " + l.what + " '" + path + "': " + std::strerror(e));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > l.max_bytes) {
      ::close(fd);
      return makeError(ErrorCode::InvalidArgument,
                       l.what + " '" + path + "' is larger than " + describeBytes(l.max_bytes));
    }
    if (l.max_line_bytes) {
      for (size_t nl = out.find('\n', line_start); nl != std::string::npos; nl = out.find('\n', line_start))
        line_start = nl + 1;
      if (out.size() - line_start > l.max_line_bytes) {
        ::close(fd);
        return makeError(ErrorCode::InvalidArgument, l.what + " '" + path + "' has a line longer than " +
                                                         describeBytes(l.max_line_bytes));
      }
    }
  }
  ::close(fd);
  if (l.max_line_bytes) {
    // Lines before the last one were checked as they ended; check the ones of the last read too.
    size_t start = 0;
    for (size_t nl = out.find('\n'); ; nl = out.find('\n', start)) {
      const size_t end = nl == std::string::npos ? out.size() : nl;
      if (end - start > l.max_line_bytes)
        return makeError(ErrorCode::InvalidArgument, l.what + " '" + path + "' has a line longer than " +
                                                         describeBytes(l.max_line_bytes));
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
  }
  return out;
}

}  // namespace tessera
