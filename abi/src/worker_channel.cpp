#include "worker_channel.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>

namespace ringkv::abi {

using namespace wire;

namespace {

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

// Waits until fd is ready for `events` or the deadline passes (ok also after EINTR: retry).
Io wait_ready(int fd, short events, Clock::time_point deadline) {
  pollfd pfd{fd, events, 0};
  const int left = remaining_ms(deadline);
  if (left == 0) return Io::timeout;
  const int pr = ::poll(&pfd, 1, left);
  if (pr == 0) return Io::timeout;
  if (pr < 0 && errno != EINTR) return Io::closed;
  return Io::ok;
}

}  // namespace

Io send_all(int fd, const uint8_t* p, size_t n, Clock::time_point deadline) {
  while (n > 0) {
    const ssize_t r = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (const Io w = wait_ready(fd, POLLOUT, deadline); w != Io::ok) return w;
      continue;
    }
    return Io::closed;
  }
  return Io::ok;
}

Io send_message(int fd, const Header& h, const uint8_t* p, size_t n, Clock::time_point deadline) {
  iovec iov[2];
  iov[0].iov_base = const_cast<Header*>(&h);
  iov[0].iov_len = sizeof h;
  iov[1].iov_base = const_cast<uint8_t*>(p);
  iov[1].iov_len = n;
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = n > 0 ? 2 : 1;
  for (;;) {
    const ssize_t r = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r >= 0) {
      auto sent = static_cast<size_t>(r);
      if (sent < sizeof h) {
        if (const Io io = send_all(fd, reinterpret_cast<const uint8_t*>(&h) + sent, sizeof h - sent, deadline); io != Io::ok) {
          return io;
        }
        sent = sizeof h;
      }
      return send_all(fd, p + (sent - sizeof h), n - (sent - sizeof h), deadline);
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (const Io w = wait_ready(fd, POLLOUT, deadline); w != Io::ok) return w;
      continue;
    }
    return Io::closed;
  }
}

Io recv_all(int fd, uint8_t* p, size_t n, Clock::time_point deadline) {
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return Io::closed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (const Io w = wait_ready(fd, POLLIN, deadline); w != Io::ok) return w;
      continue;
    }
    return Io::closed;
  }
  return Io::ok;
}

}  // namespace ringkv::abi
