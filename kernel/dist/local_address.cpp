#include "dist/local_address.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <memory>

#include "base/failure.hpp"

namespace loom {

std::string local_address_toward(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const int resolved = ::getaddrinfo(host == "localhost" ? "127.0.0.1" : host.c_str(), "9", &hints, &found);
  if (resolved != 0 || found == nullptr)
    throw runtime_failure("distributed: MASTER_ADDR " + host + " does not resolve (" + gai_strerror(resolved) +
                          "); set MASTER_ADDR (host launch --master-addr) to node 0's address");
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(found, &::freeaddrinfo);
  std::string last_error;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    const bool routed = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
                        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0;
    if (!routed) last_error = std::strerror(errno);
    ::close(fd);
    if (!routed) continue;
    char text[INET6_ADDRSTRLEN] = {};
    const void* bytes = local.ss_family == AF_INET
                            ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in&>(local).sin_addr)
                            : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6&>(local).sin6_addr);
    if (::inet_ntop(local.ss_family, bytes, text, sizeof(text)) != nullptr) return text;
  }
  throw runtime_failure("distributed: no route from this machine to MASTER_ADDR " + host + " (" + last_error +
                        "); check the address and this node's network");
}

bool is_this_machine(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host == "localhost" ? "127.0.0.1" : host.c_str(), "0", &hints, &found) != 0 || found == nullptr)
    return false;
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(found, &::freeaddrinfo);
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    // Binding succeeds only to an address of one of this machine's interfaces (port 0: any).
    const bool mine = ::bind(fd, a->ai_addr, a->ai_addrlen) == 0;
    ::close(fd);
    if (mine) return true;
  }
  return false;
}

std::string describe_node(const std::string& address) {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return std::string(host) + " (" + address + ")";
}

}  // namespace loom
