// files.cpp — whole-file reads through POSIX calls (no iostreams on these paths): regular files only,
// never blocking, never past a size cap.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "cache_internal.hpp"
#include "jit_internal.hpp"
#include "jitbridge/checked.hpp"

namespace jitbridge::detail {

int rename_into_place(const std::string& temp, const std::string& path) noexcept {
  if (::rename(temp.c_str(), path.c_str()) == 0) return 0;
  const int err = errno;
  if ((err == EISDIR || err == ENOTEMPTY || err == EEXIST) && ::rmdir(path.c_str()) == 0 &&
      ::rename(temp.c_str(), path.c_str()) == 0)
    return 0;
  struct stat st;
  if (err == ENOENT && ::lstat(temp.c_str(), &st) != 0 && errno == ENOENT && ::lstat(path.c_str(), &st) == 0 &&
      S_ISREG(st.st_mode))
    return 0;
  return err;
}

bool read_regular_file(int fd, std::uint64_t max_bytes, std::string& out) {
  struct stat st;
  if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 0 ||
      static_cast<std::uint64_t>(st.st_size) > max_bytes)
    return false;
  out.clear();
  out.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    // At most max_bytes + 1 bytes in all: one more than allowed proves the file too big.
    const std::uint64_t room = checked::add_saturated(max_bytes - out.size(), 1);
    const ssize_t n = ::read(fd, buf, room < sizeof buf ? static_cast<std::size_t>(room) : sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) return true;
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > max_bytes) return false;
  }
}

bool read_file(const std::string& path, std::string& out) {
  // O_NONBLOCK: opening a FIFO put where a header was must not wait for a writer; it is then
  // refused as not regular. Symlinks are followed (include directories often hold them).
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  return fd && read_regular_file(fd.get(), kMaxReadFileBytes, out);
}

}  // namespace jitbridge::detail
